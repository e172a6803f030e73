"""The live run page (``serve``'s ``/runs``, issue 26): a real ``serve`` that decided the demo's five
runs, read by headless Chromium (Debian's ``chromium``; skipped with the reason when absent) and over
plain HTTP; the page's memory and page size bounds; the bearer token and the off switch."""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from otel_footprint.commands.run_page import RunPageHtml
from otel_footprint.engine.verdict import RunVerdict
from otel_footprint.sdk.settings import HostPort, RunPageSettings
from otel_footprint.service.annotation import Decision
from otel_footprint.service.metrics import HopMetrics
from otel_footprint.service.ops import OpsServer
from otel_footprint.service.runpage import Filters, Listing, RunPageStore
from tests.cdp import Browser
from tests.hop_demo import DEMO_RUNS, demo_hop, demo_verdicts, send_demo
from tests.servers import HopProcess
from tests.test_service_support import Sink

BROWSER = next(
    (b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None
)
needs_browser = pytest.mark.skipif(
    BROWSER is None, reason="no headless Chromium on PATH (Debian: apt-get install chromium)"
)

# Each demo run's summary tone: the badge the list must show (explain's page colours them alike).
TONES = {
    "stuck-30-verify": "unknown",
    "stuck-30-shadow": "warn",
    "recovery-explicit-pick": "unknown",
    "routed-delivered": "ok",
    "routed-not-delivered": "bad",
}


@pytest.fixture(scope="module")
def hop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HopProcess]:
    sink = Sink().start()
    data = tmp_path_factory.mktemp("run-page") / "data"
    h = demo_hop(data, sink.endpoint, "--set", "service.telemetry.run_page.refresh=1s")
    yield h
    h.kill()
    sink.stop()


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], str]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return resp.status, dict(resp.headers), resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read().decode()


@pytest.fixture()
def browser() -> Iterator[Browser]:
    assert BROWSER is not None
    b = Browser(BROWSER)
    yield b
    b.close()


ROWS_JS = """Array.from(document.querySelectorAll('tr.run')).map(r => ({
  run: r.dataset.run, tone: r.dataset.tone, cls: r.className, decided: r.dataset.decided,
  badge: r.querySelector('.badge').textContent,
  colour: getComputedStyle(r.querySelector('.badge')).color}))"""
# The badge colour of each tone (the page's CSS, as explain's: --bad, --warn, --ok, --unknown).
COLOURS = {
    "bad": "rgb(180, 35, 24)",
    "warn": "rgb(181, 71, 8)",
    "ok": "rgb(6, 118, 71)",
    "unknown": "rgb(71, 84, 103)",
}


@needs_browser
def test_chromium_lists_the_five_runs_newest_first_with_their_badges_and_opens_each(
    hop: HopProcess, browser: Browser
) -> None:
    base = f"http://{hop.telemetry}/runs"
    browser.go(base)
    rows = browser.js(ROWS_JS)
    assert len(rows) >= DEMO_RUNS and len(rows) % DEMO_RUNS == 0
    assert {r["run"]: r["tone"] for r in rows} == TONES
    for r in rows:
        assert r["badge"] == r["tone"] and r["cls"] == f"run tone-{r['tone']}"
        assert r["colour"] == COLOURS[r["tone"]], r
    decided = [int(r["decided"]) for r in rows]
    assert decided == sorted(decided, reverse=True)
    for run_id in TONES:
        browser.go(base)
        browser.js(f"document.querySelector(\"tr[data-run='{run_id}'] a.open\").click()")
        target = f"{base}/{urllib.parse.quote(run_id)}"
        browser.wait(
            lambda t=target: browser.url() == t and browser.js("document.readyState") == "complete"
        )
        # explain --format html's own view of that run, with the way back to the list
        assert browser.js(f"document.getElementById('run-{run_id}') !== null"), run_id
        assert browser.js("document.querySelectorAll('[data-check]').length") >= 3
        assert browser.js("document.querySelector('a.back').getAttribute('href')") == "../runs"
        if run_id == "stuck-30-shadow":
            assert "7,776 characters" in browser.js("document.body.innerText")


@needs_browser
def test_the_open_page_reloads_by_itself_and_shows_runs_decided_since(
    hop: HopProcess, browser: Browser
) -> None:
    browser.go(f"http://{hop.telemetry}/runs")
    before = len(browser.js(ROWS_JS))
    browser.js("window.stillTheSamePage = true")
    send_demo(hop)  # five more legs while the page stays open
    browser.wait(
        lambda: (
            browser.js("window.stillTheSamePage") is None
            and len(browser.js(ROWS_JS)) == before + DEMO_RUNS
        ),
        timeout=20,
    )


@needs_browser
def test_a_screenshot_of_the_run_page(hop: HopProcess, browser: Browser, tmp_path: Path) -> None:
    browser.go(f"http://{hop.telemetry}/runs")
    png = browser.screenshot(1280, 560)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    target = os.environ.get("OTEL_FOOTPRINT_RUN_PAGE_SCREENSHOT")  # docs/run-page.png
    (Path(target) if target else tmp_path / "runs.png").write_bytes(png)


def test_filters_narrow_the_list_and_the_page_is_self_contained(hop: HopProcess) -> None:
    base = f"http://{hop.telemetry}/runs"
    status, headers, page = _get(f"{base}?tone=bad")
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert "default-src 'none'" in headers["Content-Security-Policy"]
    assert headers["Cache-Control"] == "no-store"
    assert not re.search(r"<(script|link|img|iframe|object)\b", page)
    assert set(re.findall(r"data-run='([\w-]+)'", page)) == {"routed-not-delivered"}
    _, _, page = _get(f"{base}?check=pass&agent=ops-assistant")
    assert set(re.findall(r"data-run='([\w-]+)'", page)) == {"routed-delivered"}
    _, _, page = _get(f"{base}?agent=nobody")
    assert "data-run=" not in page and "No decided run matches yet." in page
    _, _, page = _get(f"{base}?limit=2")
    assert len(re.findall(r"data-run='", page)) == 2
    assert _get(f"{base}?limit=two")[0] == 400
    assert _get(f"{base}/no-such-run")[0] == 404
    status, headers, _ = _get(f"{base}/")
    assert status == 200  # urllib followed the redirect back to /runs


# ── the store's bounds, the token and the off switch (the telemetry server alone) ─────────────


def _decision(verdict: RunVerdict, n: int) -> Decision:
    return Decision(
        verdict.trace_id,
        verdict.run_id,
        verdict.run_span_id,
        verdict.complete,
        (),
        verdict,
        {},
        0,
        n,
        agent="ops-assistant",
    )


@pytest.fixture(scope="module")
def verdicts() -> list[RunVerdict]:
    found = demo_verdicts()
    assert len(found) == DEMO_RUNS
    return found


def test_the_store_keeps_the_newest_rows_and_full_views_within_its_bounds(
    verdicts: list[RunVerdict],
) -> None:
    settings = RunPageSettings(runs=4, explained=2, max_passes=40, page_size=3)
    store = RunPageStore(settings, RunPageHtml())
    for n, verdict in enumerate(verdicts):
        store.record(_decision(verdict, n))
    listing = store.listing(Filters())
    assert listing.held == 4 and listing.matching == 4
    assert [r.decided_unix_nano for r in listing.rows] == [4, 3, 2]  # newest first, page size
    assert store.listing(Filters(), limit=100).rows == listing.rows  # never past the page size
    passes = {v.run_id: len(v.passes) for v in verdicts}
    held = [v.run_id for v in verdicts if store.legs(v.run_id) is not None]
    assert 1 <= len(held) <= 2
    assert held == [v.run_id for v in verdicts][-len(held) :]  # the newest ones
    assert len(held) == 1 or sum(passes[r] for r in held) <= 40


def test_the_list_is_newest_decided_first_whatever_order_the_rows_were_recorded_in(
    verdicts: list[RunVerdict],
) -> None:
    """A long run's decision, sliced between shorter ones', ends after theirs but is handed on in
    release order: the page orders by when each decision ended, not by when it was recorded."""
    store = RunPageStore(RunPageSettings(), RunPageHtml())
    decided = [3, 1, 4, 1, 5][: len(verdicts)]
    for verdict, n in zip(verdicts, decided, strict=False):
        store.record(_decision(verdict, n))
    rows = store.listing(Filters()).rows
    assert [r.decided_unix_nano for r in rows] == sorted(decided, reverse=True)
    tied = [r.run_id for r in rows if r.decided_unix_nano == 1]
    assert tied == [verdicts[3].run_id, verdicts[1].run_id]  # a tie: the newest recorded first


def test_under_a_hashed_witness_policy_no_full_view_is_kept(verdicts: list[RunVerdict]) -> None:
    from otel_footprint.annotate.form import AnnotateOptions

    store = RunPageStore(RunPageSettings(), RunPageHtml(), AnnotateOptions(witness="hash"))
    for n, verdict in enumerate(verdicts):
        store.record(_decision(verdict, n))
    assert store.listing(Filters()).held == DEMO_RUNS
    assert all(store.legs(v.run_id) is None for v in verdicts)


def _ops(run_page: RunPageStore | None, token: str | None) -> OpsServer:
    server = OpsServer(HostPort("127.0.0.1", 0), HopMetrics(), lambda: (True, {}), run_page, token)
    server.start()
    return server


def test_the_page_asks_for_the_hops_bearer_token_when_one_is_set(
    verdicts: list[RunVerdict],
) -> None:
    store = RunPageStore(RunPageSettings(), RunPageHtml())
    store.record(_decision(verdicts[0], 1))
    server = _ops(store, "s3cret")
    try:
        url = f"http://{server.bound}/runs"
        status, headers, _ = _get(url)
        assert status == 401 and headers["WWW-Authenticate"] == "Bearer"
        assert _get(url, {"Authorization": "Bearer wrong"})[0] == 401
        status, _, page = _get(url, {"Authorization": "Bearer s3cret"})
        assert status == 200 and f"data-run='{verdicts[0].run_id}'" in page
        run = f"{url}/{verdicts[0].run_id}"
        assert _get(run)[0] == 401
        assert _get(run, {"Authorization": "Bearer s3cret"})[0] == 200
        assert _get(f"http://{server.bound}/metrics")[0] == 200  # as before: no token there
    finally:
        server.stop()


def test_the_page_is_off_when_the_setting_says_so(tmp_path: Path) -> None:
    server = _ops(None, None)
    try:
        status, _, body = _get(f"http://{server.bound}/runs")
        assert status == 404 and "run_page.enabled" in body
    finally:
        server.stop()
    sink = Sink().start()
    hop = HopProcess(
        tmp_path / "data", sink.endpoint, "--set", "service.telemetry.run_page.enabled=false"
    ).start()
    try:
        assert _get(f"http://{hop.telemetry}/runs")[0] == 404
    finally:
        hop.kill()
        sink.stop()


@given(
    picks=st.lists(
        st.tuples(st.integers(0, DEMO_RUNS - 1), st.sampled_from("abcdef")), max_size=40
    ),
    runs=st.integers(1, 8),
    explained=st.integers(1, 4),
    max_passes=st.integers(1, 80),
)
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_the_stores_bounds_hold_for_any_sequence_of_decisions(
    verdicts: list[RunVerdict],
    picks: list[tuple[int, str]],
    runs: int,
    explained: int,
    max_passes: int,
) -> None:
    store = RunPageStore(
        RunPageSettings(runs=runs, explained=explained, max_passes=max_passes), RunPageHtml()
    )
    recorded: list[RunVerdict] = []
    for n, (index, run_id) in enumerate(picks):
        verdict = dataclasses.replace(verdicts[index], run_id=run_id)
        recorded.append(verdict)
        store.record(_decision(verdict, n))
    listing = store.listing(Filters(), limit=100)
    assert listing.held == min(len(picks), runs)
    assert [r.decided_unix_nano for r in listing.rows] == list(
        range(len(picks) - 1, len(picks) - 1 - len(listing.rows), -1)
    )
    held = {v.run_id for v in recorded if store.legs(v.run_id) is not None}
    assert len(held) <= explained
    if recorded:
        assert recorded[-1].run_id in held  # the newest run's view is always there
        legs = {run_id: store.legs(run_id) or [] for run_id in held}
        passes = sum(len(v.passes) for vs in legs.values() for v in vs)
        newest_alone = len(held) == 1 and len(legs[recorded[-1].run_id]) == 1
        assert passes <= max_passes or newest_alone
        # a held run keeps every leg it had since it was last (re)admitted, in order
        for run_id, kept in legs.items():
            mine = [v for v in recorded if v.run_id == run_id]
            assert kept == mine[-len(kept) :]


class _Broken(RunPageHtml):
    def listing(self, listing: Listing) -> str:
        raise RuntimeError("a renderer bug")


def test_a_page_that_cannot_be_drawn_answers_500_and_the_endpoint_stays_up(
    verdicts: list[RunVerdict],
) -> None:
    store = RunPageStore(RunPageSettings(), _Broken())
    store.record(_decision(verdicts[0], 1))
    server = _ops(store, None)
    try:
        status, _, body = _get(f"http://{server.bound}/runs")
        assert status == 500 and "could not be drawn" in body
        assert _get(f"http://{server.bound}/runs/{verdicts[0].run_id}")[0] == 200
        assert _get(f"http://{server.bound}/health")[0] == 200
    finally:
        server.stop()
