"""Performance work must not change a verdict: today's outputs against outputs checked in from main.

``tests/data/golden/`` is written by this module's ``--write`` mode and compared byte for byte. It
was first written with the code of main at commit 9968f18, before any of the decision-path speed-ups;
it is rewritten only in a commit that changes an output on purpose (a new field, a reworded text),
after checking that the diff is that change and nothing else (the commit says which). It holds:

- every public recording, imported (``otel-footprint import agentfootprint``) then explained
  (``otel-footprint explain --format json`` and the text form), and its imported spans annotated the
  way the hop does it (``OtlpSpanView`` -> ``group_runs`` -> ``decide_run`` -> ``annotations_for`` ->
  ``apply_note`` on the protobuf spans, legs in order through one store), as OTLP JSON;
- every demo scenario (``otel-footprint demo -o``): the annotated spans and the printed verdicts and
  timelines (and, as ``demo.account.txt``, the same with ``--account``), with the random trace /
  span / run ids and the wall-clock times replaced by stable placeholders;
- the conformance replay: the kernel's output for every step of the public reference vectors (its
  SHA-256: 1.3 MB of JSON; ``otel-footprint conformance engagement`` names any difference).

Regenerate (only from a checkout whose outputs are known good)::

    .venv/bin/python tests/test_golden.py --write
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import re
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from _shared import RECORDINGS, VECTORS

from otel_footprint.annotate.form import AnnotateOptions, annotations_for
from otel_footprint.annotate.otlp import apply_note
from otel_footprint.bridges.otlpjson import (
    read_otlp_json_lines,
    requests_to_jsonl,
)
from otel_footprint.commands import cli
from otel_footprint.engine.decide import EngineOptions, decide_run
from otel_footprint.kernel.jsoncodec import (
    advance_to_json,
    engagement_from_json,
    pass_from_json,
    plan_from_json,
)
from otel_footprint.kernel.lease import advance_engagement
from otel_footprint.kernel.plan import parked_member_ids
from otel_footprint.runs.group import group_runs
from otel_footprint.runs.spans import OtlpSpanView
from otel_footprint.runs.store import MemoryRunStore

GOLDEN = Path(__file__).parent / "data" / "golden"


def _cli(*argv: str) -> str:
    out = io.StringIO()
    status = cli.main(list(argv), out)
    assert status == 0, f"otel-footprint {' '.join(argv)} exited {status}:\n{out.getvalue()}"
    return out.getvalue()


def _hop_annotated(imported: Path) -> str:
    """The imported legs annotated as the hop's stage does it, in order through one store."""
    requests = list(read_otlp_json_lines(imported.read_text(encoding="utf-8").splitlines()))
    store = MemoryRunStore()
    engine, annotate = EngineOptions(), AnnotateOptions()
    for request in requests:
        views = {
            span.span_id.hex(): OtlpSpanView(span)
            for resource in request.resource_spans
            for scope in resource.scope_spans
            for span in scope.spans
        }
        for run in group_runs(list(views.values())):
            if run.run_span is None:
                continue
            verdict = decide_run(run, store, engine)
            for span_hex, note in annotations_for(verdict, annotate).items():
                view = views.get(span_hex)
                if view is not None:
                    apply_note(view.pb, note)
    return "".join(requests_to_jsonl(requests))


def recording_outputs(recording: Path) -> dict[str, str]:
    """Golden file name -> text, for one recording."""
    with tempfile.TemporaryDirectory() as tmp:
        imported = Path(tmp) / "imported.jsonl"
        _cli("import", "agentfootprint", str(recording), "-o", str(imported))
        stem = recording.stem
        return {
            f"rec-{stem}.explain.json": _cli("explain", "--format", "json", str(imported)),
            f"rec-{stem}.explain.txt": _cli("explain", str(imported)),
            f"rec-{stem}.hop.jsonl": _hop_annotated(imported),
        }


_RANDOM_ID = re.compile(
    r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|\b[0-9a-f]{32}\b|\b[0-9a-f]{16}\b"
)
_WALL_CLOCK = re.compile(r"\b1[0-9]{18}\b")


def stable(text: str) -> str:
    """Random ids become ``<idN>`` in order of first appearance, Unix-nano times ``<t>``."""
    seen: dict[str, str] = {}
    text = _RANDOM_ID.sub(lambda m: seen.setdefault(m.group(0), f"<id{len(seen)}>"), text)
    return _WALL_CLOCK.sub("<t>", text)


def demo_outputs() -> dict[str, str]:
    with tempfile.TemporaryDirectory() as tmp:
        spans = Path(tmp) / "demo.jsonl"
        printed = _cli("demo", "-o", str(spans))
        printed = printed.replace(str(spans), "DEMO.jsonl")
        return {
            "demo.txt": stable(printed),
            "demo.account.txt": stable(_cli("demo", "--account")),
            "demo.jsonl": stable(spans.read_text(encoding="utf-8")),
        }


def conformance_output() -> dict[str, str]:
    """The kernel's output (and parked member ids) for every step of the public vectors."""
    lines: list[str] = []
    for raw in VECTORS.read_text(encoding="utf-8").splitlines():
        if not raw.strip():
            continue
        scenario = json.loads(raw)
        plan = plan_from_json(scenario["plan"], "plan")
        for step in scenario["steps"]:
            prior = engagement_from_json(step["prior"], "prior")
            advance = advance_engagement(plan, prior, pass_from_json(step["pass"], "pass"))
            got = dict(advance_to_json(advance))
            got["parkedMemberIds"] = list(parked_member_ids(plan, advance.next))
            lines.append(json.dumps(got, sort_keys=True) + "\n")
    # 1.3 MB of output for 3,053 steps: its digest is checked in (the replay names any difference).
    digest = hashlib.sha256("".join(lines).encode("utf-8")).hexdigest()
    return {"conformance.sha256": f"{digest}  {len(lines)} steps\n"}


def _recordings() -> list[Path]:
    return sorted(RECORDINGS.glob("*.ndjson")) if RECORDINGS.is_dir() else []


def _compare(produced: dict[str, str]) -> None:
    for name, text in produced.items():
        expected = (GOLDEN / name).read_text(encoding="utf-8")
        assert text == expected, f"{name} differs from the golden output of main"


@pytest.mark.skipif(not _recordings(), reason="no shared recordings on this machine")
@pytest.mark.parametrize("recording", _recordings(), ids=lambda p: p.stem)
def test_recording_outputs_unchanged(recording: Path) -> None:
    _compare(recording_outputs(recording))


def test_demo_outputs_unchanged() -> None:
    _compare(demo_outputs())


@pytest.mark.skipif(not VECTORS.is_file(), reason="no conformance vectors on this machine")
def test_conformance_replay_unchanged() -> None:
    _compare(conformance_output())


def test_golden_set_is_complete() -> None:
    """A recording added to the shared set without a golden output is not silently skipped."""
    for recording in _recordings():
        assert (GOLDEN / f"rec-{recording.stem}.explain.json").is_file(), recording.name


def _write(produce: Callable[[], dict[str, str]]) -> None:
    for name, text in produce().items():
        (GOLDEN / name).write_text(text, encoding="utf-8")
        print(f"wrote {GOLDEN / name}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="regenerate tests/data/golden/")
    if parser.parse_args().write:
        GOLDEN.mkdir(parents=True, exist_ok=True)
        for path in _recordings():
            _write(lambda path=path: recording_outputs(path))  # type: ignore[misc]
        _write(demo_outputs)
        _write(conformance_output)
