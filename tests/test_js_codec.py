"""The JavaScript codec (``@otel-footprint/recorder``'s ``encodePayload``) against the Python one on
generated payloads: the same event name and the same typed attributes, byte for byte.

Generated payloads stay inside what both languages can say alike: no integral floats (JavaScript has
one number type: ``2.0`` is an int there), integers within 2**53, no integer-like object keys (a
JavaScript object orders them first), no lone surrogates. Skips without Node.js or the built package.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from otel_footprint import semconv
from otel_footprint.codec import encode_payload

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "js" / "otel-footprint"
ENCODER = PACKAGE / "scripts" / "encode-stdin.mjs"
BATCH = 12


def _typed() -> Any:
    spec = importlib.util.spec_from_file_location("js_vectors", ROOT / "scripts" / "js_vectors.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.typed_attributes


typed_attributes = _typed()

_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
_key = _text.filter(lambda k: not k.isdigit())
_field = st.from_regex(r"[a-z][a-zA-Z0-9]{0,14}", fullmatch=True)
# Non-integral floats of every magnitude Python's repr writes differently: fixed, tiny (1e-05 form),
# long fractions.
_fractions = st.one_of(
    st.builds(
        lambda whole, part: whole + part,
        st.integers(-(10**9), 10**9),
        st.floats(min_value=0.001, max_value=0.999),
    ),
    st.floats(min_value=1e-300, max_value=1e-4),
    st.floats(min_value=-1e-4, max_value=-1e-300),
).filter(lambda f: not f.is_integer())
_scalar = st.one_of(
    _text,
    st.booleans(),
    st.integers(-(2**53) + 1, 2**53 - 1),
    _fractions,
)
_json = st.recursive(
    st.one_of(st.none(), _scalar),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_key, inner, max_size=4),
    max_leaves=12,
)
_event = st.fixed_dictionaries(
    {
        "type": st.sampled_from(
            sorted(semconv.event_type_of(n) or "" for n in semconv.INPUT_EVENTS)
        ),
        "payload": st.dictionaries(_field, _json, max_size=6),
        "compositionId": st.none() | _text,
    }
)


@pytest.fixture(scope="module")
def node() -> str:
    found = shutil.which("node")
    if found is None:
        pytest.skip("node is not on PATH (Node.js 20+ runs the JavaScript recorder)")
    if not (PACKAGE / "dist" / "index.js").is_file():
        pytest.skip("js/otel-footprint is not built: run scripts/node-install.sh")
    return found


# One Node.js process per batch; shrinking would respawn it hundreds of times, so a failure is
# reported as the first differing event of the batch instead.
@settings(
    max_examples=15,
    deadline=None,
    phases=(Phase.explicit, Phase.reuse, Phase.generate),
    suppress_health_check=(HealthCheck.data_too_large, HealthCheck.too_slow),
)
@given(events=st.lists(_event, min_size=BATCH, max_size=BATCH))
def test_javascript_encodes_generated_payloads_as_python_does(
    node: str, events: list[dict[str, Any]]
) -> None:
    lines = "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in events)
    done = subprocess.run(
        [node, str(ENCODER)], input=lines, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    # split("\n"), not splitlines(): JSON text may hold U+0085 / U+2028, which splitlines() splits on.
    got = [json.loads(line) for line in done.stdout.split("\n") if line]
    expected = [
        {
            "name": semconv.event_name_of(e["type"]),
            "attributes": typed_attributes(
                encode_payload(e["payload"], composition_id=e["compositionId"])
            ),
        }
        for e in events
    ]
    assert len(got) == len(expected)
    for event, mine, theirs in zip(events, got, expected, strict=True):
        assert mine == theirs, f"payload {event!r}"
