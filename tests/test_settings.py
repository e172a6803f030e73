"""The one settings model (sdk/settings.py): the docs are generated from it, the documented values
read back as its defaults, and the in-process variables and the hop's layers are read through it."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from otel_footprint.sdk import settings
from otel_footprint.service import config as c

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location(
    "settings_docs", ROOT / "scripts" / "settings_docs.py"
)
assert _spec is not None and _spec.loader is not None
settings_docs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(settings_docs)


@pytest.mark.parametrize(("name", "marker"), sorted(settings_docs.TABLES))
def test_the_docs_tables_are_the_models(name: str, marker: str) -> None:
    text = (ROOT / name).read_text(encoding="utf-8")
    render = settings_docs.TABLES[(name, marker)]
    assert settings_docs.regenerate(text, marker, render()) == text, (
        f"{name}: the settings table is stale; run scripts/settings_docs.py"
    )


def test_a_stale_table_is_caught() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    stale = text.replace("| `FOOTPRINT_MAX_RUNS` | `10000` |", "| `FOOTPRINT_MAX_RUNS` | `1000` |")
    assert stale != text
    body = settings_docs.TABLES[("README.md", "in-process settings")]()
    assert settings_docs.regenerate(stale, "in-process settings", body) == text


def _documented_tree() -> dict[str, Any]:
    text = (ROOT / "docs" / "deploy.md").read_text(encoding="utf-8")
    block = text.split("<!-- hop settings: begin -->\n```yaml\n", 1)[1].split("```", 1)[0]
    loaded: dict[str, Any] = yaml.safe_load(block)
    return loaded


def test_the_documented_values_read_back_as_the_models_defaults() -> None:
    # Through the same validator as a config file: durations and sizes in their written form.
    assert settings.settle(settings.validate(_documented_tree())) == settings.HopSettings()


def test_every_leaf_has_a_doc_and_every_flag_and_variable_is_unique() -> None:
    keys = list(settings.leaves())
    assert all(meta["doc"] for _, _, meta in keys)
    flags = [meta["flag"] for _, _, meta in keys if meta["flag"]]
    assert len(flags) == len(set(flags)) == 6
    envs = [e for _, _, meta in settings.leaves(settings.InProcessSettings) for e in meta["env"]]
    assert len(envs) == len(set(envs))


def test_the_buffer_defaults_are_the_run_holding_cores() -> None:
    from otel_footprint.runs.holding import DEFAULT_LIMITS

    proc, sdk = settings.ProcessingSettings(), settings.InProcessSettings()
    assert (proc.release_grace, proc.max_wait, proc.max_runs, proc.max_bytes) == (
        DEFAULT_LIMITS.release_grace,
        DEFAULT_LIMITS.max_wait,
        DEFAULT_LIMITS.max_runs,
        DEFAULT_LIMITS.max_bytes,
    )
    assert (sdk.grace_seconds, sdk.max_wait_seconds, sdk.max_spans_per_run) == (
        DEFAULT_LIMITS.release_grace,
        DEFAULT_LIMITS.max_wait,
        DEFAULT_LIMITS.max_spans_per_run,
    )


def test_the_models_are_frozen() -> None:
    with pytest.raises(AttributeError):
        settings.HopSettings().processing.max_runs = 1  # type: ignore[misc]


def test_inprocess_variables_are_read_with_their_types() -> None:
    got = settings.inprocess_settings(
        {
            "FOOTPRINT_GRACE_SECONDS": " 0.5 ",
            "FOOTPRINT_MAX_RUNS": "7",
            "FOOTPRINT_WITNESS": "hash",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
        }
    )
    assert (got.grace_seconds, got.max_runs, got.witness, got.protocol) == (
        0.5,
        7,
        "hash",
        "http/protobuf",
    )
    assert settings.inprocess_settings({}) == settings.InProcessSettings()
    with pytest.raises(ValueError, match=r"FOOTPRINT_MAX_RUNS='1.5' is not a valid number"):
        settings.inprocess_settings({"FOOTPRINT_MAX_RUNS": "1.5"})
    with pytest.raises(ValueError, match=r"OTEL_EXPORTER_OTLP_PROTOCOL='http/json': expected grpc"):
        settings.inprocess_settings({"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"})
    # Reading one setting leaves the others alone (setup()'s exporter reads only the protocol).
    only = settings.inprocess_settings(
        {"FOOTPRINT_WITNESS": "blur", "FOOTPRINT_MAX_RUNS": "3"}, "max_runs"
    )
    assert (only.max_runs, only.witness) == (3, "keep")


def test_each_flag_sets_the_key_the_model_names() -> None:
    values = {
        "grpc": "[::1]:0",
        "http": "127.0.0.1:0",
        "forward": "http://next:4318",
        "forward_protocol": "http/protobuf",
        "data_dir": "/tmp/x",
        "telemetry": "127.0.0.1:0",
    }
    layer = c.flag_layer(**values)
    for flag, key in settings.flags().items():
        node: Any = layer
        for part in key.split("."):
            node = node[part]
        assert str(node) == values[flag[2:].replace("-", "_")]
    with pytest.raises(c.ConfigError, match="HOST:PORT"):
        c.flag_layer(grpc="nope")
    with pytest.raises(TypeError, match="unknown flag 'grcp'"):
        c.flag_layer(grcp="127.0.0.1:0")


def test_the_sdk_path_does_not_import_yaml_or_the_hop() -> None:
    code = (
        "import sys, otel_footprint.sdk.exporter; "
        "print(sorted(m for m in sys.modules if m in ('yaml', 'pydantic') "
        "or m.startswith('otel_footprint.service')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
