"""Fixtures for the end-to-end suite: the Phoenix backend started by ``scripts/phoenix.sh`` (found
through ``OTEL_FOOTPRINT_PHOENIX_URL``), a unique Phoenix project per test, and the Node.js client."""

from __future__ import annotations

import os
import re
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_openai import FakeOpenAI

from .otel_stack import (
    JAEGER_URL_ENV,
    OTELCOL_BIN_ENV,
    OTELCOL_GRPC_ENV,
    JaegerClient,
    env_or_skip,
)
from .phoenix_api import PhoenixClient

PHOENIX_URL_ENV = "OTEL_FOOTPRINT_PHOENIX_URL"
PHOENIX_GRPC_ENV = "OTEL_FOOTPRINT_PHOENIX_GRPC"

NODE_PROJECT = Path(__file__).resolve().parents[1] / "node"
"""tests/node: the Node.js client (package.json, agent.mjs, node_modules after npm ci)."""


@pytest.fixture(scope="session")
def phoenix() -> PhoenixClient:
    """The running Phoenix; skips when none is configured, fails when one is configured but down."""
    url = os.environ.get(PHOENIX_URL_ENV)
    if not url:
        pytest.skip(
            f"{PHOENIX_URL_ENV} is not set: start Phoenix with `scripts/phoenix.sh start` and "
            "export .phoenix/env (see docs/e2e.md)"
        )
    client = PhoenixClient(url, os.environ.get(PHOENIX_GRPC_ENV) or None)
    if not client.healthy():
        pytest.fail(f"{PHOENIX_URL_ENV}={url} is set but {url}/healthz does not answer 200")
    return client


@pytest.fixture
def project_name(request: pytest.FixtureRequest) -> str:
    """A Phoenix project name unique to this test (resource ``openinference.project.name``).

    Unique names keep tests independent inside one long-lived Phoenix and make every server-side
    query scoped: nothing another test (or a stray client) sent can match.
    """
    slug = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:48]
    return f"e2e-{slug}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="session")
def node_agent() -> Path:
    """Path of tests/node/agent.mjs; skips when node or the npm packages are missing."""
    if shutil.which("node") is None:
        pytest.skip("node is not on PATH (Node.js 20+ runs the second-language client)")
    if not (NODE_PROJECT / "node_modules" / "@opentelemetry" / "sdk-trace-base").is_dir():
        pytest.skip("tests/node/node_modules is missing: run scripts/node-install.sh")
    return NODE_PROJECT / "agent.mjs"


# --- the Collector and Jaeger built from the Go module proxy (scripts/otelcol.sh, scripts/jaeger.sh)


@pytest.fixture(scope="session")
def jaeger() -> JaegerClient:
    """The running Jaeger (``scripts/jaeger.sh start``); skips when none is configured, fails when
    one is configured but its query API does not answer."""
    url = env_or_skip(JAEGER_URL_ENV, "build and start Jaeger with `scripts/jaeger.sh build start`")
    client = JaegerClient(url)
    if not client.healthy():
        pytest.fail(f"{JAEGER_URL_ENV}={url} is set but {url}/api/services does not answer 200")
    return client


@pytest.fixture(scope="session")
def otelcol_bin() -> str:
    """The Collector binary built by ``scripts/otelcol.sh build``; skips when not configured."""
    binary = env_or_skip(
        OTELCOL_BIN_ENV, "build and start the Collector with `scripts/otelcol.sh build start`"
    )
    if not os.access(binary, os.X_OK):
        pytest.fail(f"{OTELCOL_BIN_ENV}={binary} is not an executable file")
    return binary


@pytest.fixture(scope="session")
def backend_collector(otelcol_bin: str, jaeger: JaegerClient) -> str:
    """``host:port`` (OTLP/gRPC) of the backend Collector ``scripts/otelcol.sh start`` runs in front
    of Jaeger (collector-config/jaeger/backend-collector.yaml with its endpoints filled in)."""
    return env_or_skip(
        OTELCOL_GRPC_ENV, "start the backend Collector with `scripts/otelcol.sh start`"
    )


@pytest.fixture(scope="module")
def openai_agent() -> Path:
    """tests/node/openai_agent.mjs; skips when the npm packages (or the built package) are missing."""
    from .node_agents import require_node_packages  # it imports this module's constants

    return require_node_packages()


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    """The loopback fake OpenAI server the Node and Python agents of a module share."""
    with FakeOpenAI() as running:
        yield running
