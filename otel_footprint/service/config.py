"""The hop's configuration: a YAML file (receivers / processing / exporters / service), flags, env.

Precedence, highest first: command-line flags (and ``--set key=value``), the config file, the
standard ``OTEL_EXPORTER_OTLP_*`` variables (forward side only), built-in defaults. Every key is
checked against one schema: an unknown key is an error naming it and the valid keys beside it.
"""

from __future__ import annotations

import importlib.util
import ipaddress
import os
import re
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeAlias

import yaml

from otel_footprint.runs.holding import DEFAULT_LIMITS
from otel_footprint.sdk import endpoint as endpoint_rule
from otel_footprint.service.otlp import LOGS_PATH, TRACES_PATH

Protocol_: TypeAlias = Literal["grpc", "http/protobuf"]
PROTOCOLS: tuple[str, ...] = ("grpc", "http/protobuf")


class ConfigError(ValueError):
    """A configuration problem, with the dotted key path that caused it."""


# ---------------------------------------------------------------------------------------------
# Typed configuration (what the rest of the hop reads)
# ---------------------------------------------------------------------------------------------


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


@dataclass(frozen=True, slots=True)
class ServerTls:
    """Server certificate, and (optionally) the CA that client certificates must chain to."""

    cert_file: Path
    key_file: Path
    client_ca_file: Path | None = None


@dataclass(frozen=True, slots=True)
class ReceiverConfig:
    """One OTLP receiver (gRPC or HTTP)."""

    endpoint: HostPort
    max_request_bytes: int
    max_concurrent_requests: int
    tls: ServerTls | None


@dataclass(frozen=True, slots=True)
class ReceiversConfig:
    grpc: ReceiverConfig
    http: ReceiverConfig
    bearer_token: str | None
    allow_insecure_non_loopback: bool
    grpc_workers: int


@dataclass(frozen=True, slots=True)
class RunStoreConfig:
    """Where run state that outlives a trace lives: local SQLite, memory, or a shared Redis."""

    kind: Literal["sqlite", "memory", "redis"]
    path: Path
    url: str | None = None
    key_prefix: str = "otel-footprint:"
    ttl: float = 7 * 86400.0


@dataclass(frozen=True, slots=True)
class ProcessingConfig:
    """The run buffer's timing and limits."""

    annotate: bool
    release_grace: float
    """Seconds to wait after a run span (or the trace root) arrives, for late children."""
    max_wait: float
    """Seconds a trace may be held from its first span before it is decided incomplete."""
    max_runs: int
    max_bytes: int
    max_spans_per_run: int
    decision_cache_traces: int
    decision_cache_spans: int
    run_store: RunStoreConfig
    recent_verdicts: int


@dataclass(frozen=True, slots=True)
class ClientTls:
    """TLS towards the next hop: CA to trust, optional client certificate."""

    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None


@dataclass(frozen=True, slots=True)
class RetryConfig:
    initial_interval: float
    max_interval: float
    max_elapsed_time: float
    """0 = retry until it succeeds (the disk queue holds the batch meanwhile)."""


@dataclass(frozen=True, slots=True)
class QueueConfig:
    max_bytes: int
    segment_bytes: int
    batch_max_bytes: int
    fsync: bool


@dataclass(frozen=True, slots=True)
class ExporterConfig:
    """Where annotated spans go: the next OTLP hop."""

    protocol: Protocol_
    traces_target: str
    """gRPC: ``host:port``; HTTP: the full ``/v1/traces`` URL."""
    logs_target: str | None
    """None when logs are not forwarded."""
    secure: bool
    tls: ClientTls
    headers: tuple[tuple[str, str], ...]
    timeout: float
    compression: Literal["none", "gzip"]
    retry: RetryConfig
    queue: QueueConfig
    max_request_bytes: int = 4 << 20
    """Requests to the next hop are split to at most this size (the Collector's default limit)."""
    dead_letter_max_bytes: int = 256 << 20
    """Bound of ``<data_dir>/dead-letter.otlp``, where requests that can never be delivered go."""


@dataclass(frozen=True, slots=True)
class PhoenixAnnotationsConfig:
    """Posting check results as Phoenix span annotations (``exporters.phoenix_annotations``)."""

    endpoint: str
    """Phoenix's root URL (``http://phoenix:6006``); ``/v1/span_annotations`` is appended."""
    project: str | None = None
    """Recorded in each annotation's metadata (Phoenix keys span annotations by span id alone)."""
    headers: tuple[tuple[str, str], ...] = ()
    timeout: float = 5.0
    max_attempts: int = 6
    """Per chunk of annotations; 404 (spans not ingested yet) and 5xx are retried with backoff."""
    retry_delay: float = 0.2
    max_pending: int = 10000
    """Annotations waiting for their spans to be forwarded, and (separately) waiting to be posted."""


@dataclass(frozen=True, slots=True)
class OtlpMetricsConfig:
    endpoint: str
    protocol: Protocol_
    interval: float


@dataclass(frozen=True, slots=True)
class ServiceConfig:
    data_dir: Path
    telemetry_endpoint: HostPort
    log_level: Literal["debug", "info", "warning", "error"]
    otlp_metrics: OtlpMetricsConfig | None
    shutdown_timeout: float


@dataclass(frozen=True, slots=True)
class HopConfig:
    """The whole, validated configuration of one ``serve`` process."""

    receivers: ReceiversConfig
    processing: ProcessingConfig
    exporter: ExporterConfig
    service: ServiceConfig
    sources: tuple[str, ...] = field(default=())
    """Where settings came from (for the startup log)."""
    phoenix_annotations: PhoenixAnnotationsConfig | None = None
    """Off (None) unless ``exporters.phoenix_annotations.endpoint`` is set."""


# ---------------------------------------------------------------------------------------------
# Value parsers (raw YAML / flag / env value -> normalized python value)
# ---------------------------------------------------------------------------------------------

Parser: TypeAlias = Callable[[Any, str], Any]

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ns|us|µs|ms|s|m|h|d)?\s*$")
_DURATION_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
    "d": 86400.0,
    None: 1.0,
}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(b|kb|kib|mb|mib|gb|gib|k|m|g)?\s*$", re.IGNORECASE)
_SIZE_UNITS = {
    None: 1,
    "b": 1,
    "k": 1024,
    "kb": 1000,
    "kib": 1024,
    "m": 1024**2,
    "mb": 1000**2,
    "mib": 1024**2,
    "g": 1024**3,
    "gb": 1000**3,
    "gib": 1024**3,
}


def _type_name(value: Any) -> str:
    return type(value).__name__


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


def _bool(value: Any, path: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in (
        "true",
        "false",
        "yes",
        "no",
        "1",
        "0",
        "on",
        "off",
    ):
        return value.lower() in ("true", "yes", "1", "on")
    raise ConfigError(f"{path}: expected true or false, got {value!r}")


def _positive_int(value: Any, path: str) -> int:
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"{path}: expected a positive integer, got {value!r}")
    return value


def _str(value: Any, path: str) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ConfigError(f"{path}: expected a string, got {_type_name(value)} {value!r}")
    return str(value)


def _opt_str(value: Any, path: str) -> str | None:
    if value is None or value == "":
        return None
    return _str(value, path)


def _opt_path(value: Any, path: str) -> Path | None:
    text = _opt_str(value, path)
    return None if text is None else Path(text).expanduser()


def _enum(*allowed: str) -> Parser:
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


def _headers(value: Any, path: str) -> dict[str, str]:
    if isinstance(value, str):
        return parse_header_list(value, path)
    if not isinstance(value, Mapping):
        raise ConfigError(f"{path}: expected a mapping of header name to value, got {value!r}")
    return {str(k).strip().lower(): _str(v, f"{path}.{k}") for k, v in value.items()}


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


# ---------------------------------------------------------------------------------------------
# The schema: nested dict of key -> parser (leaf) or dict (section). Defaults alongside.
# ---------------------------------------------------------------------------------------------

Schema: TypeAlias = dict[str, "Parser | Schema"]

_TLS_SERVER: Schema = {"cert_file": _opt_path, "key_file": _opt_path, "client_ca_file": _opt_path}
_TLS_CLIENT: Schema = {"ca_file": _opt_path, "cert_file": _opt_path, "key_file": _opt_path}


def _receiver_schema() -> Schema:
    return {
        "endpoint": parse_hostport,
        "max_request_size": parse_size,
        "max_concurrent_requests": _positive_int,
        "tls": dict(_TLS_SERVER),
    }


SCHEMA: Schema = {
    "receivers": {
        "otlp": {
            "protocols": {"grpc": _receiver_schema(), "http": _receiver_schema()},
            "auth": {"bearer_token": _opt_str, "bearer_token_file": _opt_path},
            "allow_insecure_non_loopback": _bool,
            "grpc_workers": _positive_int,
        }
    },
    "processing": {
        "annotate": _bool,
        "release_grace": parse_duration,
        "max_wait": parse_duration,
        "max_runs": _positive_int,
        "max_bytes": parse_size,
        "max_spans_per_run": _positive_int,
        "decision_cache": {"max_traces": _positive_int, "max_spans": _positive_int},
        "run_store": {
            "kind": _enum("sqlite", "memory", "redis"),
            "path": _opt_path,
            "url": _opt_str,
            "key_prefix": _str,
            "ttl": parse_duration,
        },
        "recent_verdicts": _positive_int,
    },
    "exporters": {
        "otlp": {
            "endpoint": _opt_str,
            "traces_endpoint": _opt_str,
            "logs_endpoint": _opt_str,
            "protocol": _enum(*PROTOCOLS),
            "insecure": _bool,
            "headers": _headers,
            "timeout": parse_duration,
            "compression": _enum("none", "gzip"),
            "forward_logs": _bool,
            "max_request_size": parse_size,
            "dead_letter": {"max_size": parse_size},
            "tls": dict(_TLS_CLIENT),
            "retry": {
                "initial_interval": parse_duration,
                "max_interval": parse_duration,
                "max_elapsed_time": parse_duration,
            },
            "queue": {
                "max_size": parse_size,
                "segment_size": parse_size,
                "batch_max_size": parse_size,
                "fsync": _bool,
            },
        },
        "phoenix_annotations": {
            "endpoint": _opt_str,
            "project": _opt_str,
            "headers": _headers,
            "timeout": parse_duration,
            "max_attempts": _positive_int,
            "max_pending": _positive_int,
        },
    },
    "service": {
        "data_dir": _opt_path,
        "shutdown_timeout": parse_duration,
        "telemetry": {
            "endpoint": parse_hostport,
            "allow_non_loopback": _bool,
            "logs": {"level": _enum("debug", "info", "warning", "error")},
            "metrics": {
                "otlp": {
                    "endpoint": _opt_str,
                    "protocol": _enum(*PROTOCOLS),
                    "interval": parse_duration,
                }
            },
        },
    },
}

DEFAULTS: dict[str, Any] = {
    "receivers": {
        "otlp": {
            "protocols": {
                "grpc": {
                    "endpoint": "127.0.0.1:4317",
                    "max_request_size": "4MiB",
                    "max_concurrent_requests": 16,
                },
                "http": {
                    "endpoint": "127.0.0.1:4318",
                    "max_request_size": "4MiB",
                    "max_concurrent_requests": 16,
                },
            },
            "allow_insecure_non_loopback": False,
            "grpc_workers": 8,
        }
    },
    "processing": {
        "annotate": True,
        # The run buffer's defaults are the run-holding core's (one set for both paths).
        "release_grace": DEFAULT_LIMITS.release_grace,
        "max_wait": DEFAULT_LIMITS.max_wait,
        "max_runs": DEFAULT_LIMITS.max_runs,
        "max_bytes": DEFAULT_LIMITS.max_bytes,
        "max_spans_per_run": DEFAULT_LIMITS.max_spans_per_run,
        "decision_cache": {
            "max_traces": DEFAULT_LIMITS.cache_traces,
            "max_spans": DEFAULT_LIMITS.cache_spans,
        },
        "run_store": {"kind": "sqlite", "key_prefix": "otel-footprint:", "ttl": "7d"},
        "recent_verdicts": 1000,
    },
    "exporters": {
        "otlp": {
            "timeout": "10s",
            "compression": "none",
            "forward_logs": True,
            "max_request_size": "4MiB",
            "dead_letter": {"max_size": "256MiB"},
            "retry": {"initial_interval": "200ms", "max_interval": "5s", "max_elapsed_time": "0s"},
            "queue": {
                "max_size": "1GiB",
                "segment_size": "16MiB",
                "batch_max_size": "2MiB",
                "fsync": True,
            },
        },
        "phoenix_annotations": {"timeout": "5s", "max_attempts": 6, "max_pending": 10000},
    },
    "service": {
        "shutdown_timeout": "15s",
        "telemetry": {
            "endpoint": "127.0.0.1:13133",
            "allow_non_loopback": False,
            "logs": {"level": "info"},
            "metrics": {"otlp": {"interval": "10s"}},
        },
    },
}


def _describe_valid(schema: Schema) -> str:
    return ", ".join(sorted(schema))


def validate(raw: Any, schema: Schema = SCHEMA, path: str = "") -> dict[str, Any]:
    """Check ``raw`` against ``schema``: every key known, every leaf well-typed. Returns it parsed."""
    where = path or "the top level"
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: expected a mapping, got {_type_name(raw)} {raw!r}")
    out: dict[str, Any] = {}
    for key, value in raw.items():
        key_path = f"{path}.{key}" if path else str(key)
        if key not in schema:
            raise ConfigError(
                f"unknown key '{key_path}'; valid keys under {where}: {_describe_valid(schema)}"
            )
        spec = schema[key]
        if isinstance(spec, dict):
            out[key] = validate(value, spec, key_path)
        else:
            out[key] = spec(value, key_path)
    return out


def _merge(base: dict[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in top.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), dict) and key != "headers":
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


_ENV_REF = re.compile(r"\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def expand_env(value: Any, environ: Mapping[str, str], path: str = "") -> Any:
    """Replace ``${env:NAME}`` / ``${NAME}`` (``${NAME:-default}``) in string values, as the Collector does."""
    if isinstance(value, str):

        def sub(m: re.Match[str]) -> str:
            name, default = m.group(1), m.group(2)
            if name in environ:
                return environ[name]
            if default is not None:
                return default
            raise ConfigError(f"{path or 'config'}: environment variable {name} is not set")

        return _ENV_REF.sub(sub, value)
    if isinstance(value, Mapping):
        return {
            k: expand_env(v, environ, f"{path}.{k}" if path else str(k)) for k, v in value.items()
        }
    if isinstance(value, list):
        return [expand_env(v, environ, f"{path}[{i}]") for i, v in enumerate(value)]
    return value


def load_file(path: Path, environ: Mapping[str, str]) -> dict[str, Any]:
    """Read, env-expand and validate one YAML config file."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file {path} is not YAML text (byte {exc.start})") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {path} is not valid YAML: {exc}") from exc
    if raw is None:
        return {}
    try:
        return validate(expand_env(raw, environ))
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from exc


def parse_set_option(item: str) -> dict[str, Any]:
    """``a.b.c=value`` (a ``--set`` flag) as a nested dict; the value is read as YAML."""
    key, sep, value = item.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"--set {item!r}: expected KEY=VALUE, e.g. processing.annotate=false")
    nested: dict[str, Any] = {}
    node = nested
    parts = key.strip().split(".")
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    try:
        node[parts[-1]] = yaml.safe_load(value) if value.strip() else ""
    except yaml.YAMLError as exc:
        raise ConfigError(f"--set {item!r}: value is not valid YAML: {exc}") from exc
    return nested


# ---------------------------------------------------------------------------------------------
# OTEL_EXPORTER_OTLP_* (forward side)
# ---------------------------------------------------------------------------------------------


def _env_pick(environ: Mapping[str, str], suffix: str) -> str | None:
    """The traces-specific variable wins over the general one."""
    for name in (f"OTEL_EXPORTER_OTLP_TRACES_{suffix}", f"OTEL_EXPORTER_OTLP_{suffix}"):
        value = environ.get(name)
        if value is not None and value.strip():
            return value.strip()
    return None


def otel_env_layer(environ: Mapping[str, str]) -> dict[str, Any]:
    """The exporter settings the standard ``OTEL_EXPORTER_OTLP_*`` variables give (validated)."""
    exp: dict[str, Any] = {}
    if base := environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip():
        exp["endpoint"] = base
    if traces := environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip():
        exp["traces_endpoint"] = traces
    if logs := environ.get("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", "").strip():
        exp["logs_endpoint"] = logs
    if protocol := _env_pick(environ, "PROTOCOL"):
        if protocol == "http/json":
            raise ConfigError(
                "OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL=http/json is not supported for forwarding; "
                "use grpc or http/protobuf"
            )
        exp["protocol"] = protocol
    headers: dict[str, str] = {}
    if general := environ.get("OTEL_EXPORTER_OTLP_HEADERS", "").strip():
        headers.update(parse_header_list(general, "OTEL_EXPORTER_OTLP_HEADERS"))
    if specific := environ.get("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "").strip():
        headers.update(parse_header_list(specific, "OTEL_EXPORTER_OTLP_TRACES_HEADERS"))
    if headers:
        exp["headers"] = headers
    if timeout := _env_pick(environ, "TIMEOUT"):
        # The specification gives this variable in milliseconds.
        try:
            exp["timeout"] = float(timeout) / 1000.0
        except ValueError as exc:
            raise ConfigError(
                f"OTEL_EXPORTER_OTLP_TIMEOUT: expected milliseconds, got {timeout!r}"
            ) from exc
    if compression := _env_pick(environ, "COMPRESSION"):
        exp["compression"] = compression
    if insecure := _env_pick(environ, "INSECURE"):
        exp["insecure"] = insecure
    tls: dict[str, Any] = {}
    for suffix, key in (
        ("CERTIFICATE", "ca_file"),
        ("CLIENT_CERTIFICATE", "cert_file"),
        ("CLIENT_KEY", "key_file"),
    ):
        if value := _env_pick(environ, suffix):
            tls[key] = value
    if tls:
        exp["tls"] = tls
    if not exp:
        return {}
    try:
        return validate({"exporters": {"otlp": exp}})
    except ConfigError as exc:
        raise ConfigError(f"from OTEL_EXPORTER_OTLP_* variables: {exc}") from exc


# ---------------------------------------------------------------------------------------------
# Building the typed config
# ---------------------------------------------------------------------------------------------


def _get(tree: Mapping[str, Any], dotted: str) -> Any:
    node: Any = tree
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def _server_tls(section: Mapping[str, Any] | None, path: str) -> ServerTls | None:
    if not section:
        return None
    cert, key, ca = section.get("cert_file"), section.get("key_file"), section.get("client_ca_file")
    if cert is None and key is None and ca is None:
        return None
    if cert is None or key is None:
        raise ConfigError(f"{path}: cert_file and key_file must be given together")
    for name, value in (("cert_file", cert), ("key_file", key), ("client_ca_file", ca)):
        if value is not None and not Path(value).is_file():
            raise ConfigError(f"{path}.{name}: file {value} does not exist")
    return ServerTls(Path(cert), Path(key), Path(ca) if ca is not None else None)


def _receiver(tree: Mapping[str, Any], name: str) -> ReceiverConfig:
    base = f"receivers.otlp.protocols.{name}"
    section = _get(tree, base)
    return ReceiverConfig(
        endpoint=section["endpoint"],
        max_request_bytes=section["max_request_size"],
        max_concurrent_requests=section["max_concurrent_requests"],
        tls=_server_tls(section.get("tls"), f"{base}.tls"),
    )


def _split_url(text: str, path: str) -> urllib.parse.SplitResult:
    parts = urllib.parse.urlsplit(text if "://" in text else f"//{text}")
    if not parts.hostname:
        raise ConfigError(f"{path}: cannot read a host from {text!r}")
    return parts


def _exporter(tree: Mapping[str, Any], endpoint_source: str) -> ExporterConfig:
    exp = _get(tree, "exporters.otlp")
    base, traces_url, logs_url = (
        exp.get("endpoint"),
        exp.get("traces_endpoint"),
        exp.get("logs_endpoint"),
    )
    if not base and not traces_url:
        raise ConfigError(
            "no forward endpoint: give --forward URL, exporters.otlp.endpoint in the config file, "
            "or OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT"
        )
    # The one endpoint rule (sdk/endpoint.py): the environment variables are already a layer of
    # ``tree``, so the rule reads no environment here; unknown schemes are refused.
    try:
        protocol = endpoint_rule.resolve(
            str(traces_url or base), exp.get("protocol"), environ={}
        ).protocol
    except endpoint_rule.EndpointError as error:
        raise ConfigError(f"exporters.otlp.endpoint ({endpoint_source}): {error}") from None
    forward_logs = bool(exp.get("forward_logs", True))
    tls = exp.get("tls") or {}
    client_tls = ClientTls(tls.get("ca_file"), tls.get("cert_file"), tls.get("key_file"))
    where = f"exporters.otlp.endpoint ({endpoint_source})"
    if protocol == "grpc":
        parts = _split_url(str(traces_url or base), where)
        if parts.port is None:
            raise ConfigError(f"{where}: a gRPC endpoint needs a port, got {traces_url or base!r}")
        host = f"[{parts.hostname}]" if ":" in (parts.hostname or "") else parts.hostname
        target = f"{host}:{parts.port}"
        if exp.get("insecure") is not None:
            secure = not exp["insecure"]
        else:
            secure = parts.scheme == "https" or client_tls.ca_file is not None
        logs_target = target if forward_logs else None
    else:
        if traces_url:
            traces_target = str(traces_url)
        else:
            b = str(base)
            if "://" not in b:
                b = "http://" + b
            b = b.rstrip("/")
            traces_target = b if b.endswith(TRACES_PATH) else b + TRACES_PATH
        parts = _split_url(traces_target, where)
        if parts.scheme not in ("http", "https"):
            raise ConfigError(
                f"{where}: an OTLP/HTTP endpoint must be an http(s) URL, got {traces_target!r}"
            )
        target = traces_target
        secure = parts.scheme == "https"
        if not forward_logs:
            logs_target = None
        elif logs_url:
            logs_target = str(logs_url)
        elif traces_target.endswith(TRACES_PATH):
            logs_target = traces_target[: -len(TRACES_PATH)] + LOGS_PATH
        else:
            logs_target = None
    retry, queue = exp["retry"], exp["queue"]
    if retry["max_interval"] < retry["initial_interval"]:
        raise ConfigError("exporters.otlp.retry.max_interval must be >= initial_interval")
    if queue["batch_max_size"] > queue["max_size"]:
        raise ConfigError("exporters.otlp.queue.batch_max_size must not exceed max_size")
    return ExporterConfig(
        protocol=protocol,
        traces_target=target,
        logs_target=logs_target,
        secure=secure,
        tls=client_tls,
        headers=tuple(sorted((exp.get("headers") or {}).items())),
        timeout=exp["timeout"],
        compression=exp["compression"],
        retry=RetryConfig(
            retry["initial_interval"], retry["max_interval"], retry["max_elapsed_time"]
        ),
        queue=QueueConfig(
            max_bytes=queue["max_size"],
            segment_bytes=queue["segment_size"],
            batch_max_bytes=queue["batch_max_size"],
            fsync=queue["fsync"],
        ),
        max_request_bytes=exp["max_request_size"],
        dead_letter_max_bytes=exp["dead_letter"]["max_size"],
    )


def _phoenix_annotations(tree: Mapping[str, Any]) -> PhoenixAnnotationsConfig | None:
    section = _get(tree, "exporters.phoenix_annotations") or {}
    endpoint = section.get("endpoint")
    if not endpoint:
        return None
    from otel_footprint.annotate.phoenix import annotations_url

    try:
        annotations_url(endpoint)
    except ValueError as exc:
        raise ConfigError(f"exporters.phoenix_annotations.endpoint: {exc}") from exc
    if section["timeout"] <= 0:
        raise ConfigError("exporters.phoenix_annotations.timeout must be more than 0s")
    return PhoenixAnnotationsConfig(
        endpoint=endpoint,
        project=section.get("project"),
        headers=tuple(sorted((section.get("headers") or {}).items())),
        timeout=section["timeout"],
        max_attempts=section["max_attempts"],
        max_pending=section["max_pending"],
    )


def _check_binds(receivers: ReceiversConfig) -> None:
    """The bind rule: a receiver off loopback needs TLS and a bearer token (or the explicit opt-in).

    A token alone would cross the network in the clear, and TLS alone lets any TLS client send
    spans and read accounts (the query service shares the gRPC port).
    """
    if receivers.allow_insecure_non_loopback:
        return
    for rec, name in ((receivers.grpc, "grpc"), (receivers.http, "http")):
        if rec.endpoint.is_loopback:
            continue
        where = f"receivers.otlp.protocols.{name}.endpoint {rec.endpoint} is not a loopback address"
        if rec.tls is None and receivers.bearer_token is not None:
            raise ConfigError(
                f"{where}: a bearer token over plaintext would cross the network in the clear; "
                f"configure TLS (receivers.otlp.protocols.{name}.tls.cert_file/key_file), or set "
                "receivers.otlp.allow_insecure_non_loopback: true"
            )
        if rec.tls is None or receivers.bearer_token is None:
            raise ConfigError(
                f"{where} and needs both TLS (tls.cert_file/key_file) and a bearer token "
                "(receivers.otlp.auth.bearer_token); configure both, or set "
                "receivers.otlp.allow_insecure_non_loopback: true"
            )


def serves_accounts(receivers: ReceiversConfig) -> bool:
    """Whether the query service (GetRun, StreamVerdicts: accounts with prompt words) may be served.

    On loopback always; off loopback only behind a bearer token, whatever else is configured
    (TLS alone authenticates the server, not the reader).
    """
    return receivers.grpc.endpoint.is_loopback or receivers.bearer_token is not None


def _default_data_dir(environ: Mapping[str, str]) -> Path:
    state = environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "otel-footprint"


def build(
    layers: list[tuple[str, dict[str, Any]]], environ: Mapping[str, str] | None = None
) -> HopConfig:
    """Merge validated layers (lowest precedence first) over the defaults and type them."""
    env = os.environ if environ is None else environ
    tree = validate(DEFAULTS)
    endpoint_source = "default"
    for name, layer in layers:
        exp = _get(layer, "exporters.otlp") or {}
        if exp.get("endpoint") is not None:
            # A higher layer's endpoint replaces every lower layer's per-signal URL.
            tree_exp = tree.setdefault("exporters", {}).setdefault("otlp", {})
            tree_exp.pop("traces_endpoint", None)
            tree_exp.pop("logs_endpoint", None)
            endpoint_source = name
        if exp.get("traces_endpoint") is not None:
            endpoint_source = name
        tree = _merge(tree, layer)

    otlp = tree["receivers"]["otlp"]
    token = (otlp.get("auth") or {}).get("bearer_token")
    token_file = (otlp.get("auth") or {}).get("bearer_token_file")
    if token_file is not None:
        if token is not None:
            raise ConfigError(
                "receivers.otlp.auth: give bearer_token or bearer_token_file, not both"
            )
        try:
            token = Path(token_file).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ConfigError(
                f"receivers.otlp.auth.bearer_token_file: cannot read {token_file}: {exc}"
            ) from exc
        if not token:
            raise ConfigError(f"receivers.otlp.auth.bearer_token_file: {token_file} is empty")
    receivers = ReceiversConfig(
        grpc=_receiver(tree, "grpc"),
        http=_receiver(tree, "http"),
        bearer_token=token,
        allow_insecure_non_loopback=otlp["allow_insecure_non_loopback"],
        grpc_workers=otlp["grpc_workers"],
    )
    _check_binds(receivers)

    svc = tree["service"]
    telemetry = svc["telemetry"]["endpoint"]
    if not telemetry.is_loopback and not svc["telemetry"]["allow_non_loopback"]:
        raise ConfigError(
            f"service.telemetry.endpoint {telemetry} is not a loopback address and health/metrics "
            "have neither TLS nor a token; bind it to loopback (scrape through a sidecar), or set "
            "service.telemetry.allow_non_loopback: true"
        )
    data_dir = Path(svc.get("data_dir") or _default_data_dir(env))
    proc = tree["processing"]
    store = proc["run_store"]
    otlp_metrics_tree = svc["telemetry"]["metrics"]["otlp"]
    otlp_metrics = None
    if otlp_metrics_tree.get("endpoint"):
        otlp_metrics = OtlpMetricsConfig(
            endpoint=otlp_metrics_tree["endpoint"],
            protocol=otlp_metrics_tree.get("protocol") or "grpc",
            interval=otlp_metrics_tree["interval"],
        )
    if store["kind"] == "redis" and not store.get("url"):
        raise ConfigError(
            "processing.run_store.url is required for kind: redis (redis://host:6379/0)"
        )
    if store["kind"] == "redis" and importlib.util.find_spec("redis") is None:
        raise ConfigError(
            "processing.run_store.kind: redis needs redis-py, the optional redis extra: "
            "pip install 'otel-footprint[redis]'"
        )
    if store.get("url") and not str(store["url"]).startswith(("redis://", "rediss://")):
        raise ConfigError(
            f"processing.run_store.url: expected redis:// or rediss://, got {store['url']!r}"
        )
    if proc["max_wait"] < proc["release_grace"]:
        raise ConfigError("processing.max_wait must be at least processing.release_grace")
    return HopConfig(
        receivers=receivers,
        processing=ProcessingConfig(
            annotate=proc["annotate"],
            release_grace=proc["release_grace"],
            max_wait=proc["max_wait"],
            max_runs=proc["max_runs"],
            max_bytes=proc["max_bytes"],
            max_spans_per_run=proc["max_spans_per_run"],
            decision_cache_traces=proc["decision_cache"]["max_traces"],
            decision_cache_spans=proc["decision_cache"]["max_spans"],
            run_store=RunStoreConfig(
                kind=store["kind"],
                path=Path(store.get("path") or data_dir / "runs.sqlite"),
                url=store.get("url"),
                key_prefix=store["key_prefix"],
                ttl=store["ttl"],
            ),
            recent_verdicts=proc["recent_verdicts"],
        ),
        exporter=_exporter(tree, endpoint_source),
        phoenix_annotations=_phoenix_annotations(tree),
        service=ServiceConfig(
            data_dir=data_dir,
            telemetry_endpoint=svc["telemetry"]["endpoint"],
            log_level=svc["telemetry"]["logs"]["level"],
            otlp_metrics=otlp_metrics,
            shutdown_timeout=svc["shutdown_timeout"],
        ),
        sources=tuple(name for name, _ in layers),
    )


def flag_layer(
    *,
    grpc: str | None = None,
    http: str | None = None,
    forward: str | None = None,
    forward_protocol: str | None = None,
    data_dir: str | None = None,
    telemetry: str | None = None,
    sets: list[str] | None = None,
) -> dict[str, Any]:
    """The command-line flags as one validated layer."""
    raw: dict[str, Any] = {}
    for item in sets or []:
        raw = _merge(raw, parse_set_option(item))
    if grpc is not None:
        raw = _merge(raw, {"receivers": {"otlp": {"protocols": {"grpc": {"endpoint": grpc}}}}})
    if http is not None:
        raw = _merge(raw, {"receivers": {"otlp": {"protocols": {"http": {"endpoint": http}}}}})
    if forward is not None:
        raw = _merge(raw, {"exporters": {"otlp": {"endpoint": forward}}})
    if forward_protocol is not None:
        raw = _merge(raw, {"exporters": {"otlp": {"protocol": forward_protocol}}})
    if data_dir is not None:
        raw = _merge(raw, {"service": {"data_dir": data_dir}})
    if telemetry is not None:
        raw = _merge(raw, {"service": {"telemetry": {"endpoint": telemetry}}})
    return validate(raw)


def load(
    config_file: Path | None,
    flags: dict[str, Any],
    environ: Mapping[str, str] | None = None,
) -> HopConfig:
    """Defaults < OTEL_EXPORTER_OTLP_* < config file < flags, validated and typed."""
    env = os.environ if environ is None else environ
    layers: list[tuple[str, dict[str, Any]]] = []
    env_layer = otel_env_layer(env)
    if env_layer:
        layers.append(("OTEL_EXPORTER_OTLP_*", env_layer))
    if config_file is not None:
        layers.append((f"config file {config_file}", load_file(config_file, env)))
    if flags:
        layers.append(("flags", flags))
    return build(layers, env)
