"""``explain --format html`` rendered in a real browser: headless Chromium loads the demo's run view
with no console message, and the elements a person reads are there.

Needs Debian's ``chromium`` (``.ci/run`` installs it); skipped with the reason when it is absent.
"""

from __future__ import annotations

import html
import io
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from otel_footprint.commands.cli import main

BROWSER = next(
    (b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None
)
needs_browser = pytest.mark.skipif(
    BROWSER is None, reason="no headless Chromium on PATH (Debian: apt-get install chromium)"
)
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage")


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("html")
    spans = root / "demo.jsonl"
    assert main(["demo", "-o", str(spans)], io.StringIO()) == 0
    return spans


def _page(spans: Path, *extra: str) -> str:
    out = io.StringIO()
    assert main(["explain", str(spans), "--format", "html", *extra], out) == 0
    return out.getvalue()


def _chromium(page: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert BROWSER is not None
    return subprocess.run(
        [BROWSER, *FLAGS, "--enable-logging=stderr", "--v=0", *args, page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_page_is_self_contained(demo: Path) -> None:
    page = _page(demo)
    assert page.startswith("<!doctype html>")
    assert not re.search(r"<(script|link|img|iframe|object)\b", page)
    assert not re.search(r"(src|href)=['\"]?(https?:)?//", page)
    assert "url(" not in page  # no fonts or images from anywhere
    assert not re.search(r"\d\.\d{5,}", page), "numbers should be rounded"


@needs_browser
def test_chromium_loads_the_demo_with_no_console_message(demo: Path, tmp_path: Path) -> None:
    path = tmp_path / "demo.html"
    path.write_text(_page(demo), encoding="utf-8")
    done = _chromium(path, "--dump-dom")
    assert done.returncode == 0, done.stderr[-2000:]
    console = [line for line in done.stderr.splitlines() if "CONSOLE" in line]
    assert console == [], console
    dom = done.stdout
    # At a glance: one row per run, coloured by its summary's tone.
    by_run = {run: tone for tone, run in re.findall(
        r'class="tone-(\w+) glance-run" data-tone="\w+"><td><a href="#run-([\w-]+)"', dom
    )}  # fmt: skip
    assert by_run == {
        "stuck-30-verify": "unknown",
        "stuck-30-shadow": "warn",
        "recovery-explicit-pick": "unknown",
        "routed-delivered": "ok",
        "routed-not-delivered": "bad",
    }
    # Per run: a lane per mounted map, the checks coloured by outcome, the riding total.
    assert dom.count('class="lane"') == 5
    assert dom.count('data-check="decided-delivered"') == 5
    assert 'data-check="decided-delivered" data-outcome="fail"' in dom
    assert "Rode while parked:" in dom and "7,776 characters" in dom
    assert "routing decided billing, the model was given shipping" in dom
    # Repeated account lines are folded with a count, repeated passes too.
    assert "×5" in dom and "(×26)" in dom


@needs_browser
def test_evidence_links_go_to_the_span_or_into_jaeger(demo: Path) -> None:
    local = _page(demo)
    ids = re.findall(r"href='#span-([0-9a-f]{16})'", local)
    assert ids, "evidence pointers should link to the span"
    anchors = set(re.findall(r"id='span-([0-9a-f]{16})'", local))
    assert set(ids) <= anchors, set(ids) - anchors
    jaeger = _page(demo, "--jaeger-url", "http://127.0.0.1:16686/")
    assert re.search(
        r"href='http://127\.0\.0\.1:16686/trace/[0-9a-f]{32}\?uiFind=[0-9a-f]{16}'", jaeger
    )
    phoenix = _page(demo, "--phoenix-url", "http://127.0.0.1:6006")
    assert re.search(r"href='http://127\.0\.0\.1:6006/redirects/spans/[0-9a-f]{16}'", phoenix)


@needs_browser
def test_a_screenshot_of_the_demo(demo: Path, tmp_path: Path) -> None:
    path = tmp_path / "demo.html"
    path.write_text(_page(demo), encoding="utf-8")
    shot = tmp_path / "demo.png"
    done = _chromium(path, "--hide-scrollbars", "--window-size=1280,800", f"--screenshot={shot}")
    assert done.returncode == 0, done.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (1280, 800)
    assert len(data) > 20_000  # a rendered page, not a blank one
    kept = Path(__file__).resolve().parents[1] / "docs" / "explain-demo.png"
    assert kept.exists(), "docs/explain-demo.png (scripts/explain-screenshot.sh) is missing"


def test_the_legs_of_a_resumed_run_sit_under_one_heading() -> None:
    from _shared import RECORDINGS

    recording = RECORDINGS / "pause-resume.ndjson"
    if not recording.exists():
        pytest.skip("recordings not on this machine")
    page = _page(recording)
    sections = re.findall(r"<section class='run[^']*' id='run-([^']+)'", page)
    assert len(sections) == 1, sections
    assert "Leg 1 of 2 · paused here; continues in the next leg" in page
    assert "Leg 2 of 2 · resumed" in page
    assert "complete" not in re.sub(r"<[^>]+>", " ", page).split("Leg 1 of 2")[1].split("Leg 2")[0]
    # The resumed leg's routing was read before the pause: its chips say so, not "a tool call".
    second = html.unescape(page.split("Leg 2 of 2", 1)[1])
    assert "the run's earlier leg · the skill routing chose" in second
    assert "a tool call · the skill routing chose" not in second
    # The first leg only paused: the run's badge follows the leg that finished it.
    (tone,) = re.findall(r"<tr class='tone-(\w+) glance-run'", page)
    assert tone == "ok"


def test_numbers_are_rounded_for_reading() -> None:
    from otel_footprint.commands.explain_words import round_numbers

    assert round_numbers("put it first: 0.7071067811865475 against 0.29") == (
        "put it first: 0.71 against 0.29"
    )
    # Ids, versions and short numbers are left alone.
    assert round_numbers("v1.2.3 run-0.12345x 0.126 7,776") == "v1.2.3 run-0.12345x 0.13 7,776"


def _section(page: str, run_id: str) -> str:
    return page.split(f"data-run='{run_id}'", 1)[1].split("</section>", 1)[0]


def _glance_row(page: str, run_id: str) -> str:
    return page.split(f"<a href='#run-{run_id}'>", 1)[1].split("</tr>", 1)[0]


def test_a_run_whose_check_failed_looks_failed(demo: Path) -> None:
    """routed-not-delivered: the chosen skill never reached the model on either call, so both
    calls are drawn failed in its strip at a glance, its lane and its call table; runs whose
    checks did not fail show no failed call."""
    page = _page(demo)
    failed = "routed-not-delivered"
    strip = _glance_row(page, failed)
    assert strip.count("st-fail") == 2, strip
    assert "title='call 1: check 1 failed'" in strip
    section = _section(page, failed)
    lane = section.split("class='lane'", 1)[1].split("</div>", 1)[0]
    assert lane.count("st-fail") == 2
    assert "<b>calls 1–2 · check 1 failed</b>" in section
    assert section.count("<tr class='failed'>") == 2  # both calls in the call table
    for run in ("stuck-30-verify", "stuck-30-shadow", "recovery-explicit-pick", "routed-delivered"):
        assert "st-fail" not in _glance_row(page, run), run
        assert "st-fail" not in _section(page, run), run


def test_evidence_chips_say_what_they_point_at(demo: Path) -> None:
    page = _page(demo)
    chips = [html.unescape(c) for c in re.findall(r"<a class='ev'[^>]*>([^<]+)</a>", page)]
    assert chips
    for chip in chips:
        # "call 2 · the skill put in the prompt", "the run · the question", "a tool call"
        assert re.fullmatch(r"(call \d+|the run|a tool call)( · [a-z' -]+)?", chip), chip
    for words in ("the run · the skill routing chose", "call 1 · the skill put in the prompt"):
        assert words in chips, words
    assert not re.search(r"[0-9a-f]{8}·", page), "a chip still shows a span id and a field name"


def test_the_integrity_box_reads_as_english(demo: Path) -> None:
    page = _page(demo)
    box = page.split("<h3>Integrity:", 1)[1].split("Every call", 1)[0]
    text = html.unescape(re.sub(r"<[^>]+>", " ", box))
    assert "the tools offered on calls 4–30 are not in the record" in text
    assert "A parked map's tools still offered to the model" in text
    assert not re.search(r"\bpass \d|\bis not in the record|@compose|unreachable", text), text
