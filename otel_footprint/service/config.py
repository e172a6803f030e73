"""The hop's configuration: a YAML file (receivers / processing / exporters / service), flags, env.

Precedence, highest first: command-line flags (and ``--set key=value``), the config file, the
standard ``OTEL_EXPORTER_OTLP_*`` variables (forward side only), built-in defaults. Every key, its
type, default, unit, variables and flag are declared once, in ``sdk/settings.py``'s
:class:`~otel_footprint.sdk.settings.HopSettings`; here the layers are read, merged, checked and
resolved into the :class:`HopConfig` the hop reads: the model's own sections, beside the few values
derived from them (the forward targets, the bearer token, the data directory).
An unknown key is an error naming it and the valid keys beside it.
"""

from __future__ import annotations

import importlib.util
import os
import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import yaml

from otel_footprint.sdk import endpoint as endpoint_rule
from otel_footprint.sdk import settings as model
from otel_footprint.sdk.endpoint import PROTOCOLS
from otel_footprint.sdk.endpoint import Protocol as Protocol_
from otel_footprint.sdk.settings import (
    ConfigError,
    HostPort,
    OtlpExporterSettings,
    OtlpReceiverSettings,
    PhoenixAnnotationsSettings,
    ProcessingSettings,
    ServiceSettings,
    TelemetrySettings,
    parse_duration,
    parse_header_list,
    parse_hostport,
    parse_size,
    validate,
)
from otel_footprint.service import tlsfiles
from otel_footprint.service.otlp import LOGS_PATH, TRACES_PATH

__all__ = [
    "PROTOCOLS",
    "ConfigError",
    "HopConfig",
    "HostPort",
    "build",
    "flag_layer",
    "load",
    "parse_duration",
    "parse_header_list",
    "parse_hostport",
    "parse_size",
    "validate",
]


@dataclass(frozen=True, slots=True)
class Forward:
    """``exporters.otlp`` as declared, and where it leads (derived by the endpoint rule)."""

    otlp: OtlpExporterSettings
    protocol: Protocol_
    traces_target: str
    """gRPC: ``host:port``; HTTP: the full ``/v1/traces`` URL."""
    logs_target: str | None
    """None when logs are not forwarded."""
    secure: bool


@dataclass(frozen=True, slots=True)
class HopConfig:
    """The whole, validated configuration of one ``serve`` process: the declared sections, read
    straight off :class:`~otel_footprint.sdk.settings.HopSettings`, and what is derived from them."""

    receivers: OtlpReceiverSettings
    processing: ProcessingSettings
    """As declared, with ``run_store.path`` resolved (``<data_dir>/runs.sqlite`` unless set)."""
    exporter: Forward
    service: ServiceSettings
    data_dir: Path
    """``service.data_dir``, else ``$XDG_STATE_HOME/otel-footprint``."""
    token: str | None
    """The bearer token every request must carry (given, or read from ``bearer_token_file``)."""
    sources: tuple[str, ...] = ()
    """Where settings came from (for the startup log)."""
    phoenix_annotations: PhoenixAnnotationsSettings | None = None
    """Off (None) unless ``exporters.phoenix_annotations.endpoint`` is set."""


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
    except RecursionError:
        raise ConfigError(f"config file {path} is nested too deeply to read") from None
    if raw is None:
        return {}
    try:
        return validate(expand_env(raw, environ))
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    except RecursionError:
        raise ConfigError(f"config file {path} is nested too deeply to read") from None


def _nested(dotted: str, value: Any) -> dict[str, Any]:
    """``a.b.c`` and a value as ``{"a": {"b": {"c": value}}}``."""
    *sections, leaf = dotted.split(".")
    nested: dict[str, Any] = {leaf: value}
    for section in reversed(sections):
        nested = {section: nested}
    return nested


def parse_set_option(item: str) -> dict[str, Any]:
    """``a.b.c=value`` (a ``--set`` flag) as a nested dict; the value is read as YAML."""
    key, sep, value = item.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"--set {item!r}: expected KEY=VALUE, e.g. processing.annotate=false")
    try:
        parsed = yaml.safe_load(value) if value.strip() else ""
    except yaml.YAMLError as exc:
        raise ConfigError(f"--set {item!r}: value is not valid YAML: {exc}") from exc
    except RecursionError:
        raise ConfigError(f"--set {key.strip()}: value nested too deeply to read") from None
    return _nested(key.strip(), parsed)


# ---------------------------------------------------------------------------------------------
# OTEL_EXPORTER_OTLP_* (forward side)
# ---------------------------------------------------------------------------------------------


def otel_env_layer(environ: Mapping[str, str]) -> dict[str, Any]:
    """The exporter settings the standard ``OTEL_EXPORTER_OTLP_*`` variables give (validated).

    Which variables set which key is declared on the model (the first set one wins; headers
    merge, the traces-specific ones last).
    """
    exp: dict[str, Any] = {}
    for key, _, meta in model.leaves(model.OtlpExporterSettings):
        for name in meta["env"]:
            value = environ.get(name, "").strip()
            if not value:
                continue
            if key == "headers":
                exp.setdefault(key, {}).update(parse_header_list(value, name))
                continue
            if key == "protocol" and value == "http/json":
                raise ConfigError(
                    "OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL=http/json is not supported for "
                    "forwarding; use grpc or http/protobuf"
                )
            parsed: Any = value
            if key == "timeout":  # the specification gives this variable in milliseconds
                try:
                    parsed = float(value) / 1000.0
                except ValueError:
                    raise ConfigError(f"{name}: expected milliseconds, got {value!r}") from None
            exp = _merge(exp, _nested(key, parsed))
            break
    if not exp:
        return {}
    try:
        return validate({"exporters": {"otlp": exp}})
    except ConfigError as exc:
        raise ConfigError(f"from OTEL_EXPORTER_OTLP_* variables: {exc}") from exc


# ---------------------------------------------------------------------------------------------
# Building the typed config
# ---------------------------------------------------------------------------------------------


def _split_url(text: str, path: str) -> urllib.parse.SplitResult:
    try:
        parts = urllib.parse.urlsplit(text if "://" in text else f"//{text}")
    except ValueError as error:  # "Invalid IPv6 URL": an unclosed [
        raise ConfigError(f"{path}: {text!r} cannot be read as a URL ({error})") from None
    if not parts.hostname:
        raise ConfigError(f"{path}: cannot read a host from {text!r}")
    return parts


def _exporter(exp: OtlpExporterSettings, endpoint_source: str) -> Forward:
    tls = exp.tls
    _check_tls_files("exporters.otlp.tls", tls.cert_file, tls.key_file, tls.ca_file, "ca_file")
    base, traces_url, logs_url = exp.endpoint, exp.traces_endpoint, exp.logs_endpoint
    if not base and not traces_url:
        raise ConfigError(
            "no forward endpoint: give --forward URL, exporters.otlp.endpoint in the config file, "
            "or OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT"
        )
    url = str(traces_url or base)
    where = f"exporters.otlp.endpoint ({endpoint_source})"
    # The one endpoint rule (sdk/endpoint.py): the environment variables are already a layer of
    # the settings, so the rule reads no environment here; unknown schemes are refused.
    try:
        resolved = endpoint_rule.resolve(url, exp.protocol, environ={})
    except endpoint_rule.EndpointError as error:
        raise ConfigError(f"{where}: {error}") from None
    protocol = resolved.protocol
    if protocol == "grpc":
        target = resolved.target  # host:port (the rule refuses a gRPC endpoint without a port)
        if exp.insecure is not None:
            secure = not exp.insecure
        else:
            secure = resolved.secure or exp.tls.ca_file is not None
        logs_target = target if exp.forward_logs else None
    else:
        if traces_url:
            target = traces_url
        else:
            b = str(base) if "://" in str(base) else f"http://{base}"
            b = b.rstrip("/")
            target = b if b.endswith(TRACES_PATH) else b + TRACES_PATH
        parts = _split_url(target, where)
        if parts.scheme not in ("http", "https"):
            raise ConfigError(
                f"{where}: an OTLP/HTTP endpoint must be an http(s) URL, got {target!r}"
            )
        secure = parts.scheme == "https"
        logs_target = None
        if exp.forward_logs and logs_url:
            logs_target = logs_url
        elif exp.forward_logs and target.endswith(TRACES_PATH):
            logs_target = target[: -len(TRACES_PATH)] + LOGS_PATH
    if exp.timeout <= 0:
        raise ConfigError("exporters.otlp.timeout must be more than 0s")
    if exp.retry.max_interval < exp.retry.initial_interval:
        raise ConfigError("exporters.otlp.retry.max_interval must be >= initial_interval")
    if exp.queue.batch_max_size > exp.queue.max_size:
        raise ConfigError("exporters.otlp.queue.batch_max_size must not exceed max_size")
    return Forward(exp, protocol, target, logs_target, secure)


def _phoenix_annotations(section: PhoenixAnnotationsSettings) -> PhoenixAnnotationsSettings | None:
    if not section.endpoint:
        return None
    from otel_footprint.annotate.phoenix import annotations_url

    try:
        annotations_url(section.endpoint)
    except ValueError as exc:
        raise ConfigError(f"exporters.phoenix_annotations.endpoint: {exc}") from exc
    if section.timeout <= 0:
        raise ConfigError("exporters.phoenix_annotations.timeout must be more than 0s")
    return section


def _check_tls_files(
    path: str, cert: Path | None, key: Path | None, ca: Path | None, ca_leaf: str
) -> None:
    """Each TLS file read now (``service/tlsfiles.py``), not when gRPC binds or connects."""
    if cert is not None and key is None:
        raise ConfigError(f"{path}: cert_file {cert} is given without key_file (its private key)")
    if key is not None and cert is None:
        raise ConfigError(f"{path}: key_file {key} is given without cert_file (its certificate)")
    try:
        if cert is not None and key is not None:
            tlsfiles.check_pair(cert, key, path)
        if ca is not None:
            tlsfiles.check_certificates(ca, f"{path}.{ca_leaf}")
    except tlsfiles.TlsFileError as exc:
        raise ConfigError(str(exc)) from None


def _token(receivers: OtlpReceiverSettings) -> str | None:
    """The bearer token, once the TLS material and the bind rule are checked. A receiver serves
    TLS when ``cert_file`` is set (``key_file`` with it); off loopback it needs TLS and a bearer
    token (or the explicit opt-in).

    A token alone would cross the network in the clear, and TLS alone lets any TLS client send
    spans and read accounts (the query service shares the gRPC port).
    """
    protocols = (("grpc", receivers.protocols.grpc), ("http", receivers.protocols.http))
    for name, rec in protocols:
        path, tls = f"receivers.otlp.protocols.{name}.tls", rec.tls
        cert, key, ca = tls.cert_file, tls.key_file, tls.client_ca_file
        if ca is not None and cert is None and key is None:
            raise ConfigError(
                f"{path}.client_ca_file: clients are asked for certificates inside TLS, and this "
                "receiver serves no TLS: give cert_file and key_file too (the server's certificate "
                "and its key), or leave client_ca_file out"
            )
        _check_tls_files(path, cert, key, ca, "client_ca_file")
    token = _bearer_token(receivers.auth)
    for name, rec in protocols:
        if rec.endpoint.is_loopback or receivers.allow_insecure_non_loopback:
            continue
        where = f"receivers.otlp.protocols.{name}.endpoint {rec.endpoint} is not a loopback address"
        if rec.tls.cert_file is None and token is not None:
            raise ConfigError(
                f"{where}: a bearer token over plaintext would cross the network in the clear; "
                f"configure TLS (receivers.otlp.protocols.{name}.tls.cert_file/key_file), or set "
                "receivers.otlp.allow_insecure_non_loopback: true"
            )
        if rec.tls.cert_file is None or token is None:
            raise ConfigError(
                f"{where} and needs both TLS (tls.cert_file/key_file) and a bearer token "
                "(receivers.otlp.auth.bearer_token); configure both, or set "
                "receivers.otlp.allow_insecure_non_loopback: true"
            )
    return token


def serves_accounts(cfg: HopConfig) -> bool:
    """Whether the query service (GetRun, StreamVerdicts: accounts with prompt words) may be served.

    On loopback always; off loopback only behind a bearer token, whatever else is configured
    (TLS alone authenticates the server, not the reader).
    """
    return cfg.receivers.protocols.grpc.endpoint.is_loopback or cfg.token is not None


def _bearer_token(auth: model.AuthSettings) -> str | None:
    token, token_file = auth.bearer_token, auth.bearer_token_file
    if token_file is None:
        return token
    if token is not None:
        raise ConfigError("receivers.otlp.auth: give bearer_token or bearer_token_file, not both")
    try:
        token = token_file.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ConfigError(
            f"receivers.otlp.auth.bearer_token_file: cannot read {token_file}: "
            f"{exc.strerror or exc}"
        ) from exc
    if not token:
        raise ConfigError(f"receivers.otlp.auth.bearer_token_file: {token_file} is empty")
    return token


def _run_store(store: model.RunStoreSettings, data_dir: Path) -> model.RunStoreSettings:
    if store.kind == "redis" and not store.url:
        raise ConfigError(
            "processing.run_store.url is required for kind: redis (redis://host:6379/0)"
        )
    if store.kind == "redis" and importlib.util.find_spec("redis") is None:
        raise ConfigError(
            "processing.run_store.kind: redis needs redis-py, the optional redis extra: "
            "pip install 'otel-footprint[redis]'"
        )
    if store.url and not store.url.startswith(("redis://", "rediss://")):
        raise ConfigError(
            f"processing.run_store.url: expected redis:// or rediss://, got {store.url!r}"
        )
    return msgspec.structs.replace(store, path=store.path or data_dir / "runs.sqlite")


def _data_dir(svc: ServiceSettings, environ: Mapping[str, str]) -> Path:
    telemetry = svc.telemetry
    if not telemetry.endpoint.is_loopback and not telemetry.allow_non_loopback:
        raise ConfigError(
            f"service.telemetry.endpoint {telemetry.endpoint} is not a loopback address and "
            "health/metrics have neither TLS nor a token; bind it to loopback (scrape through a "
            "sidecar), or set service.telemetry.allow_non_loopback: true"
        )
    _check_refresh(telemetry)
    state = environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return svc.data_dir or Path(state) / "otel-footprint"


def _check_refresh(telemetry: TelemetrySettings) -> None:
    """The run page reloads itself: a period of zero would have it reload without end."""
    refresh = telemetry.run_page.refresh
    if refresh <= 0:
        raise ConfigError(f"service.telemetry.run_page.refresh must be positive, not {refresh}")


def build(
    layers: list[tuple[str, dict[str, Any]]], environ: Mapping[str, str] | None = None
) -> HopConfig:
    """Merge validated layers (lowest precedence first) over the defaults and type them."""
    env = os.environ if environ is None else environ
    tree: dict[str, Any] = {}
    endpoint_source = "default"
    for name, layer in layers:
        exp = (layer.get("exporters") or {}).get("otlp") or {}
        if exp.get("endpoint") is not None:
            # A higher layer's endpoint replaces every lower layer's per-signal URL.
            tree_exp = tree.setdefault("exporters", {}).setdefault("otlp", {})
            tree_exp.pop("traces_endpoint", None)
            tree_exp.pop("logs_endpoint", None)
            endpoint_source = name
        if exp.get("traces_endpoint") is not None:
            endpoint_source = name
        tree = _merge(tree, layer)
    settings = model.settle(tree)

    token = _token(settings.receivers.otlp)
    data_dir = _data_dir(settings.service, env)
    proc = settings.processing
    run_store = _run_store(proc.run_store, data_dir)
    if proc.max_wait < proc.release_grace:
        raise ConfigError("processing.max_wait must be at least processing.release_grace")
    return HopConfig(
        receivers=settings.receivers.otlp,
        processing=msgspec.structs.replace(proc, run_store=run_store),
        exporter=_exporter(settings.exporters.otlp, endpoint_source),
        phoenix_annotations=_phoenix_annotations(settings.exporters.phoenix_annotations),
        service=settings.service,
        data_dir=data_dir,
        token=token,
        sources=tuple(name for name, _ in layers),
    )


def flag_layer(*, sets: list[str] | None = None, **flags: str | None) -> dict[str, Any]:
    """The command-line flags (``grpc=``, ``forward_protocol=``, ...: see
    ``sdk.settings.flags()``) and ``--set`` items as one validated layer; flags win."""
    raw: dict[str, Any] = {}
    for item in sets or []:
        raw = _merge(raw, parse_set_option(item))
    keys = model.flags()
    for name, value in flags.items():
        key = keys.get("--" + name.replace("_", "-"))
        if key is None:
            raise TypeError(f"flag_layer() got an unknown flag {name!r}; flags: {sorted(keys)}")
        if value is not None:
            raw = _merge(raw, _nested(key, value))
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
