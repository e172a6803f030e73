"""A trace downloaded from Grafana Tempo, as OTLP JSON: what ``explain`` reads of Tempo.

Tempo's trace-by-id API answers in two shapes: ``/api/traces/<id>`` gives ``{"batches": [...]}``
and ``/api/v2/traces/<id>`` gives ``{"trace": {...}}`` (with ``batches`` or ``resourceSpans`` in
it), Grafana's "Download trace" the same. A batch is an OTLP ``ResourceSpans`` in the protobuf JSON
mapping (base64 ids); older Tempo releases still name its parts as OTLP 0.x did
(``instrumentationLibrarySpans`` / ``instrumentationLibrary``), renamed here to today's names.
"""

from __future__ import annotations

from typing import Any

_OLD_NAMES = (("instrumentationLibrarySpans", "scopeSpans"), ("instrumentationLibrary", "scope"))


class TempoJsonError(ValueError):
    """A Tempo download that cannot be read; the message names the input."""


def _batches(document: Any) -> list[Any] | None:
    """The ``ResourceSpans`` of a Tempo download, or None when ``document`` is not one."""
    if not isinstance(document, dict):
        return None
    inner = document.get("trace")
    if isinstance(inner, dict) and set(document) <= {"trace", "status", "message"}:
        document = inner
        if not document:
            return []  # Tempo's answer for a trace it holds no spans of
    for key in ("batches", "resourceSpans"):
        found = document.get(key)
        if key == "batches" and isinstance(found, list):
            return found
        if key == "resourceSpans" and isinstance(found, list) and inner is not None:
            return found
    return None


def is_tempo_search(document: Any) -> bool:
    """Tempo's search answer (``/api/search``): trace ids and summaries, no spans to explain."""
    if not isinstance(document, dict) or not isinstance(document.get("traces"), list):
        return False
    traces = document["traces"]
    return all(isinstance(t, dict) and "traceID" in t and "spans" not in t for t in traces)


def is_tempo_trace(document: Any) -> bool:
    """True for either shape of Tempo's trace download."""
    return _batches(document) is not None


def tempo_to_otlp(document: Any, where: str) -> dict[str, Any]:
    """The download as one OTLP JSON export request (``{"resourceSpans": [...]}``)."""
    batches = _batches(document)
    if batches is None:
        raise TempoJsonError(f"{where}: not a Tempo trace download")
    if not batches:
        raise TempoJsonError(f"{where}: a Tempo trace download with no spans in it")
    for batch in batches:
        if not isinstance(batch, dict):
            raise TempoJsonError(f"{where}: a Tempo batch is a JSON {type(batch).__name__}")
        _rename(batch, *_OLD_NAMES[0])
        for scope_spans in batch.get("scopeSpans") or ():
            if isinstance(scope_spans, dict):
                _rename(scope_spans, *_OLD_NAMES[1])
    return {"resourceSpans": batches}


def _rename(node: dict[str, Any], old: str, new: str) -> None:
    if old in node and new not in node:
        node[new] = node.pop(old)
