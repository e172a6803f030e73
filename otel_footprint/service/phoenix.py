"""Optional: the hop posts check results as Arize Phoenix span annotations once their spans are forwarded.

``exporters.phoenix_annotations.endpoint`` turns it on. Annotations are taken from the notes of each
decided release (no re-parsing), wait until the journal record holding their spans was accepted by
the next hop (Phoenix refuses annotations of spans it has not ingested), then go out on one
background thread through :func:`otel_footprint.annotate.phoenix.post_annotations`. Everything is
bounded and best effort: a full queue, a slow or failing Phoenix, or a restart drops annotations
(counted), never holds or fails the forwarding path.
"""

from __future__ import annotations

import collections
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

from otel_footprint import semconv
from otel_footprint.annotate.phoenix import (
    MAX_CHUNK,
    Annotation,
    PostResult,
    phoenix_annotations_for,
    post_annotations,
)
from otel_footprint.sdk.settings import PhoenixAnnotationsSettings
from otel_footprint.service import jsonlog
from otel_footprint.service.metrics import HopMetrics
from otel_footprint.service.worker import Worker

if TYPE_CHECKING:
    from otel_footprint.service.annotation import Decision
    from otel_footprint.service.buffer import Release

_log = jsonlog.get("phoenix")

PostFunction = Callable[..., PostResult]


class PhoenixAnnotations:
    """Annotations by journal record: registered when a release is queued, posted once forwarded."""

    def __init__(
        self,
        cfg: PhoenixAnnotationsSettings,
        metrics: HopMetrics,
        *,
        post: PostFunction = post_annotations,
    ) -> None:
        self.cfg = cfg
        self.metrics = metrics
        self._post = post
        self._opener = urllib.request.build_opener()
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._waiting: dict[int, list[Annotation]] = {}
        self._waiting_count = 0
        self._ready: collections.deque[Annotation] = collections.deque()
        self._in_flight = 0
        self._closed = False
        self._worker = Worker("otel-footprint-phoenix", self._step)
        self._abort = self._worker.stopping
        metrics.phoenix_annotations_pending.set_reader(
            lambda: self._waiting_count + len(self._ready) + self._in_flight
        )

    # -- the pipeline's side -------------------------------------------------------------------

    def annotations_for(self, release: Release, decisions: Sequence[Decision]) -> list[Annotation]:
        """Phoenix annotations of the spans whose notes carry check results (the run spans)."""
        noted = {
            span_id
            for decision in decisions
            for span_id, note in decision.notes.items()
            if any(event.name == semconv.EV_EVALUATION_RESULT for event in note.events)
        }
        if not noted:
            return []
        spans = [h.span for h in release.spans() if h.span_id in noted]
        try:
            return phoenix_annotations_for(spans, project=self.cfg.project)
        except Exception:  # an odd span must not cost the release its forwarding
            _log.exception("cannot read check results for Phoenix annotations")
            return []

    @contextmanager
    def registering(self) -> Iterator[None]:
        """Hold while appending records and calling :meth:`expect`: a forwarder reporting those
        records delivered waits until their annotations are registered."""
        with self._lock:
            yield

    def expect(self, seq: int, annotations: list[Annotation]) -> None:
        """Post ``annotations`` once journal record ``seq`` is forwarded (lock held by caller)."""
        if not annotations:
            return
        if self._closed or self._waiting_count + len(annotations) > self.cfg.max_pending:
            self.metrics.phoenix_annotations_dropped.inc(len(annotations), "queue_full")
            return
        self._waiting[seq] = annotations
        self._waiting_count += len(annotations)

    # -- the forwarder's side ------------------------------------------------------------------

    def settled(self, seqs: Sequence[int], delivered: bool) -> None:
        """Journal records left the queue: forwarded (post their annotations) or dropped."""
        with self._lock:
            for seq in seqs:
                annotations = self._waiting.pop(seq, None)
                if annotations is None:
                    continue
                self._waiting_count -= len(annotations)
                if not delivered:
                    self.metrics.phoenix_annotations_dropped.inc(
                        len(annotations), "spans_not_forwarded"
                    )
                    continue
                room = self.cfg.max_pending - len(self._ready)
                if room < len(annotations):
                    self.metrics.phoenix_annotations_dropped.inc(
                        len(annotations) - max(room, 0), "queue_full"
                    )
                    annotations = annotations[: max(room, 0)]
                self._ready.extend(annotations)
            if self._ready:
                self._wake.notify()

    # -- the poster thread ---------------------------------------------------------------------

    def start(self) -> None:
        self._worker.start()

    def _step(self) -> bool:
        """Post one chunk of ready annotations; False once closed with nothing left."""
        with self._lock:
            while not self._ready and not self._closed:
                self._wake.wait()
            if not self._ready or self._abort.is_set():
                return False
            chunk = [self._ready.popleft() for _ in range(min(MAX_CHUNK, len(self._ready)))]
            self._in_flight = len(chunk)
        try:
            result = self._post(
                self.cfg.endpoint,
                chunk,
                timeout=self.cfg.timeout,
                max_attempts=self.cfg.max_attempts,
                headers=self.cfg.headers,
                sleep=self._abort.wait,
                opener=self._opener,
            )
        except Exception as exc:  # never let the poster die: count and go on
            _log.exception("posting Phoenix annotations failed")
            result = PostResult(0, len(chunk), (repr(exc),))
        for error in result.errors:
            _log.warning("Phoenix refused or could not take annotations", extra={"error": error})
        self.metrics.phoenix_annotations_posted.inc(result.posted)
        self.metrics.phoenix_annotations_failed.inc(result.failed)
        with self._lock:
            self._in_flight = 0
            self._wake.notify_all()
        return True

    def stop(self, deadline: float) -> None:
        """Post what is ready until ``deadline`` (monotonic), then drop the rest (counted)."""
        with self._lock:
            self._closed = True
            self._wake.notify_all()
            while (self._ready or self._in_flight) and time.monotonic() < deadline:
                self._wake.wait(max(0.0, deadline - time.monotonic()))
            self._abort.set()
            left = len(self._ready) + self._waiting_count
            self._ready.clear()
            self._waiting.clear()
            self._waiting_count = 0
            self._wake.notify_all()
        if left:
            self.metrics.phoenix_annotations_dropped.inc(left, "shutdown")
            _log.warning("Phoenix annotations left unsent at shutdown", extra={"count": left})
        self._worker.join(timeout=self.cfg.timeout + 1)
