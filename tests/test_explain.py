"""Functional: ``otel-footprint explain`` reads OTLP JSON (hex ids as the Collector file exporter
writes them, or the protobuf mapping's base64), log records, and NDJSON recordings alike, and says
clearly when an input cannot be read.
"""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path
from typing import Any

import pytest
from _shared import RECORDINGS
from google.protobuf import json_format

from otel_footprint.bridges.agentfootprint import recording_to_requests
from otel_footprint.commands.cli import main

PARK_TRAP = RECORDINGS / "park-trap.ndjson"
PAUSE_RESUME = RECORDINGS / "pause-resume.ndjson"
pytestmark = pytest.mark.skipif(not PARK_TRAP.exists(), reason="recordings not on this machine")


def explain(*paths: Path, form: str = "json", extra: tuple[str, ...] = ()) -> tuple[int, str]:
    out = io.StringIO()
    code = main(["explain", *map(str, paths), "--format", form, *extra], out)
    return code, out.getvalue()


def runs(*paths: Path) -> list[dict[str, Any]]:
    code, text = explain(*paths)
    assert code == 0
    data: list[dict[str, Any]] = json.loads(text)["runs"]
    return data


def _to_hex(node: Any) -> Any:
    """The Collector file exporter's id form: hex strings instead of base64."""
    if isinstance(node, dict):
        return {
            k: (
                base64.b64decode(v).hex()
                if k in ("traceId", "spanId", "parentSpanId") and isinstance(v, str)
                else _to_hex(v)
            )
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [_to_hex(v) for v in node]
    return node


def _otlp_lines(recording: Path, hex_ids: bool) -> list[dict[str, Any]]:
    docs = []
    for request in recording_to_requests(recording.read_text().splitlines()):
        doc = json_format.MessageToDict(request, use_integers_for_enums=True)
        docs.append(_to_hex(doc) if hex_ids else doc)
    return docs


def _write_lines(path: Path, docs: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    return path


def _engagement_view(data: list[dict[str, Any]]) -> list[Any]:
    # Everything but the ids (which are the same anyway) and the account text.
    return [
        (
            r["runId"],
            r["mode"],
            r["engagement"],
            [(p["iteration"], p["changes"]) for p in r["passes"]],
        )
        for r in data
    ]


@pytest.mark.parametrize("hex_ids", [True, False], ids=["hex-ids", "base64-ids"])
def test_otlp_json_lines_explain_like_the_recording(tmp_path: Path, hex_ids: bool) -> None:
    path = _write_lines(tmp_path / "traces.json", _otlp_lines(PARK_TRAP, hex_ids))
    assert runs(path) == runs(PARK_TRAP)


def test_hex_ids_are_read_as_the_same_span_ids(tmp_path: Path) -> None:
    docs = _otlp_lines(PARK_TRAP, hex_ids=True)
    span_ids = {
        s["spanId"]
        for d in docs
        for rs in d["resourceSpans"]
        for ss in rs["scopeSpans"]
        for s in ss["spans"]
    }
    data = runs(_write_lines(tmp_path / "t.json", docs))
    assert {p["spanId"] for p in data[0]["passes"]} <= span_ids
    assert data[0]["traceId"] == docs[0]["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"]


def test_a_pretty_printed_single_request_is_read(tmp_path: Path) -> None:
    (doc,) = _otlp_lines(PARK_TRAP, hex_ids=True)
    path = tmp_path / "pretty.json"
    path.write_text(json.dumps(doc, indent=2))
    assert _engagement_view(runs(path)) == _engagement_view(runs(PARK_TRAP))


def test_legs_in_separate_files_still_continue(tmp_path: Path) -> None:
    first, second = _otlp_lines(PAUSE_RESUME, hex_ids=True)
    a = _write_lines(tmp_path / "leg1.json", [first])
    b = _write_lines(tmp_path / "leg2.json", [second])
    # Given in reverse: legs are decided in the order they started, not the order of the files.
    assert _engagement_view(runs(b, a)) == _engagement_view(runs(PAUSE_RESUME))


def test_events_sent_as_log_records_are_joined(tmp_path: Path) -> None:
    (doc,) = _otlp_lines(PARK_TRAP, hex_ids=True)
    records = []
    for rs in doc["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                kept = []
                for event in span.get("events", []):
                    if event["name"] in ("footprint.context.evaluated", "footprint.map.parked"):
                        records.append(
                            {
                                "timeUnixNano": event["timeUnixNano"],
                                "eventName": event["name"],
                                "traceId": span["traceId"],
                                "spanId": span["spanId"],
                                "attributes": event.get("attributes", []),
                            }
                        )
                    else:
                        kept.append(event)
                span["events"] = kept
    assert records
    logs = {"resourceLogs": [{"scopeLogs": [{"logRecords": records}]}]}
    path = _write_lines(tmp_path / "mixed.json", [doc, logs])
    assert _engagement_view(runs(path)) == _engagement_view(runs(PARK_TRAP))
    # Without the logs the passes cannot be built: a reason, not a guess.
    without = runs(_write_lines(tmp_path / "spans-only.json", [doc]))
    assert [r["code"] for r in without[0]["reasons"]] == ["missing-evaluated"]


def test_text_form_reads_as_a_timeline() -> None:
    code, text = explain(PARK_TRAP, form="text")
    assert code == 0
    assert "verify mode" in text
    assert 'skill-map engaged by lexical witness "zone"' in text
    assert "skill-map PARKED (rested on lexical, 3 idle calls)" in text
    assert "park card" in text
    assert "calls 5–6: same as call 4" in text
    assert "final: skill-map" not in text  # the account is behind --account
    code, text = explain(PARK_TRAP, form="text", extra=("--account",))
    assert code == 0
    assert "final: skill-map parked by lexical since 4" in text
    assert "  You asked:" in text


def test_text_form_of_a_shadow_run_names_what_rode_while_parked() -> None:
    code, text = explain(RECORDINGS / "no-kernel.ndjson", form="text")
    assert code == 0
    assert "shadow mode" in text
    assert "still rode while parked: zone-audit" in text


def test_html_form_is_escaped(tmp_path: Path) -> None:
    lines = PARK_TRAP.read_text().replace("run-1796031430504-1", "run-<b>&x").splitlines()
    path = tmp_path / "odd.ndjson"
    path.write_text("\n".join(lines) + "\n")
    code, page = explain(path, form="html")
    assert code == 0
    assert page.startswith("<!doctype html>")
    assert "run-&lt;b&gt;&amp;x" in page
    assert "<b>&x" not in page


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"resourceSpans": []}\n{not json\n', "line 2 is not JSON"),
        ('{"resourceSpans": [{"scopeSpans": [{"spans": [{"kind": "nope"}]}]}]}\n', "not an OTLP"),
        (
            '{"type": "agentfootprint.agent.turn_start", "payload": {}, "meta": {}}\n[1]\n',
            "line 2",
        ),
    ],
    ids=["bad-json-line", "bad-otlp", "bad-recording-line"],
)
def test_unreadable_input_exits_2_with_a_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, message: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    code, out = explain(path)
    assert code == 2
    assert out == ""
    err = capsys.readouterr().err
    assert str(path) in err and message in err


def test_missing_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = explain(tmp_path / "absent.json")
    assert code == 2
    assert "cannot read" in capsys.readouterr().err


def test_an_input_without_agent_runs_says_so(tmp_path: Path) -> None:
    path = tmp_path / "empty.json"
    path.write_text('{"resourceSpans": []}\n')
    code, text = explain(path, form="text")
    assert code == 0
    assert text == "No agent runs found in the input.\n"
    assert runs(path) == []
