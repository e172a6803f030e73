"""Plain-HTTP access to a Phoenix server for the end-to-end tests (stdlib only, so the project venv
needs no Phoenix package): span queries by attribute, span annotations, and bounded polling."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final, Literal, TypeAlias

from servers import poll

AttrScalar: TypeAlias = str | bool | int | float
"""A value the REST ``attribute=key:value`` filter can match (lists cannot be matched there)."""

AnnotatorKind: TypeAlias = Literal["CODE", "LLM", "HUMAN"]


MAX_SPANS: Final = 1000
"""Phoenix's per-request page limit; every query here is bounded by it (tests stay far below)."""

# Loopback only: a proxy from the environment must never see (or break) test traffic.
_OPENER: Final = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class PhoenixError(RuntimeError):
    """Phoenix answered with an error status, an unreadable body, or a GraphQL error."""


@dataclass(frozen=True, slots=True)
class PhoenixEvent:
    """A span event as Phoenix returns it (attribute names flat and dotted, values typed)."""

    name: str
    timestamp: str
    attributes: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class PhoenixSpan:
    """A span as Phoenix's REST API returns it (``GET /v1/projects/{name}/spans``)."""

    name: str
    trace_id: str
    span_id: str
    parent_id: str | None
    span_kind: str
    status_code: str
    status_message: str
    attributes: Mapping[str, Any]
    events: tuple[PhoenixEvent, ...]

    @classmethod
    def from_rest(cls, obj: Mapping[str, Any]) -> PhoenixSpan:
        """Build from one element of the REST response's ``data`` list."""
        context = obj["context"]
        return cls(
            name=str(obj["name"]),
            trace_id=str(context["trace_id"]),
            span_id=str(context["span_id"]),
            parent_id=obj.get("parent_id"),
            span_kind=str(obj.get("span_kind", "")),
            status_code=str(obj.get("status_code", "")),
            status_message=str(obj.get("status_message", "")),
            attributes=MappingProxyType(dict(obj.get("attributes") or {})),
            events=tuple(
                PhoenixEvent(
                    name=str(e["name"]),
                    timestamp=str(e.get("timestamp", "")),
                    attributes=MappingProxyType(dict(e.get("attributes") or {})),
                )
                for e in obj.get("events") or ()
            ),
        )

    def events_named(self, name: str) -> list[PhoenixEvent]:
        """This span's events with the given name, in recorded order."""
        return [e for e in self.events if e.name == name]


@dataclass(frozen=True, slots=True)
class PhoenixAnnotation:
    """A span annotation read back from ``GET /v1/projects/{name}/span_annotations``."""

    span_id: str
    name: str
    annotator_kind: str
    label: str | None
    score: float | None
    explanation: str | None
    metadata: Mapping[str, Any]


# --- filter builders --------------------------------------------------------------------------


def rest_attribute_filter(name: str, value: AttrScalar) -> str:
    """One ``attribute=`` value for the REST span query.

    Strings are always JSON-quoted so that a numeric- or boolean-looking string (``"12345"``,
    ``"true"``) is matched as a string; Phoenix JSON-parses the part after the first colon.
    """
    if isinstance(value, bool):
        return f"{name}:{'true' if value else 'false'}"
    if isinstance(value, int | float | str):
        return f"{name}:{json.dumps(value)}"
    raise TypeError(
        f"the REST attribute filter cannot match {type(value).__name__} values ({name}); "
        "use a GraphQL condition with gql_contains() for string arrays"
    )


def gql_ref(name: str, *, leaf_sibling: str | None = None) -> str:
    """A reference to attribute ``name`` usable in a Phoenix filter condition.

    The bracket form ``attributes['a']['b']`` is used because a dotted path breaks on Python
    keywords (``footprint.pass.iteration`` is a syntax error). When another attribute on the same
    span is a dotted prefix of ``name`` (``leaf_sibling``: ``footprint.summary`` for
    ``footprint.summary.tone``), Phoenix stores the longer one under the sibling's parent with its
    remaining dots kept inside one key, and only that exact path reaches it.
    """
    if leaf_sibling is None:
        keys = name.split(".")
    else:
        if not name.startswith(leaf_sibling + "."):
            raise ValueError(f"{leaf_sibling!r} is not a dotted prefix of {name!r}")
        parent = leaf_sibling.split(".")[:-1]
        keys = [*parent, name[len(".".join(parent)) + 1 :]]
    return "attributes" + "".join(f"[{gql_literal(k)}]" for k in keys)


def gql_literal(value: AttrScalar) -> str:
    """A Python-expression literal for a filter condition."""
    # Python's own repr is the literal syntax (True/False, 3, 0.5, 'text' with escapes).
    return repr(value)


def gql_contains(name: str, element: str) -> str:
    """Exact membership of ``element`` in the string-array attribute ``name``.

    Phoenix evaluates ``'x' in array_attr`` as a substring test on the array's JSON text, so the
    element is matched together with its JSON quotes: ``'"skill-map"' in ...``.
    """
    return f"{gql_literal(json.dumps(element))} in {gql_ref(name)}"


# --- polling ---------------------------------------------------------------------------------


# --- the client ------------------------------------------------------------------------------

_SPAN_IDS_QUERY: Final = """
query ($project: String!, $condition: String, $first: Int!) {
  getProjectByName(name: $project) {
    spans(first: $first, filterCondition: $condition) { edges { node { spanId } } }
  }
}
"""


class PhoenixClient:
    """A few Phoenix endpoints over urllib, each call bounded by ``timeout`` seconds."""

    def __init__(self, base_url: str, grpc_endpoint: str | None, *, timeout: float = 10.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.grpc_endpoint = grpc_endpoint
        self.timeout = timeout

    @property
    def otlp_http_traces_url(self) -> str:
        """Phoenix's OTLP/HTTP (protobuf) traces endpoint."""
        return f"{self.base_url}/v1/traces"

    def healthy(self) -> bool:
        """True when ``/healthz`` answers 200."""
        try:
            with _OPENER.open(f"{self.base_url}/healthz", timeout=self.timeout) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    def _request(
        self,
        method: str,
        path: str,
        query: Sequence[tuple[str, str]] = (),
        body: Any = None,
    ) -> Any:
        url = self.base_url + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, method=method)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with _OPENER.open(request, timeout=self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read()[:500].decode(errors="replace")
            raise PhoenixError(f"{method} {url}: HTTP {exc.code}: {detail}") from None
        try:
            return json.loads(raw) if raw else None
        except json.JSONDecodeError as exc:
            raise PhoenixError(f"{method} {url}: body is not JSON ({exc.msg})") from None

    def spans(
        self,
        project: str,
        *,
        attributes: Mapping[str, AttrScalar] | None = None,
        names: Iterable[str] = (),
        span_ids: Iterable[str] = (),
        trace_ids: Iterable[str] = (),
        limit: int = MAX_SPANS,
    ) -> list[PhoenixSpan]:
        """Spans of ``project`` matching every filter (server side), oldest start first.

        An unknown project (nothing ingested yet) gives an empty list, not an error.
        """
        if not 0 < limit <= MAX_SPANS:
            raise ValueError(f"limit must be in 1..{MAX_SPANS}, got {limit}")
        query: list[tuple[str, str]] = [
            ("limit", str(limit)),
            ("sort", "start_time"),
            ("order", "asc"),
        ]
        query += [("attribute", rest_attribute_filter(k, v)) for k, v in (attributes or {}).items()]
        query += [("name", n) for n in names]
        query += [("span_id", s) for s in span_ids]
        query += [("trace_id", t) for t in trace_ids]
        path = f"/v1/projects/{_project_path(project)}/spans"
        try:
            body = self._request("GET", path, query)
        except PhoenixError as exc:
            if "HTTP 404" in str(exc):
                return []
            raise
        return [PhoenixSpan.from_rest(s) for s in body["data"]]

    def span_ids_where(self, project: str, condition: str, *, limit: int = MAX_SPANS) -> list[str]:
        """Span ids of ``project`` matching a Phoenix filter condition (GraphQL ``filterCondition``).

        Raises PhoenixError when Phoenix rejects the condition (its message says why).
        """
        body = self._request(
            "POST",
            "/graphql",
            body={
                "query": _SPAN_IDS_QUERY,
                "variables": {"project": project, "condition": condition, "first": limit},
            },
        )
        if body.get("errors"):
            raise PhoenixError(f"filter {condition!r}: {body['errors'][0].get('message')}")
        found = body["data"]["getProjectByName"]
        if found is None:
            return []
        return [str(edge["node"]["spanId"]) for edge in found["spans"]["edges"]]

    def spans_where(self, project: str, condition: str) -> list[PhoenixSpan]:
        """Spans matching a filter condition, with full attributes and events (REST by span id)."""
        ids = self.span_ids_where(project, condition)
        if not ids:
            return []
        return self.spans(project, span_ids=ids)

    def wait_for_spans(
        self,
        project: str,
        *,
        count: int = 1,
        timeout: float = 20.0,
        attributes: Mapping[str, AttrScalar] | None = None,
        names: Iterable[str] = (),
        trace_ids: Iterable[str] = (),
    ) -> list[PhoenixSpan]:
        """Poll :meth:`spans` until at least ``count`` spans match."""
        names, trace_ids = tuple(names), tuple(trace_ids)
        return poll(
            lambda: self.spans(project, attributes=attributes, names=names, trace_ids=trace_ids),
            lambda found: len(found) >= count,
            timeout=timeout,
            what=f"{count} span(s) in project {project!r} with {attributes or {}} names={names}",
        )

    def wait_for_spans_where(
        self, project: str, condition: str, *, count: int = 1, timeout: float = 20.0
    ) -> list[PhoenixSpan]:
        """Poll :meth:`spans_where` until at least ``count`` spans match ``condition``."""
        return poll(
            lambda: self.spans_where(project, condition),
            lambda found: len(found) >= count,
            timeout=timeout,
            what=f"{count} span(s) in project {project!r} where {condition}",
        )

    def annotate_span(
        self,
        span_id: str,
        name: str,
        *,
        label: str | None = None,
        score: float | None = None,
        explanation: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        annotator_kind: AnnotatorKind = "CODE",
        identifier: str = "",
    ) -> str:
        """Post one span annotation synchronously (``?sync=true``); returns its Phoenix id."""
        result = {
            k: v
            for k, v in (("label", label), ("score", score), ("explanation", explanation))
            if v is not None
        }
        item: dict[str, Any] = {
            "span_id": span_id,
            "name": name,
            "annotator_kind": annotator_kind,
            "result": result,
            "metadata": dict(metadata or {}),
            "identifier": identifier,
        }
        body = self._request(
            "POST", "/v1/span_annotations", [("sync", "true")], body={"data": [item]}
        )
        return str(body["data"][0]["id"])

    def span_annotations(
        self, project: str, span_ids: Iterable[str], *, names: Iterable[str] = ()
    ) -> list[PhoenixAnnotation]:
        """Annotations on the given spans (optionally only those with the given names)."""
        query = [("span_ids", s) for s in span_ids]
        if not query:
            raise ValueError("span_annotations needs at least one span id")
        query += [("include_annotation_names", n) for n in names]
        query.append(("limit", str(MAX_SPANS)))
        body = self._request(
            "GET", f"/v1/projects/{_project_path(project)}/span_annotations", query
        )
        out: list[PhoenixAnnotation] = []
        for a in body["data"]:
            result = a.get("result") or {}
            out.append(
                PhoenixAnnotation(
                    span_id=str(a["span_id"]),
                    name=str(a["name"]),
                    annotator_kind=str(a["annotator_kind"]),
                    label=result.get("label"),
                    score=result.get("score"),
                    explanation=result.get("explanation"),
                    metadata=MappingProxyType(dict(a.get("metadata") or {})),
                )
            )
        return out


def _project_path(project: str) -> str:
    # Phoenix refuses project names containing '/', '?' or '#' in the path form.
    if any(c in project for c in "/?#"):
        raise ValueError(f"a Phoenix project name cannot contain '/', '?' or '#': {project!r}")
    return urllib.parse.quote(project, safe="")
