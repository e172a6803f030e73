"""The hop's configuration: schema errors, precedence (flags > file > OTEL env), endpoints."""

from __future__ import annotations

from pathlib import Path

import pytest

from otel_footprint.sdk.settings import PhoenixAnnotationsSettings
from otel_footprint.service import config as c

BASE_ENV: dict[str, str] = {"XDG_STATE_HOME": "/tmp/state"}
TLS = Path(__file__).resolve().parent / "data" / "tls"
"""A self-signed certificate and its key (see its README)."""


def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "hop.yaml"
    path.write_text(text)
    return path


def test_an_unknown_key_names_itself_and_the_valid_keys(tmp_path: Path) -> None:
    path = _file(tmp_path, "processing:\n  max_runz: 5\n")
    with pytest.raises(c.ConfigError) as err:
        c.load(path, {}, BASE_ENV)
    text = str(err.value)
    assert "processing.max_runz" in text
    assert "max_runs" in text and "release_grace" in text


@pytest.mark.parametrize(
    ("yaml_text", "fragment"),
    [
        ("processing:\n  release_grace: soon\n", "processing.release_grace"),
        ("processing:\n  max_bytes: -3\n", "processing.max_bytes"),
        ("receivers:\n  otlp:\n    protocols:\n      grpc:\n        endpoint: nope\n", "HOST:PORT"),
        ("exporters:\n  otlp:\n    protocol: carrier-pigeon\n", "grpc, http/protobuf"),
        ("processing: [1, 2]\n", "expected a mapping"),
        ("exporters:\n  otlp:\n    headers:\n      x: ${env:NOPE_NOT_SET}\n", "NOPE_NOT_SET"),
    ],
)
def test_bad_values_are_clear_errors(tmp_path: Path, yaml_text: str, fragment: str) -> None:
    path = _file(tmp_path, yaml_text)
    with pytest.raises(c.ConfigError) as err:
        c.load(path, c.flag_layer(forward="127.0.0.1:9"), BASE_ENV)
    assert fragment in str(err.value)


def test_flags_override_the_file_which_overrides_the_otel_env(tmp_path: Path) -> None:
    env = {
        **BASE_ENV,
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://env-host:4317",
        "OTEL_EXPORTER_OTLP_HEADERS": "a=1,b=2",
        "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "b=3",
        "OTEL_EXPORTER_OTLP_TIMEOUT": "2500",
        "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip",
    }
    cfg = c.load(None, {}, env)
    assert cfg.exporter.traces_target == "env-host:4317"
    assert cfg.exporter.otlp.headers == {"a": "1", "b": "3"}  # traces-specific wins
    assert cfg.exporter.otlp.timeout == 2.5  # the variable is in milliseconds
    assert cfg.exporter.otlp.compression == "gzip"

    path = _file(tmp_path, "exporters:\n  otlp:\n    endpoint: file-host:5317\n    timeout: 1s\n")
    cfg = c.load(path, {}, env)
    assert cfg.exporter.traces_target == "file-host:5317"
    assert cfg.exporter.otlp.timeout == 1.0
    assert cfg.exporter.otlp.compression == "gzip"  # not in the file: the env still applies

    cfg = c.load(path, c.flag_layer(forward="flag-host:6317"), env)
    assert cfg.exporter.traces_target == "flag-host:6317"


def test_a_traces_specific_endpoint_wins_over_the_general_one() -> None:
    env = {
        **BASE_ENV,
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://general:4318",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://specific:4318/custom/traces",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
    }
    cfg = c.load(None, {}, env)
    assert cfg.exporter.protocol == "http/protobuf"
    assert cfg.exporter.traces_target == "http://specific:4318/custom/traces"
    # A flag's endpoint replaces the env's per-signal URLs entirely.
    cfg = c.load(None, c.flag_layer(forward="http://flag:4318"), env)
    assert cfg.exporter.traces_target == "http://flag:4318/v1/traces"
    assert cfg.exporter.logs_target == "http://flag:4318/v1/logs"


def test_http_json_forwarding_is_refused_clearly() -> None:
    with pytest.raises(c.ConfigError, match="http/json"):
        c.load(None, {}, {**BASE_ENV, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"})


def test_no_forward_endpoint_is_an_error() -> None:
    with pytest.raises(c.ConfigError, match="no forward endpoint"):
        c.load(None, {}, BASE_ENV)


def test_non_loopback_needs_tls_and_a_token_or_an_explicit_opt_in(tmp_path: Path) -> None:
    # A real pair: the configuration reads every TLS file (service/tlsfiles.py).
    cert, key = TLS / "server.crt", TLS / "server.key"
    tls = [
        f"receivers.otlp.protocols.grpc.tls.cert_file={cert}",
        f"receivers.otlp.protocols.grpc.tls.key_file={key}",
    ]
    token = ["receivers.otlp.auth.bearer_token=s3cret"]

    def load(*sets: str) -> c.HopConfig:
        flags = c.flag_layer(grpc="0.0.0.0:4317", forward="127.0.0.1:9", sets=list(sets))
        return c.load(None, flags, BASE_ENV)

    with pytest.raises(c.ConfigError, match="not a loopback address"):
        load()
    with pytest.raises(c.ConfigError, match="bearer token over plaintext"):
        load(*token)
    with pytest.raises(c.ConfigError, match="needs both TLS"):
        load(*tls)
    assert c.serves_accounts(load(*tls, *token))
    opted_in = load(*tls, "receivers.otlp.allow_insecure_non_loopback=true")
    # TLS without a token (allowed by the opt-in) never serves accounts off loopback.
    assert not c.serves_accounts(opted_in)
    assert c.serves_accounts(c.load(None, c.flag_layer(forward="127.0.0.1:9"), BASE_ENV))


def test_the_telemetry_endpoint_off_loopback_needs_its_own_opt_in() -> None:
    flags = c.flag_layer(telemetry="0.0.0.0:13133", forward="127.0.0.1:9")
    with pytest.raises(c.ConfigError, match=r"service\.telemetry\.endpoint"):
        c.load(None, flags, BASE_ENV)
    flags = c.flag_layer(
        telemetry="0.0.0.0:13133",
        forward="127.0.0.1:9",
        sets=["service.telemetry.allow_non_loopback=true"],
    )
    assert not c.load(None, flags, BASE_ENV).service.telemetry.endpoint.is_loopback


def test_set_flags_and_units(tmp_path: Path) -> None:
    cfg = c.load(
        None,
        c.flag_layer(
            forward="127.0.0.1:9",
            data_dir=str(tmp_path),
            sets=[
                "processing.annotate=false",
                "processing.release_grace=250ms",
                "processing.max_bytes=2MiB",
            ],
        ),
        BASE_ENV,
    )
    assert cfg.processing.annotate is False
    assert cfg.processing.release_grace == 0.25
    assert cfg.processing.max_bytes == 2 * 1024 * 1024
    assert cfg.data_dir == tmp_path
    assert cfg.processing.run_store.path == tmp_path / "runs.sqlite"
    with pytest.raises(c.ConfigError, match=r"unknown key 'processing\.nope'"):
        c.flag_layer(sets=["processing.nope=1"])


def test_env_references_in_the_file_are_expanded(tmp_path: Path) -> None:
    path = _file(
        tmp_path,
        "receivers:\n  otlp:\n    auth:\n      bearer_token: ${env:HOP_TOKEN}\n"
        "exporters:\n  otlp:\n    endpoint: ${NEXT_HOP:-127.0.0.1:4999}\n",
    )
    cfg = c.load(path, {}, {**BASE_ENV, "HOP_TOKEN": "tok"})
    assert cfg.token == "tok"
    assert cfg.exporter.traces_target == "127.0.0.1:4999"


def test_durations_and_sizes() -> None:
    assert c.parse_duration("1.5s", "x") == 1.5
    assert c.parse_duration("2m", "x") == 120.0
    assert c.parse_duration(3, "x") == 3.0
    assert c.parse_size("4MiB", "x") == 4 << 20
    assert c.parse_size("1gb", "x") == 10**9
    with pytest.raises(c.ConfigError):
        c.parse_duration(True, "x")
    with pytest.raises(c.ConfigError):
        c.parse_size("lots", "x")


# -- the defaults are written once (sdk/settings.py): the classes' own defaults agree --


def test_the_classes_defaults_are_the_configs_defaults(tmp_path: Path) -> None:
    from otel_footprint.service.buffer import BufferLimits
    from otel_footprint.service.hop import buffer_limits
    from otel_footprint.service.journal import Journal

    cfg = c.load(None, c.flag_layer(forward="next-hop:4317"), BASE_ENV)
    proc = cfg.processing
    assert BufferLimits() == BufferLimits(
        release_grace=proc.release_grace,
        max_wait=proc.max_wait,
        max_runs=proc.max_runs,
        max_bytes=proc.max_bytes,
        max_spans_per_run=proc.max_spans_per_run,
        cache_traces=proc.decision_cache.max_traces,
        cache_spans=proc.decision_cache.max_spans,
    )
    # Every limit the settings give reaches the buffer (none left at its default).
    sets = ["release_grace=2s", "max_wait=9s", "max_runs=7", "max_bytes=5MiB"]
    sets += ["max_spans_per_run=11", "decision_cache.max_traces=13"]
    sets += ["decision_cache.max_spans=17", "decision_cache.max_bytes=1MiB"]
    tuned = c.load(
        None,
        c.flag_layer(forward="next-hop:4317", sets=[f"processing.{s}" for s in sets]),
        BASE_ENV,
    )
    assert buffer_limits(tuned.processing) == BufferLimits(
        release_grace=2.0,
        max_wait=9.0,
        max_runs=7,
        max_bytes=5 << 20,
        max_spans_per_run=11,
        cache_traces=13,
        cache_spans=17,
        cache_bytes=1 << 20,
    )
    queue = cfg.exporter.otlp.queue
    journal = Journal(tmp_path / "queue")
    assert (journal.max_bytes, journal.segment_bytes, journal.fsync) == (
        queue.max_size,
        queue.segment_size,
        queue.fsync,
    )
    with_phoenix = c.load(
        None,
        c.flag_layer(
            forward="next-hop:4317", sets=["exporters.phoenix_annotations.endpoint=http://p:6006"]
        ),
        BASE_ENV,
    ).phoenix_annotations
    assert with_phoenix is not None
    assert with_phoenix == PhoenixAnnotationsSettings(endpoint="http://p:6006")
