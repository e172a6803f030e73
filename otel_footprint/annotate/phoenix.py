"""Check results as Arize Phoenix span annotations (label, score, explanation), posted over REST.

Optional: a backend-specific copy of the ``gen_ai.evaluation.result`` events already on the spans,
so the checks show in Phoenix's own annotation views and filters (``annotations['name'].label``).
"""

from __future__ import annotations

import json
import logging
import math
import re
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from otel_footprint import semconv
from otel_footprint.annotate.backoff import Backoff
from otel_footprint.runs.spans import OtlpSpanView, SdkSpanView, SpanView

logger = logging.getLogger(__name__)

SpanLike: TypeAlias = SpanView | ReadableSpan | PbSpan
"""What :func:`phoenix_annotations_for` reads: a span view, an SDK span, or an OTLP protobuf span."""

Annotation: TypeAlias = dict[str, Any]
"""One element of the ``data`` list of ``POST /v1/span_annotations``."""

SPAN_ANNOTATIONS_PATH: Final = "/v1/span_annotations"
ANNOTATOR_KIND: Final = "CODE"
DEFAULT_IDENTIFIER: Final = "otel-footprint"
"""Phoenix upserts on (name, span, identifier): a fixed identifier makes a re-post an update, and
keeps our rows apart from a person's annotation of the same name (which has its own identifier)."""
SOURCE: Final = "otel-footprint"
LABEL_SCORES: Final[Mapping[str, float]] = {"pass": 1.0, "fail": 0.0}
"""Score from label when the event carries no ``gen_ai.evaluation.score.value``; ``unknown`` has none."""
MAX_EXPLANATION_CHARS: Final = 4000
MAX_CHUNK: Final = 100
"""Annotations per request: bounds the body size and what one refused request costs."""

_MISSING_SPANS: Final = re.compile(r"Spans with IDs (.+) do not exist")


# ── reading the evaluation events ─────────────────────────────────────────────────────────────


def _view(span: SpanLike) -> SpanView:
    if isinstance(span, ReadableSpan):
        return SdkSpanView(span)
    if isinstance(span, PbSpan):
        return OtlpSpanView(span)
    return span


def _score(value: object, label: str | None) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return LABEL_SCORES.get(label) if label is not None else None


def _check_attribute(evaluation_name: str) -> str | None:
    """The run-span attribute holding a check's state, from its evaluation name."""
    check_id = evaluation_name.removeprefix(semconv.PREFIX)
    return semconv.CHECK_ATTRIBUTE.get(check_id) or _integrity_row_attribute(check_id)


def _integrity_row_attribute(check_id: str) -> str | None:
    """``integrity.<check>@<seam>`` -> the run-span attribute holding that row's state."""
    if not check_id.startswith("integrity."):
        return None
    check, _, seam = check_id.removeprefix("integrity.").partition("@")
    return semconv.integrity_row_attribute(check, seam) if seam else None


def phoenix_annotations_for(
    spans: Iterable[SpanLike],
    *,
    project: str | None = None,
    identifier: str = DEFAULT_IDENTIFIER,
) -> list[Annotation]:
    """One Phoenix span annotation per ``gen_ai.evaluation.result`` event we wrote.

    Only evaluations named ``footprint.<check id>`` are taken (another evaluator's results are not
    ours to re-post). ``result`` has the event's label, its explanation, and a score: the event's
    ``gen_ai.evaluation.score.value`` when present, else 1.0 for ``pass``, 0.0 for ``fail`` and
    none for ``unknown``. ``metadata`` says where it came from (trace, run id, mode, the check's
    state and outcome). For a span with two results of one name, the later event wins.
    """
    out: dict[tuple[str, str], Annotation] = {}
    for span in spans:
        view = _view(span)
        events = [e for e in view.events() if e.name == semconv.EV_EVALUATION_RESULT]
        if not events or not view.span_id:
            continue
        for event in events:
            attrs = dict(event.attributes)
            name = attrs.get(semconv.EVAL_NAME)
            if not isinstance(name, str) or not name.startswith(semconv.PREFIX):
                continue
            raw_label = attrs.get(semconv.EVAL_SCORE_LABEL)
            label = None if raw_label is None else str(raw_label)
            result: dict[str, Any] = {}
            if label is not None:
                result["label"] = label
            score = _score(attrs.get(semconv.EVAL_SCORE_VALUE), label)
            if score is not None:
                result["score"] = score
            explanation = attrs.get(semconv.EVAL_EXPLANATION)
            if isinstance(explanation, str) and explanation:
                result["explanation"] = explanation[:MAX_EXPLANATION_CHARS]
            out[(view.span_id, name)] = {
                "span_id": view.span_id,
                "name": name,
                "annotator_kind": ANNOTATOR_KIND,
                "result": result,
                "metadata": _metadata(view, name, project),
                "identifier": identifier,
            }
    return list(out.values())


def _metadata(view: SpanView, evaluation_name: str, project: str | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"source": SOURCE, "trace_id": view.trace_id}
    for key, attribute in (
        ("run_id", semconv.RUN_ID),
        ("mode", semconv.RUN_MODE),
        ("state", _check_attribute(evaluation_name)),
    ):
        value = view.attribute(attribute) if attribute else None
        if isinstance(value, str):
            meta[key] = value
    if evaluation_name == semconv.evaluation_name("decided-delivered"):
        outcome = view.attribute(semconv.CHECK_DECIDED_DELIVERED_OUTCOME)
        if isinstance(outcome, str):
            meta["outcome"] = outcome
    if project is not None:
        meta["project"] = project
    return meta


def annotations_from_request(
    request: ExportTraceServiceRequest,
    *,
    project: str | None = None,
    identifier: str = DEFAULT_IDENTIFIER,
) -> list[Annotation]:
    """:func:`phoenix_annotations_for` over every span of an OTLP export request (the hop's side)."""
    spans = (
        span
        for resource_spans in request.resource_spans
        for scope_spans in resource_spans.scope_spans
        for span in scope_spans.spans
    )
    return phoenix_annotations_for(spans, project=project, identifier=identifier)


# ── posting ───────────────────────────────────────────────────────────────────────────────────


@dataclass(frozen=True, slots=True)
class PostResult:
    """What one :func:`post_annotations` call achieved."""

    posted: int
    failed: int
    errors: tuple[str, ...] = ()
    """One line per refused or undeliverable request (status and Phoenix's detail)."""


class _RefusedError(Exception):
    """Phoenix answered with an error status; ``retry`` says whether asking again can help."""

    def __init__(self, status: int | None, detail: str, *, retry: bool) -> None:
        super().__init__(f"HTTP {status}: {detail}" if status is not None else detail)
        self.status = status
        self.detail = detail
        self.retry = retry


def annotations_url(base_url: str) -> str:
    """``<base>/v1/span_annotations?sync=true`` for Phoenix's root URL ``base_url``.

    Raises ValueError for a URL that is not http(s) or that points at the OTLP endpoint.
    """
    parsed = urllib.parse.urlsplit(base_url.strip())
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ValueError(
            f"Phoenix base URL must be http(s)://host[:port][/prefix], got {base_url!r}"
        )
    path = parsed.path.rstrip("/")
    if path.endswith("/v1/traces"):
        raise ValueError(
            f"{base_url!r} is Phoenix's OTLP endpoint; give its root URL (without /v1/traces)"
        )
    return urllib.parse.urlunsplit(
        (parsed.scheme, parsed.netloc, path + SPAN_ANNOTATIONS_PATH, "sync=true", "")
    )


def _post_once(
    opener: urllib.request.OpenerDirector,
    url: str,
    chunk: Sequence[Annotation],
    headers: Mapping[str, str],
    timeout: float,
) -> None:
    body = json.dumps({"data": list(chunk)}).encode()
    request = urllib.request.Request(url, data=body, method="POST")
    request.add_header("Content-Type", "application/json")
    for key, value in headers.items():
        request.add_header(key, value)
    try:
        with opener.open(request, timeout=timeout) as response:
            response.read()
    except urllib.error.HTTPError as exc:
        detail = exc.read()[:500].decode(errors="replace")
        # 404 = spans not ingested yet (Phoenix inserts OTLP spans asynchronously); 408/429/5xx are
        # transient. Anything else (400, 401, 403, 422) will not change by asking again.
        transient = exc.code in (404, 408, 429) or exc.code >= 500
        raise _RefusedError(exc.code, detail, retry=transient) from None
    except (OSError, TimeoutError) as exc:  # URLError, connection refused/reset, socket timeout
        raise _RefusedError(None, f"{type(exc).__name__}: {exc}", retry=True) from None


def _missing_span_ids(detail: str) -> set[str]:
    try:
        message = json.loads(detail).get("detail", detail)
    except (json.JSONDecodeError, AttributeError):
        message = detail
    found = _MISSING_SPANS.search(str(message))
    return {s.strip() for s in found.group(1).split(",")} if found else set()


def post_annotations(
    base_url: str,
    annotations: Sequence[Annotation],
    *,
    timeout: float = 5.0,
    max_attempts: int = 5,
    retry_delay: float = 0.2,
    headers: Mapping[str, str] | None = None,
    chunk_size: int = MAX_CHUNK,
    sleep: Callable[[float], object] = time.sleep,
    opener: urllib.request.OpenerDirector | None = None,
) -> PostResult:
    """POST ``annotations`` to Phoenix (``/v1/span_annotations?sync=true``), in chunks; never raises
    for an HTTP or network failure (the result counts and describes them).

    A chunk is tried up to ``max_attempts`` times with doubling delays from ``retry_delay``
    (:class:`~otel_footprint.annotate.backoff.Backoff`, the senders' one policy) on a
    transient failure — including 404, which Phoenix answers while the spans are still being
    ingested. When the last answer names missing spans, the chunk is sent once more without them.
    Raises ValueError for a bad ``base_url`` or bounds.
    """
    url = annotations_url(base_url)
    if max_attempts < 1 or chunk_size < 1 or timeout <= 0 or retry_delay < 0:
        raise ValueError("max_attempts and chunk_size must be >= 1, timeout > 0, retry_delay >= 0")
    backoff = Backoff(retry_delay, max_attempts=max_attempts)
    opener = opener or urllib.request.build_opener()
    headers = dict(headers or {})
    posted = failed = 0
    errors: list[str] = []
    for start in range(0, len(annotations), chunk_size):
        chunk = list(annotations[start : start + chunk_size])
        sent, error = _post_chunk(opener, url, chunk, headers, timeout, backoff, sleep)
        posted += sent
        failed += len(chunk) - sent
        if error is not None:
            errors.append(error)
    return PostResult(posted, failed, tuple(errors))


def _post_chunk(
    opener: urllib.request.OpenerDirector,
    url: str,
    chunk: list[Annotation],
    headers: Mapping[str, str],
    timeout: float,
    backoff: Backoff,
    sleep: Callable[[float], object],
) -> tuple[int, str | None]:
    """(annotations posted, the error that stopped the rest or None)."""
    last = _RefusedError(None, "not attempted", retry=False)
    waits = backoff.delays()
    while True:
        try:
            _post_once(opener, url, chunk, headers, timeout)
            return len(chunk), None
        except _RefusedError as refused:
            last = refused
        delay = next(waits, None) if last.retry else None
        if delay is None:
            break
        sleep(delay)
    if last.status == 404:
        missing = _missing_span_ids(last.detail)
        rest = [a for a in chunk if a["span_id"] not in missing]
        if missing and rest and len(rest) < len(chunk):
            # The spans that are there should not pay for the ones that never arrived.
            try:
                _post_once(opener, url, rest, headers, timeout)
                return len(rest), f"{len(chunk) - len(rest)} annotation(s): {last}"
            except _RefusedError as refused:
                last = refused
    return 0, f"{len(chunk)} annotation(s): {last}"


# ── the exporter wrapper ──────────────────────────────────────────────────────────────────────


@dataclass(frozen=True, slots=True)
class PhoenixAnnotationStats:
    """Counters of a :class:`PhoenixAnnotationExporter` (annotations, not spans)."""

    posted: int
    failed: int
    """Refused by Phoenix, or not deliverable after the retries."""
    dropped: int
    """Left off: the queue was full, or still unsent when shutdown's time ran out."""
    skipped: int
    """Not attempted because the inner export of their spans failed."""
    pending: int


class PhoenixAnnotationExporter(SpanExporter):
    """Exports spans through ``inner``, then posts their check results as Phoenix span annotations.

    The posting runs on one background thread with a bounded queue, so the SDK's export path never
    waits for Phoenix (which only accepts an annotation once it has ingested the span: posts are
    retried with backoff). Nothing here raises into the SDK: failures are logged and counted
    (:meth:`stats`). :meth:`force_flush` and :meth:`shutdown` wait for the queue to drain, bounded
    by their timeouts. ``project`` is recorded in each annotation's metadata (Phoenix keys span
    annotations by span id alone). ``headers`` go on every request (e.g. an ``Authorization``
    header when Phoenix has authentication on).
    """

    def __init__(
        self,
        inner: SpanExporter,
        base_url: str,
        *,
        timeout: float = 5.0,
        project: str | None = None,
        identifier: str = DEFAULT_IDENTIFIER,
        headers: Mapping[str, str] | None = None,
        max_attempts: int = 6,
        retry_delay: float = 0.2,
        max_queue_size: int = 2048,
        shutdown_timeout: float = 10.0,
    ) -> None:
        annotations_url(base_url)  # fail at construction, not on the first export
        if max_queue_size < 1 or max_attempts < 1 or timeout <= 0 or shutdown_timeout < 0:
            raise ValueError(
                "max_queue_size, max_attempts >= 1; timeout > 0; shutdown_timeout >= 0"
            )
        self._inner = inner
        self._base_url = base_url
        self._timeout = timeout
        self._project = project
        self._identifier = identifier
        self._headers = dict(headers or {})
        self._max_attempts = max_attempts
        self._retry_delay = retry_delay
        self._max_queue_size = max_queue_size
        self._shutdown_timeout = shutdown_timeout
        self._opener = urllib.request.build_opener()
        self._queue: deque[Annotation] = deque()
        self._cond = threading.Condition()
        self._abort = threading.Event()
        self._in_flight = 0
        self._closed = False
        self._thread: threading.Thread | None = None
        self._posted = self._failed = self._dropped = self._skipped = 0

    @property
    def inner(self) -> SpanExporter:
        """The wrapped exporter."""
        return self._inner

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = self._inner.export(spans)
        try:
            annotations = phoenix_annotations_for(
                spans, project=self._project, identifier=self._identifier
            )
        except Exception:  # a malformed span must not break the application's export path
            logger.exception("could not read evaluation results for Phoenix annotations")
            return result
        if not annotations:
            return result
        if result is not SpanExportResult.SUCCESS:
            # Phoenix refuses annotations of spans it does not have.
            with self._cond:
                self._skipped += len(annotations)
            return result
        self._enqueue(annotations)
        return result

    def _enqueue(self, annotations: list[Annotation]) -> None:
        with self._cond:
            if self._closed:
                self._dropped += len(annotations)
                return
            room = self._max_queue_size - len(self._queue)
            if room < len(annotations):
                self._dropped += len(annotations) - max(room, 0)
                logger.warning(
                    "Phoenix annotation queue full (%d): %d annotation(s) dropped",
                    self._max_queue_size,
                    len(annotations) - max(room, 0),
                )
                annotations = annotations[: max(room, 0)]
            self._queue.extend(annotations)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._work, name="phoenix-annotations", daemon=True
                )
                self._thread.start()
            self._cond.notify_all()

    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    self._cond.wait()
                if not self._queue or self._abort.is_set():
                    return
                chunk = [self._queue.popleft() for _ in range(min(MAX_CHUNK, len(self._queue)))]
                self._in_flight = len(chunk)
            try:
                outcome = post_annotations(
                    self._base_url,
                    chunk,
                    timeout=self._timeout,
                    max_attempts=self._max_attempts,
                    retry_delay=self._retry_delay,
                    headers=self._headers,
                    # Shutdown past its bound cuts the backoff short; the retry then fails fast.
                    sleep=self._abort.wait,
                    opener=self._opener,
                )
            except Exception as exc:  # never let the worker die: count and go on
                logger.exception("posting Phoenix annotations failed")
                outcome = PostResult(0, len(chunk), (repr(exc),))
            for error in outcome.errors:
                logger.warning("Phoenix refused or could not take annotations: %s", error)
            with self._cond:
                self._posted += outcome.posted
                self._failed += outcome.failed
                self._in_flight = 0
                self._cond.notify_all()

    def _drain(self, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        with self._cond:
            while self._queue or self._in_flight:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Flush ``inner``, then wait until every queued annotation was posted (or gave up)."""
        start = time.monotonic()
        flushed = self._inner.force_flush(timeout_millis)
        left = max(timeout_millis / 1000 - (time.monotonic() - start), 0.0)
        return self._drain(left) and flushed

    def shutdown(self) -> None:
        """Post what is queued (up to ``shutdown_timeout`` seconds), then shut ``inner`` down."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._cond.notify_all()
        if not self._drain(self._shutdown_timeout):
            self._abort.set()
        thread = self._thread
        if thread is not None:
            thread.join(self._timeout * 2 + 1)
        with self._cond:
            if self._queue:
                self._dropped += len(self._queue)
                logger.warning("Phoenix annotations: %d left unsent at shutdown", len(self._queue))
                self._queue.clear()
        self._inner.shutdown()

    def stats(self) -> PhoenixAnnotationStats:
        """Posted, failed, dropped, skipped and pending annotation counts."""
        with self._cond:
            return PhoenixAnnotationStats(
                posted=self._posted,
                failed=self._failed,
                dropped=self._dropped,
                skipped=self._skipped,
                pending=len(self._queue) + self._in_flight,
            )


__all__ = [
    "ANNOTATOR_KIND",
    "DEFAULT_IDENTIFIER",
    "Annotation",
    "PhoenixAnnotationExporter",
    "PhoenixAnnotationStats",
    "PostResult",
    "SpanLike",
    "annotations_from_request",
    "annotations_url",
    "phoenix_annotations_for",
    "post_annotations",
]
