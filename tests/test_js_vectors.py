"""The JavaScript recorder's checked-in names and encode vectors agree with this checkout.

``js/otel-footprint`` spells no schema name itself: its ``src/semconv.ts`` and ``vectors/*.json`` are
generated from ``otel_footprint/semconv.py`` and the Python recorder by ``scripts/js_vectors.py``,
and its tests replay the vectors. A renamed constant or a changed encoding fails here until the
files are regenerated (and then fails the TypeScript tests until the package follows).
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from otel_footprint import record as footprint
from otel_footprint import semconv

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "js_vectors.py"


@pytest.fixture(scope="module")
def js_vectors() -> ModuleType:
    spec = importlib.util.spec_from_file_location("js_vectors", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_checked_in_files_match_what_python_generates(js_vectors: ModuleType) -> None:
    generated = js_vectors.generated()
    assert len(generated) == 4
    stale = [str(p.relative_to(ROOT)) for p in js_vectors.stale()]
    assert stale == [], f"regenerate with `python scripts/js_vectors.py`: {stale}"


def test_names_file_is_the_semconv_json_export() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "otel_footprint.semconv", "--json"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    checked_in = (ROOT / "js" / "otel-footprint" / "vectors" / "semconv.json").read_text()
    assert done.stdout == checked_in
    assert json.loads(checked_in) == semconv.all_names()


def test_vectors_cover_every_event_type_the_recorder_emits(js_vectors: ModuleType) -> None:
    recorder = json.loads(
        (ROOT / "js" / "otel-footprint" / "vectors" / "recorder.json").read_text()
    )
    emitted = {e["name"] for v in recorder for s in v["spans"] for e in s["events"]}
    written_by_recorder = {
        semconv.EV_MAPS_MOUNTED,
        semconv.EV_RUN_CONFIGURED,
        semconv.EV_GRAPH_DECLARED,
        semconv.EV_TURN_START,
        semconv.EV_TURN_END,
        semconv.EV_CONTEXT_EVALUATED,
        semconv.EV_CONTEXT_INJECTED,
        semconv.EV_SLOT_COMPOSED,
        semconv.EV_TURN_ROUTED,
        semconv.EV_SKILL_REJECTED,
        semconv.EV_SKILL_PICKED,
        semconv.EV_PERMISSION_CHECK,
        semconv.EV_MAP_ENGAGED,
        semconv.EV_MAP_PARKED,
        semconv.EV_PAUSE_REQUEST,
        semconv.EV_PAUSE_RESUME,
        # the integrity inputs (issue 17)
        semconv.EV_TOOL_DECLARED,
        semconv.EV_INTEGRITY_CONFIG,
        semconv.EV_EXTERNAL_GROUND,
        semconv.EV_WIRE_MANIFEST,
        semconv.EV_WINDOW_COMPACTED,
        semconv.EV_TOOL_RESULT_SHAPE,
        semconv.EV_CONTEXT_ERROR,
        semconv.EV_CLAIMS_DECLARED,
        semconv.EV_EVIDENCE_GROUNDING,
        semconv.EV_SEMANTICS_DECLARED,
    }
    assert written_by_recorder <= emitted
    # Run.frame writes the GenAI conventions' own attributes on the pass span.
    frame = {
        semconv.GEN_AI_TOOL_DEFINITIONS,
        semconv.GEN_AI_SYSTEM_INSTRUCTIONS,
        semconv.GEN_AI_INPUT_MESSAGES,
        semconv.GEN_AI_OUTPUT_MESSAGES,
    }
    assert frame <= {a for v in recorder for s in v["spans"] for a in s["attributes"]}
    encode = json.loads((ROOT / "js" / "otel-footprint" / "vectors" / "encode.json").read_text())
    assert {v["name"] for v in encode} >= semconv.INPUT_EVENTS


def test_check_mode_names_a_stale_file(
    js_vectors: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A copy of the generated files where one name differs, as after a rename in semconv.py.
    package = tmp_path / "pkg"
    monkeypatch.setattr(js_vectors, "PACKAGE", package)
    monkeypatch.setattr(js_vectors, "VECTORS", package / "vectors")
    monkeypatch.setattr(js_vectors, "ROOT", tmp_path)
    assert js_vectors.main([]) == 0
    assert js_vectors.main(["--check"]) == 0
    names = package / "src" / "semconv.ts"
    names.write_text(names.read_text().replace('"footprint.run.id"', '"footprint.run.ident"'))
    assert [p.name for p in js_vectors.stale()] == ["semconv.ts"]
    assert js_vectors.main(["--check"]) == 1


def test_integral_floats_are_refused(js_vectors: ModuleType) -> None:
    with pytest.raises(ValueError, match="integral float"):
        js_vectors.typed(2.0)
    assert js_vectors.typed([1, 0.5, "x", True]) == {
        "array": [{"int": 1}, {"double": 0.5}, {"string": "x"}, {"bool": True}]
    }


def test_the_integrity_method_table_matches_both_recorders() -> None:
    """docs/javascript.md's table names every integrity method of the Python recorder, its
    TypeScript twin (a method of the recorder's modules, src/*.ts) and what it writes (a name of
    semconv.py)."""
    doc = (ROOT / "docs" / "javascript.md").read_text(encoding="utf-8")
    table = doc.split("<!-- integrity-methods -->", 1)[1].split("\n\n", 1)[0]
    rows = [line.split(" | ") for line in table.splitlines() if line.startswith("| `")]
    ts_source = "\n".join(
        path.read_text(encoding="utf-8")
        for path in sorted((ROOT / "js" / "otel-footprint" / "src").glob("*.ts"))
    )
    names = set(semconv.all_names().values())
    python_methods = set()
    for ts, python, writes in rows:
        ts_method = re.match(r"\| `\w+\.(\w+)\(", ts)
        assert ts_method is not None, ts
        assert re.search(rf"^  {ts_method[1]}\(", ts_source, re.M), ts_method[1]
        owner, method = python.strip("`").split(".")
        assert callable(getattr(getattr(footprint, owner), method)), python
        python_methods.add(method)
        written = re.findall(r"`([\w.]+)`", writes)
        assert written and set(written) <= names, writes
    # Every Run method of the recorder's integrity section is in the table (and result_shape).
    source = (ROOT / "otel_footprint" / "record" / "recorder.py").read_text(encoding="utf-8")
    section = source.split("# ── integrity inputs", 1)[1].split("\n@contextmanager", 1)[0]
    public = {m for m in re.findall(r"^    def (\w+)\(", section, re.M) if not m.startswith("_")}
    assert python_methods == public | {"result_shape"}


def _recipe(source: str) -> str:
    """The ``// recipe:start`` ... ``// recipe:end`` regions of a file, dedented, joined by ``// ...``."""
    regions = re.findall(
        r"^([ \t]*)// recipe:start[^\n]*\n(.*?)^[ \t]*// recipe:end", source, re.M | re.S
    )
    assert regions, "no recipe region"
    return "// ...\n".join(
        "".join(line.removeprefix(indent) + "\n" for line in body.splitlines())
        for indent, body in regions
    )


def test_the_recipes_in_javascript_md_are_the_files_the_tests_run() -> None:
    """Each listing marked ``<!-- recipe: FILE -->`` in docs/javascript.md is FILE's recipe regions."""
    doc = (ROOT / "docs" / "javascript.md").read_text(encoding="utf-8")
    found = re.findall(r"<!-- recipe: (\S+) -->\n```js\n(.*?)```", doc, re.S)
    assert found
    for path, listing in found:
        assert listing == _recipe((ROOT / path).read_text(encoding="utf-8")), path
