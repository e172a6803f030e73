"""The one endpoint rule for every OTLP sender here: ``demo --endpoint``, ``import --endpoint`` and
``serve --forward``, following the OpenTelemetry OTLP exporter conventions.

- **Protocol**: the explicit choice (``--protocol`` / ``--forward-protocol`` / the config file), else
  ``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL``, else ``OTEL_EXPORTER_OTLP_PROTOCOL``, else ``http/protobuf``
  when the URL's path is the OTLP/HTTP traces path ``/v1/traces`` (nothing else answers there), else
  ``grpc`` — the default the OpenTelemetry Python distro sets for ``opentelemetry-instrument``
  (the specification recommends ``http/protobuf``; Python's exporters keep ``grpc``). Only ``grpc``
  and ``http/protobuf`` are spoken; ``http/json`` and anything else are refused. A port is never
  used to guess.
- **Scheme**: ``http://`` or ``https://`` (``https`` = TLS), or a bare ``host:port``; any other
  scheme (``ftp://``, ``grpc://``) is refused rather than read as gRPC.
- **Path** (http/protobuf): a URL without a path gets ``/v1/traces`` appended, as the exporters do
  with ``OTEL_EXPORTER_OTLP_ENDPOINT``; a URL ending in ``/v1/traces`` is used as is.
- **gRPC target**: ``host:port`` from the URL; a port is required.
"""

from __future__ import annotations

import os
import socket
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

Protocol = Literal["grpc", "http/protobuf"]
PROTOCOLS: Final[tuple[Protocol, ...]] = ("grpc", "http/protobuf")
TRACES_PATH: Final = "/v1/traces"
LOGS_PATH: Final = "/v1/logs"
DEFAULT_PROTOCOL: Final[Protocol] = "grpc"
PROTOCOL_VARIABLES: Final = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")


class EndpointError(ValueError):
    """An endpoint or protocol that cannot be used; the message says why and what would do."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where and how to send: ``target`` is the full traces URL (http/protobuf) or ``host:port``."""

    protocol: Protocol
    target: str
    secure: bool
    url: str
    """The endpoint as given."""

    def describe(self) -> str:
        """``http://127.0.0.1:4317 (grpc 127.0.0.1:4317)``: as given, then how it was read."""
        return f"{self.url} ({self.protocol} {self.target})"


def _parts(url: str) -> urllib.parse.SplitResult:
    if url != url.strip():
        raise EndpointError(f"endpoint {url!r}: spaces around it; give the URL alone")
    try:
        parts = urllib.parse.urlsplit(url if "://" in url else f"//{url}")
    except ValueError as error:  # "Invalid IPv6 URL": an unclosed [
        raise EndpointError(f"endpoint {url!r}: cannot be read as a URL ({error})") from None
    if "://" in url and parts.scheme not in ("http", "https"):
        raise EndpointError(
            f"endpoint {url!r}: unknown scheme {parts.scheme!r}; use http:// or https:// "
            "(https = TLS), or host:port"
        )
    try:
        port = parts.port
    except ValueError:
        raise EndpointError(f"endpoint {url!r}: the port is not a number in range") from None
    if port == 0:
        raise EndpointError(f"endpoint {url!r}: port 0 cannot be sent to; give the receiver's port")
    if not parts.hostname:
        raise EndpointError(f"endpoint {url!r}: no host in it")
    return parts


def pick_protocol(
    url: str, explicit: str | None = None, environ: Mapping[str, str] | None = None
) -> Protocol:
    """The protocol for ``url`` by the rule above (``environ`` defaults to the process's)."""
    env = os.environ if environ is None else environ
    chosen, source = explicit, "the protocol"
    if not chosen:
        for name in PROTOCOL_VARIABLES:
            value = env.get(name, "").strip()
            if value:
                chosen, source = value, name
                break
    if chosen:
        if chosen not in PROTOCOLS:
            raise EndpointError(f"{source} {chosen!r} is not supported; use grpc or http/protobuf")
        return "grpc" if chosen == "grpc" else "http/protobuf"
    path = _parts(url).path.rstrip("/")
    return "http/protobuf" if path.endswith(TRACES_PATH) else DEFAULT_PROTOCOL


def traces_url(url: str) -> str:
    """The OTLP/HTTP traces URL: ``/v1/traces`` appended to a URL that does not end in it."""
    base = url if "://" in url else f"http://{url}"
    parts = _parts(base)
    path = parts.path.rstrip("/")
    if not path.endswith(TRACES_PATH):
        path += TRACES_PATH
    return urllib.parse.urlunsplit(parts._replace(path=path))


def grpc_target(url: str) -> tuple[str, bool]:
    """``host:port`` and whether the scheme asks for TLS, for a gRPC endpoint."""
    parts = _parts(url)
    if parts.port is None:
        raise EndpointError(f"endpoint {url!r}: a gRPC endpoint needs a port (e.g. :4317)")
    host = f"[{parts.hostname}]" if ":" in (parts.hostname or "") else parts.hostname
    return f"{host}:{parts.port}", parts.scheme == "https"


def resolve(
    url: str, protocol: str | None = None, environ: Mapping[str, str] | None = None
) -> Endpoint:
    """The whole rule: protocol, checked scheme, traces URL or gRPC target."""
    chosen = pick_protocol(url, protocol, environ)
    if chosen == "grpc":
        target, secure = grpc_target(url)
        return Endpoint("grpc", target, secure, url)
    target = traces_url(url)
    return Endpoint("http/protobuf", target, target.startswith("https://"), url)


def wrong_protocol_hint(endpoint: Endpoint) -> str:
    """What to try when a send fails: the other protocol, named the way the flags name it."""
    other = "http/protobuf" if endpoint.protocol == "grpc" else "grpc"
    return (
        f"sent {endpoint.protocol} to {endpoint.target}; if the receiver there speaks {other} "
        f"(OTLP/HTTP usually listens on 4318, gRPC on 4317), give --protocol {other} or set "
        "OTEL_EXPORTER_OTLP_PROTOCOL"
    )


CONNECT_TIMEOUT: Final = 3.0
"""Seconds :func:`unreachable` waits for a connection: a host that drops packets answers nothing."""


def address(target: str) -> tuple[str, int]:
    """The host and port behind a target (``host:port`` or an http(s) URL; 80/443 by default)."""
    parts = urllib.parse.urlsplit(target if "://" in target else f"//{target}")
    return parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)


def unreachable(target: str, timeout: float = CONNECT_TIMEOUT) -> str | None:
    """Why nothing can be sent to ``target`` now (one TCP connection), or None when it opens.

    An open port says nothing of the protocol behind it; the exporter's own errors say the rest.
    Asked before sending, so a dead endpoint is one short line within ``timeout``, not the
    exporter's retries and its long gRPC status text."""
    host, port = address(target)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except socket.gaierror as exc:
        return f"cannot resolve {host} ({exc.strerror})"
    except TimeoutError:
        return f"no answer within {timeout:g} s"
    except OSError as exc:
        return str(exc.strerror or exc)
