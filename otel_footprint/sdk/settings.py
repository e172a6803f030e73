"""Every setting declared once: name, type, default, unit, environment variable, flag, doc.

Two msgspec models: :class:`InProcessSettings` (the ``FOOTPRINT_*`` variables of the in-process
path) and :class:`HopSettings` (the tree of the hop's YAML file, its ``--set`` keys and flags and
the ``OTEL_EXPORTER_OTLP_*`` variables it reads). The unit rides on the type (``Duration``,
``Size``, ``Seconds``, ``Address``), the doc, variables and flag on ``msgspec.Meta`` beside it. The
validator, the defaults, the flag and environment layers and the settings tables of README.md and
docs/deploy.md (``scripts/settings_docs.py``) are all read off these classes (docs/design.md: why
msgspec). It lives in ``sdk``, the lowest layer both delivery paths import, and imports only
msgspec and the standard library besides the run-holding core's defaults: the in-process path
stays lean.
"""

from __future__ import annotations

import ipaddress
import re
import typing
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, TypeAlias

import msgspec
from msgspec import inspect as mi

from otel_footprint.annotate.form import AnnotateOptions, WitnessPolicy
from otel_footprint.engine.decide import EngineOptions
from otel_footprint.runs.holding import DEFAULT_LIMITS
from otel_footprint.sdk.endpoint import Protocol as Protocol_

Unit: TypeAlias = Literal["duration", "size", "seconds", "host:port"]


class ConfigError(ValueError):
    """A configuration problem, with the dotted key path that caused it."""


@dataclass(frozen=True, slots=True)
class HostPort:
    """A listen address; port 0 asks the OS for a free port (reported on startup)."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    @property
    def is_loopback(self) -> bool:
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False


def doc(text: str, *, env: str | tuple[str, ...] = (), flag: str | None = None) -> msgspec.Meta:
    """A field's declaration: its one-line doc, variables (the first set one wins) and flag."""
    names = (env,) if isinstance(env, str) else env
    return msgspec.Meta(description=text, extra={"env": names, "flag": flag})


def _unit(name: Unit) -> msgspec.Meta:
    return msgspec.Meta(extra={"unit": name})


# Types that carry their unit (the docs show it; the hop's parser reads it: '500ms', '4MiB').
Seconds = Annotated[float, _unit("seconds")]
Duration = Annotated[float, _unit("duration")]
Size = Annotated[int, _unit("size")]
Address = Annotated[HostPort, _unit("host:port")]
Headers = dict[str, str]
_L = DEFAULT_LIMITS
_A = AnnotateOptions()
_E = EngineOptions()
"""What the annotation writes by default (the witness policy, the account's lines): one place."""


class _Model(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """A section of settings (frozen; unknown keys are refused)."""


# ---------------------------------------------------------------------------------------------
# The in-process path: FOOTPRINT_* (the footprint_otlp exporter)
# ---------------------------------------------------------------------------------------------


class InProcessSettings(_Model, frozen=True):
    """The ``footprint_otlp`` exporter's settings; arguments of the same names override them."""

    grace_seconds: Annotated[
        Seconds,
        doc(
            "how long a run is held after its run span ended, for late child spans",
            env="FOOTPRINT_GRACE_SECONDS",
        ),
    ] = _L.release_grace
    max_wait_seconds: Annotated[
        Seconds,
        doc(
            "the longest a run is held; then it is decided as is (`footprint.run.complete=false`)",
            env="FOOTPRINT_MAX_WAIT_SECONDS",
        ),
    ] = _L.max_wait
    max_runs: Annotated[
        int,
        doc(
            "runs held at once; past it the oldest is released unannotated (counted)",
            env="FOOTPRINT_MAX_RUNS",
        ),
    ] = _L.max_runs
    max_spans_per_run: Annotated[
        int,
        doc(
            "spans held per run; past it the run is released unannotated (counted)",
            env="FOOTPRINT_MAX_SPANS_PER_RUN",
        ),
    ] = _L.max_spans_per_run
    witness: Annotated[
        WitnessPolicy,
        doc(
            "what to write of the user's matched words: `keep`, `hash` or `drop`",
            env="FOOTPRINT_WITNESS",
        ),
    ] = _A.witness
    account_lines: Annotated[
        bool,
        doc(
            "write the account's lines as `footprint.account.line` events on the run span "
            "(false: the checks and the summary only)",
            env="FOOTPRINT_ACCOUNT_LINES",
        ),
    ] = _A.include_lines
    observed_runs: Annotated[
        bool,
        doc(
            "decide observed runs: agents with instrumentation only (no recorder) get the account "
            "and the integrity checks from their spans (false: such traces pass undecided)",
            env="FOOTPRINT_OBSERVED_RUNS",
        ),
    ] = _E.observed
    protocol: Annotated[
        Protocol_,
        doc(
            "the inner OTLP exporter's protocol (`grpc` or `http/protobuf`), with the usual "
            "`OTEL_EXPORTER_OTLP_*` variables",
            env=("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"),
        ),
    ] = "grpc"


def inprocess_settings(environ: Mapping[str, str], *only: str) -> InProcessSettings:
    """The in-process settings the environment gives (``only`` these fields, when named; the rest
    at their defaults); a bad value names its variable."""
    values: dict[str, Any] = {}
    for f, meta in fields(InProcessSettings):
        for name in meta["env"] if not only or f.name in only else ():
            raw = environ.get(name, "").strip()
            if not raw:
                continue
            try:
                one = msgspec.convert({f.name: raw}, InProcessSettings, strict=False)
            except msgspec.ValidationError:
                if choices := _choices(InProcessSettings, f.name):
                    raise ValueError(f"{name}={raw!r}: expected {_one_of(choices)}") from None
                if isinstance(f.default, bool):
                    raise ValueError(f"{name}={raw!r}: expected true or false") from None
                raise ValueError(f"{name}={raw!r} is not a valid number") from None
            values[f.name] = getattr(one, f.name)
            break
    return InProcessSettings(**values)


# ---------------------------------------------------------------------------------------------
# Value parsers for the hop (raw YAML / flag / env value -> normalized python value)
# ---------------------------------------------------------------------------------------------

Parser: TypeAlias = Callable[[Any, str], Any]

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ns|us|µs|ms|s|m|h|d)?\s*$")
_DURATION_UNITS: dict[str | None, float] = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
}
_DURATION_UNITS |= {"h": 3600.0, "d": 86400.0, None: 1.0}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(b|kb|kib|mb|mib|gb|gib|k|m|g)?\s*$", re.IGNORECASE)
_SIZE_UNITS: dict[str | None, int] = {
    None: 1,
    "b": 1,
    "k": 1024,
    "kb": 1000,
    "kib": 1024,
    "m": 1024**2,
    "mb": 1000**2,
}
_SIZE_UNITS |= {"mib": 1024**2, "g": 1024**3, "gb": 1000**3, "gib": 1024**3}


def parse_duration(value: Any, path: str) -> float:
    """Seconds from ``1.5s``, ``500ms``, ``2m``, or a bare number of seconds."""
    if isinstance(value, bool):
        raise ConfigError(f"{path}: expected a duration like '500ms' or '2s', got {value!r}")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str) and (m := _DURATION.match(value)):
        seconds = float(m.group(1)) * _DURATION_UNITS[m.group(2)]
    else:
        raise ConfigError(f"{path}: expected a duration like '500ms' or '2s', got {value!r}")
    if seconds < 0:
        raise ConfigError(f"{path}: a duration cannot be negative ({value!r})")
    return seconds


def parse_size(value: Any, path: str) -> int:
    """Bytes from ``4MiB``, ``512KiB``, ``1GB`` or a bare number of bytes."""
    if isinstance(value, bool):
        raise ConfigError(f"{path}: expected a size like '4MiB', got {value!r}")
    if isinstance(value, int):
        size = value
    elif isinstance(value, str) and (m := _SIZE.match(value)):
        unit = m.group(2).lower() if m.group(2) else None
        size = int(float(m.group(1)) * _SIZE_UNITS[unit])
    else:
        raise ConfigError(f"{path}: expected a size like '4MiB', got {value!r}")
    if size <= 0:
        raise ConfigError(f"{path}: a size must be positive ({value!r})")
    return size


_TRUE, _FALSE = ("true", "yes", "1", "on"), ("false", "no", "0", "off")


def _bool(value: Any, path: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in _TRUE + _FALSE:
        return value.lower() in _TRUE
    raise ConfigError(f"{path}: expected true or false, got {value!r}")


def _positive_int(value: Any, path: str) -> int:
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"{path}: expected a positive integer, got {value!r}")
    return value


def _str(value: Any, path: str) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ConfigError(f"{path}: expected a string, got {type(value).__name__} {value!r}")
    return str(value)


def _path(value: Any, path: str) -> Path:
    return Path(_str(value, path)).expanduser()


def _one_of(values: tuple[Any, ...]) -> str:
    return ", ".join(values[:-1]) + f" or {values[-1]}" if len(values) > 1 else str(values[0])


def _enum(allowed: tuple[str, ...]) -> Parser:
    def parse(value: Any, path: str) -> str:
        text = _str(value, path).strip().lower()
        if text not in allowed:
            raise ConfigError(f"{path}: expected one of {', '.join(allowed)}; got {value!r}")
        return text

    return parse


def parse_hostport(value: Any, path: str) -> HostPort:
    """``HOST:PORT`` (``[v6]:PORT`` for IPv6); the port may be 0 (pick a free one)."""
    text = _str(value, path).strip()
    m = re.match(r"^\[([^\]]+)\]:(\d+)$", text) or re.match(r"^([^:\[\]]*):(\d+)$", text)
    if not m:
        raise ConfigError(f"{path}: expected HOST:PORT (e.g. 127.0.0.1:4317), got {value!r}")
    host, port = m.group(1) or "127.0.0.1", int(m.group(2))
    if port > 65535:
        raise ConfigError(f"{path}: port {port} is out of range")
    return HostPort(host, port)


def parse_header_list(text: str, path: str) -> dict[str, str]:
    """The ``OTEL_EXPORTER_OTLP_HEADERS`` form: ``k1=v1,k2=v2``, percent-decoded."""
    headers: dict[str, str] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        if "=" not in item:
            raise ConfigError(f"{path}: header {item.strip()!r} is not of the form key=value")
        key, _, val = item.partition("=")
        headers[urllib.parse.unquote(key).strip().lower()] = urllib.parse.unquote(val).strip()
    return headers


def _headers(value: Any, path: str) -> dict[str, str]:
    if isinstance(value, str):
        return parse_header_list(value, path)
    if not isinstance(value, Mapping):
        raise ConfigError(f"{path}: expected a mapping of header name to value, got {value!r}")
    return {str(k).strip().lower(): _str(v, f"{path}.{k}") for k, v in value.items()}


def _optional(parse: Parser) -> Parser:
    def parse_optional(value: Any, path: str) -> Any:
        return None if value is None or value == "" else parse(value, path)

    return parse_optional


# ---------------------------------------------------------------------------------------------
# The hop's settings (the YAML tree; sections are nested models)
# ---------------------------------------------------------------------------------------------


def _otlp(suffix: str) -> tuple[str, str]:
    """The traces-specific variable wins over the general one."""
    return (f"OTEL_EXPORTER_OTLP_TRACES_{suffix}", f"OTEL_EXPORTER_OTLP_{suffix}")


class ServerTlsSettings(_Model, frozen=True):
    cert_file: Annotated[Path | None, doc("the server certificate (PEM)")] = None
    key_file: Annotated[Path | None, doc("its private key (PEM)")] = None
    client_ca_file: Annotated[Path | None, doc("require client certificates of this CA")] = None


class ReceiverSettings(_Model, frozen=True):
    endpoint: Address
    max_request_size: Annotated[Size, doc("larger: RESOURCE_EXHAUSTED / 413 (after gzip)")] = (
        4 << 20
    )
    max_concurrent_requests: Annotated[
        int, doc("beyond: RESOURCE_EXHAUSTED / 429, retry delay")
    ] = 16
    tls: ServerTlsSettings = ServerTlsSettings()


class GrpcReceiverSettings(ReceiverSettings, frozen=True):
    endpoint: Annotated[Address, doc("OTLP/gRPC listens here", flag="--grpc")] = HostPort(
        "127.0.0.1", 4317
    )


class HttpReceiverSettings(ReceiverSettings, frozen=True):
    endpoint: Annotated[Address, doc("OTLP/HTTP listens here", flag="--http")] = HostPort(
        "127.0.0.1", 4318
    )


class ProtocolsSettings(_Model, frozen=True):
    grpc: GrpcReceiverSettings = GrpcReceiverSettings()
    http: HttpReceiverSettings = HttpReceiverSettings()


class AuthSettings(_Model, frozen=True):
    bearer_token: Annotated[str | None, doc("the token every request must carry")] = None
    bearer_token_file: Annotated[Path | None, doc("or: a file holding it")] = None


class OtlpReceiverSettings(_Model, frozen=True):
    protocols: ProtocolsSettings = ProtocolsSettings()
    auth: AuthSettings = AuthSettings()
    allow_insecure_non_loopback: Annotated[bool, doc("off loopback without TLS and token")] = False
    grpc_workers: Annotated[int, doc("threads serving gRPC requests")] = 8


class ReceiversSettings(_Model, frozen=True):
    otlp: OtlpReceiverSettings = OtlpReceiverSettings()


class DecisionCacheSettings(_Model, frozen=True):
    max_traces: Annotated[int, doc("decided traces kept for their late spans")] = _L.cache_traces
    max_spans: Annotated[int, doc("parent links kept across those traces")] = _L.cache_spans
    max_bytes: Annotated[
        int | None,
        _unit("size"),
        doc("its share of processing.max_bytes (default: an eighth)"),
    ] = _L.cache_bytes


class RunStoreSettings(_Model, frozen=True):
    kind: Annotated[Literal["sqlite", "memory", "redis"], doc("run state store")] = "sqlite"
    path: Annotated[Path | None, doc("SQLite file (default <data_dir>/runs.sqlite)")] = None
    url: Annotated[str | None, doc("redis:// or rediss:// URL (kind: redis)")] = None
    key_prefix: Annotated[str, doc("prefix of the Redis keys")] = "otel-footprint:"
    ttl: Annotated[Duration, doc("how long a run's state is kept")] = 7 * 86400.0


class ProcessingSettings(_Model, frozen=True):
    annotate: Annotated[bool, doc("false: forward as received (the baseline)")] = True
    release_grace: Annotated[Duration, doc("after a run span or the root arrives")] = (
        _L.release_grace
    )
    max_wait: Annotated[Duration, doc("from a trace's first held span; then complete=false")] = (
        _L.max_wait
    )
    max_runs: Annotated[int, doc("traces held at once")] = _L.max_runs
    max_bytes: Annotated[Size, doc("wire bytes held at once")] = _L.max_bytes
    memory_limit: Annotated[
        int | None,
        _unit("size"),
        doc("resident memory past which input is refused (default: max_bytes)"),
    ] = None
    max_spans_per_run: Annotated[int, doc("spans held in one trace")] = _L.max_spans_per_run
    witness: Annotated[
        WitnessPolicy,
        doc("the user's matched words on the spans and in the query service: keep, hash or drop"),
    ] = _A.witness
    account_lines: Annotated[
        bool, doc("write the account's lines as `footprint.account.line` events on the run span")
    ] = _A.include_lines
    observed_runs: Annotated[
        bool,
        doc("decide observed runs (instrumentation only, no recorder); false: pass them undecided"),
    ] = _E.observed
    decision_cache: DecisionCacheSettings = DecisionCacheSettings()
    run_store: RunStoreSettings = RunStoreSettings()
    recent_verdicts: Annotated[int, doc("verdicts kept for StreamVerdicts' replay")] = 1000


class ClientTlsSettings(_Model, frozen=True):
    ca_file: Annotated[Path | None, doc("the CA to trust", env=_otlp("CERTIFICATE"))] = None
    cert_file: Annotated[Path | None, doc("client cert", env=_otlp("CLIENT_CERTIFICATE"))] = None
    key_file: Annotated[Path | None, doc("its key", env=_otlp("CLIENT_KEY"))] = None


class RetrySettings(_Model, frozen=True):
    initial_interval: Annotated[Duration, doc("first backoff")] = 0.2
    max_interval: Annotated[Duration, doc("longest backoff")] = 5.0
    max_elapsed_time: Annotated[Duration, doc("then give a batch up; 0 = until delivered")] = 0.0


class QueueSettings(_Model, frozen=True):
    max_size: Annotated[Size, doc("the disk queue's bound")] = 1 << 30
    segment_size: Annotated[Size, doc("one journal segment file")] = 16 << 20
    batch_max_size: Annotated[Size, doc("one forwarded batch")] = 2 << 20
    fsync: Annotated[bool, doc("fsync each write before acknowledging")] = True


class DeadLetterSettings(_Model, frozen=True):
    max_size: Annotated[Size, doc("<data_dir>/dead-letter.otlp: never deliverable")] = 256 << 20


class OtlpExporterSettings(_Model, frozen=True):
    endpoint: Annotated[
        str | None,
        doc("the next hop (required)", env="OTEL_EXPORTER_OTLP_ENDPOINT", flag="--forward"),
    ] = None
    traces_endpoint: Annotated[
        str | None, doc("full URL for traces (HTTP)", env="OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    ] = None
    logs_endpoint: Annotated[
        str | None, doc("full URL for logs (HTTP)", env="OTEL_EXPORTER_OTLP_LOGS_ENDPOINT")
    ] = None
    protocol: Annotated[
        Protocol_ | None,
        doc(
            "grpc unless the URL names /v1/traces", env=_otlp("PROTOCOL"), flag="--forward-protocol"
        ),
    ] = None
    insecure: Annotated[
        bool | None, doc("gRPC: plaintext unless https or a CA", env=_otlp("INSECURE"))
    ] = None
    headers: Annotated[
        Headers, doc("sent with each request", env=tuple(reversed(_otlp("HEADERS"))))
    ] = msgspec.field(default_factory=dict)
    timeout: Annotated[Duration, doc("per request (variable: ms)", env=_otlp("TIMEOUT"))] = 10.0
    compression: Annotated[
        Literal["none", "gzip"], doc("none or gzip", env=_otlp("COMPRESSION"))
    ] = "none"
    forward_logs: Annotated[bool, doc("forward log records too")] = True
    max_request_size: Annotated[Size, doc("larger requests are split (the Collector's limit)")] = (
        4 << 20
    )
    dead_letter: DeadLetterSettings = DeadLetterSettings()
    tls: ClientTlsSettings = ClientTlsSettings()
    retry: RetrySettings = RetrySettings()
    queue: QueueSettings = QueueSettings()


class PhoenixAnnotationsSettings(_Model, frozen=True):
    endpoint: Annotated[str | None, doc("Phoenix's root URL, e.g. http://phoenix:6006")] = None
    project: Annotated[str | None, doc("recorded in each annotation's metadata")] = None
    headers: Annotated[Headers, doc("e.g. {authorization: Bearer ...}")] = msgspec.field(
        default_factory=dict
    )
    timeout: Annotated[Duration, doc("per request")] = 5.0
    max_attempts: Annotated[int, doc("per chunk of 100; 404 and 5xx retried")] = 6
    max_pending: Annotated[int, doc("annotations waiting for spans / to be posted")] = 10000


class ExportersSettings(_Model, frozen=True):
    otlp: OtlpExporterSettings = OtlpExporterSettings()
    phoenix_annotations: PhoenixAnnotationsSettings = PhoenixAnnotationsSettings()


class OtlpMetricsSettings(_Model, frozen=True):
    endpoint: Annotated[str | None, doc("also push the self-metrics as OTLP here")] = None
    protocol: Annotated[Protocol_ | None, doc("grpc (default) or http/protobuf")] = None
    interval: Annotated[Duration, doc("between pushes")] = 10.0


class MetricsSettings(_Model, frozen=True):
    otlp: OtlpMetricsSettings = OtlpMetricsSettings()
    max_names: Annotated[
        int, doc("verdict metrics: distinct agent (and map) names; later ones count as _other")
    ] = 100


class RunPageSettings(_Model, frozen=True):
    enabled: Annotated[bool, doc("GET /runs: the recent runs and their explain view")] = True
    runs: Annotated[int, doc("decided runs listed (the newest are kept)")] = 1000
    explained: Annotated[int, doc("newest runs whose full view is kept to open")] = 50
    max_passes: Annotated[int, doc("passes those full views keep at most, together")] = 20000
    page_size: Annotated[int, doc("rows on one page (?limit= asks fewer)")] = 100
    refresh: Annotated[Duration, doc("how often the open page reloads itself")] = 5.0


class LogsSettings(_Model, frozen=True):
    level: Annotated[Literal["debug", "info", "warning", "error"], doc("log level")] = "info"


class TelemetrySettings(_Model, frozen=True):
    endpoint: Annotated[Address, doc("GET /health, GET /metrics", flag="--telemetry")] = HostPort(
        "127.0.0.1", 13133
    )
    allow_non_loopback: Annotated[bool, doc("no TLS or token here: opt in to expose")] = False
    logs: LogsSettings = LogsSettings()
    metrics: MetricsSettings = MetricsSettings()
    run_page: RunPageSettings = RunPageSettings()


class ServiceSettings(_Model, frozen=True):
    data_dir: Annotated[
        Path | None, doc("queue, run store ($XDG_STATE_HOME/otel-footprint)", flag="--data-dir")
    ] = None
    shutdown_timeout: Annotated[Duration, doc("graceful stop bound")] = 15.0
    telemetry: TelemetrySettings = TelemetrySettings()


class HopSettings(_Model, frozen=True):
    """The whole tree of ``otel-footprint serve``'s configuration file."""

    receivers: ReceiversSettings = ReceiversSettings()
    processing: ProcessingSettings = ProcessingSettings()
    exporters: ExportersSettings = ExportersSettings()
    service: ServiceSettings = ServiceSettings()


# ---------------------------------------------------------------------------------------------
# Reading the models: fields, parsers, validation, construction
# ---------------------------------------------------------------------------------------------


def _meta(t: mi.Type) -> dict[str, Any]:
    meta: dict[str, Any] = {"unit": None, "env": (), "flag": None, "doc": ""}
    if isinstance(t, mi.Metadata):
        meta |= {**(t.extra or {}), "doc": (t.extra_json_schema or {}).get("description", "")}
    return meta


def _bare(t: mi.Type) -> mi.Type:
    return t.type if isinstance(t, mi.Metadata) else t


def fields(model: type[msgspec.Struct]) -> Iterator[tuple[mi.Field, dict[str, Any]]]:
    """A model's fields in declaration order, each with its doc, unit, variables and flag."""
    info = mi.type_info(model)
    assert isinstance(info, mi.StructType)
    for f in info.fields:
        yield f, _meta(f.type)


def section_of(t: mi.Type) -> type[msgspec.Struct] | None:
    """The model of a section field (None for a leaf)."""
    bare = _bare(t)
    return bare.cls if isinstance(bare, mi.StructType) else None


def _choices(model: type[msgspec.Struct], name: str) -> tuple[str, ...]:
    """A Literal field's values in their declared order (msgspec's type info sorts them)."""
    hint = typing.get_type_hints(model)[name]
    args = [a for a in typing.get_args(hint) if a is not type(None)] or [hint]
    literal = args[0] if typing.get_origin(args[0]) is Literal else hint
    return (
        tuple(str(v) for v in typing.get_args(literal))
        if typing.get_origin(literal) is Literal
        else ()
    )


def _parser(t: mi.Type, unit: str | None, choices: tuple[str, ...] = ()) -> Parser:
    bare = _bare(t)
    if isinstance(bare, mi.UnionType):
        (inner,) = (u for u in bare.types if not isinstance(u, mi.NoneType))
        return _optional(_parser(inner, unit, choices))
    if unit == "duration":
        return parse_duration
    if unit == "size":
        return parse_size
    if unit == "host:port":
        return parse_hostport
    if isinstance(bare, mi.LiteralType):
        return _enum(choices)
    if isinstance(bare, mi.CustomType):
        return _path
    if isinstance(bare, mi.DictType):
        return _headers
    return {mi.BoolType: _bool, mi.IntType: _positive_int}.get(type(bare), _str)


def validate(raw: Any, model: type[msgspec.Struct] = HopSettings, path: str = "") -> dict[str, Any]:
    """Check ``raw`` against ``model``: every key known, every leaf well-typed. Returns it parsed."""
    where = path or "the top level"
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: expected a mapping, got {type(raw).__name__} {raw!r}")
    known = {f.name: f for f, _ in fields(model)}
    out: dict[str, Any] = {}
    for key, value in raw.items():
        key_path = f"{path}.{key}" if path else str(key)
        if key not in known:
            valid = ", ".join(sorted(known))
            raise ConfigError(f"unknown key '{key_path}'; valid keys under {where}: {valid}")
        f = known[key]
        section = section_of(f.type)
        if section is not None:
            out[key] = validate(value, section, key_path)
        else:
            parse = _parser(f.type, _meta(f.type)["unit"], _choices(model, key))
            out[key] = parse(value, key_path)
    return out


def _keep(kind: type, value: Any) -> Any:
    if isinstance(value, kind):
        return value
    raise TypeError(f"expected {kind.__name__}")


def settle(tree: Mapping[str, Any]) -> HopSettings:
    """The typed settings of a validated tree, every key not in it at its declared default."""
    return msgspec.convert(tree, HopSettings, dec_hook=_keep, from_attributes=True)


def leaves(
    model: type[msgspec.Struct] = HopSettings, prefix: str = ""
) -> Iterator[tuple[str, mi.Field, dict[str, Any]]]:
    """Every leaf setting as (dotted key, field, metadata)."""
    for f, meta in fields(model):
        section = section_of(f.type)
        if section is None:
            yield prefix + f.name, f, meta
        else:
            yield from leaves(section, f"{prefix}{f.name}.")


def flags() -> dict[str, str]:
    """``--flag`` -> the dotted key it sets."""
    return {meta["flag"]: key for key, _, meta in leaves() if meta["flag"]}
