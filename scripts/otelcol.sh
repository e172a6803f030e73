#!/usr/bin/env bash
# The OpenTelemetry Collector for the end-to-end suite: build a Collector distribution from the Go
# module proxy (scripts/otelcol/: the OCB manifest and the Go sources generated from it, all modules
# pinned at one release), start the backend Collector of collector-config/jaeger/ in front of the
# running Jaeger on free loopback ports, write an env file for the tests, stop it by its pid.
#
# Usage: scripts/otelcol.sh build | start | stop | status | env (several in order: build start) | run -- CMD | generate
#   build     go build scripts/otelcol into .otelcol/bin/otelcol-footprint (skipped when the binary
#             was built from the same sources with the same Go)
#   start     collector-config/jaeger/backend-collector.yaml with its endpoints filled in: OTLP gRPC +
#             HTTP in on loopback, out to Jaeger (OTEL_FOOTPRINT_JAEGER_OTLP_GRPC, else .jaeger/env),
#             health_check added; waits for the health check and the ports; writes .otelcol/env
#   stop      SIGTERM the started pid, SIGKILL after OTELCOL_STOP_TIMEOUT (10 s); always exits 0
#   status    print the env file and whether the pid is alive (exit 1 when not running)
#   env       print `export` lines: eval "$(scripts/otelcol.sh env)"
#   run       start, run CMD with the env exported, stop (even on failure); exits with CMD's status
#   generate  regenerate scripts/otelcol/*.go, go.mod, go.sum from builder-config.yaml with the
#             OpenTelemetry Collector Builder (OCB) at the manifest's release (maintainers only)
#
# The env file: OTEL_FOOTPRINT_OTELCOL_BIN (the binary: the tests run `validate` and their own edge
# Collectors with it), _GRPC (host:port), _HTTP (URL), _HEALTH (URL), _CONFIG, _PID, _LOG.
# Settings (environment): OTEL_FOOTPRINT_GO_CACHE, GO, OTELCOL_START_TIMEOUT (60), OTELCOL_STOP_TIMEOUT.
set -euo pipefail

readonly OCB_VERSION=v0.161.0 # the builder of the manifest's core release
SVC=otelcol
SVC_MODULE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/otelcol"
SVC_PACKAGE=.
SVC_BINARY=otelcol-footprint
SVC_PORTS="GRPC HTTP HEALTH"

# shellcheck source=scripts/gosvc.sh
. "$(dirname "${BASH_SOURCE[0]}")/gosvc.sh"

readonly BACKEND_CONFIG="$ROOT/collector-config/jaeger/backend-collector.yaml"

jaeger_otlp() {
  local endpoint=${OTEL_FOOTPRINT_JAEGER_OTLP_GRPC:-}
  local env_file="${OTEL_FOOTPRINT_STATE_ROOT:-$ROOT}/.jaeger/env"
  if [[ -z "$endpoint" && -f "$env_file" ]]; then
    endpoint=$(sed -n 's/^OTEL_FOOTPRINT_JAEGER_OTLP_GRPC=//p' "$env_file" | tail -n 1)
  fi
  [[ -n "$endpoint" ]] || die "no Jaeger to send to: run 'scripts/jaeger.sh start' first, or set OTEL_FOOTPRINT_JAEGER_OTLP_GRPC=host:port"
  echo "$endpoint"
}

svc_check() { jaeger_otlp >/dev/null; }
svc_launch_args() {
  local jaeger
  jaeger=$(jaeger_otlp)
  printf '%s\n' \
    --config "$BACKEND_CONFIG" \
    --set "receivers::otlp::protocols::grpc::endpoint=127.0.0.1:$SVC_PORT_GRPC" \
    --set "receivers::otlp::protocols::http::endpoint=127.0.0.1:$SVC_PORT_HTTP" \
    --set "exporters::otlp_grpc/jaeger::endpoint=$jaeger" \
    --set "extensions::health_check::endpoint=127.0.0.1:$SVC_PORT_HEALTH" \
    --set "service::extensions=[health_check]" \
    --set "service::telemetry::metrics::level=none"
}
svc_health_url() { echo "http://127.0.0.1:$SVC_PORT_HEALTH/"; }
svc_ready_ports() { echo "$SVC_PORT_GRPC $SVC_PORT_HTTP"; }
svc_env_lines() {
  echo "OTEL_FOOTPRINT_OTELCOL_GRPC=127.0.0.1:$SVC_PORT_GRPC"
  echo "OTEL_FOOTPRINT_OTELCOL_HTTP=http://127.0.0.1:$SVC_PORT_HTTP"
  echo "OTEL_FOOTPRINT_OTELCOL_HEALTH=http://127.0.0.1:$SVC_PORT_HEALTH/"
  echo "OTEL_FOOTPRINT_OTELCOL_CONFIG=$BACKEND_CONFIG"
  echo "OTEL_FOOTPRINT_OTELCOL_JAEGER=$(jaeger_otlp)"
}

cmd_generate() {
  local ocb="$GO_CACHE/ocb-$OCB_VERSION/builder"
  if [[ ! -x "$ocb" ]]; then
    go_env GOFLAGS= GOBIN="$(dirname "$ocb")" "$GO" install "go.opentelemetry.io/collector/cmd/builder@$OCB_VERSION" ||
      die "could not install the Collector Builder $OCB_VERSION"
  fi
  (cd "$SVC_MODULE" && go_env GOFLAGS= "$ocb" --config builder-config.yaml --skip-compilation \
    --skip-strict-versioning=false) || die "ocb failed"
  rm -f "$SVC_MODULE/main_windows.go"
  say "regenerated $SVC_MODULE; run '$0 build'"
}

svc_other_command() {
  case "$1" in
  generate) cmd_generate ;;
  help | -h | --help) sed -n '2,25p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' ;;
  *) die "unknown command '$1' (build | start | stop | status | env | run -- CMD | generate)" ;;
  esac
}

gosvc_main "$@"
