#!/usr/bin/env bash
# Jaeger v2 for the end-to-end suite: build the `jaeger` binary from the Go module proxy (pinned as a
# tool in scripts/jaeger/go.mod), start it with in-memory storage on free loopback ports, write an env
# file for the tests, and stop it by the pid it started. This build serves the APIs only, not the UI:
# the UI's web assets come with Jaeger's release (binary or image `jaegertracing/jaeger`), not with the
# Go module, so its page is Jaeger's placeholder (log: "ui assets not embedded in the binary").
#
# Usage: scripts/jaeger.sh build | start | stop | status | env (several in order: build start) | run -- CMD
#   build   go build github.com/jaegertracing/jaeger/cmd/jaeger into .jaeger/bin/ (skipped when the
#           binary was built from the same go.mod/go.sum with the same Go)
#   start   start it with scripts/jaeger/config.yaml, wait for its health check, the OTLP ports and the
#           query API; write .jaeger/env
#   stop    SIGTERM the started pid, SIGKILL after JAEGER_STOP_TIMEOUT (10 s); always exits 0
#   status  print the env file and whether the pid is alive (exit 1 when not running)
#   env     print `export` lines: eval "$(scripts/jaeger.sh env)"
#   run     start, run CMD with the env exported, stop (even on failure); exits with CMD's status
#
# The env file: OTEL_FOOTPRINT_JAEGER_URL (HTTP query API /api/...; no UI), _QUERY_GRPC (api_v2/api_v3
# gRPC), _OTLP_GRPC (host:port), _OTLP_HTTP (URL), _BIN, _PID, _LOG.
# Settings (environment): OTEL_FOOTPRINT_GO_CACHE, GO, JAEGER_START_TIMEOUT (60), JAEGER_STOP_TIMEOUT.
set -euo pipefail

readonly JAEGER_VERSION=v1.76.0 # as pinned in scripts/jaeger/go.mod (tool directive)
SVC=jaeger
SVC_MODULE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/jaeger"
SVC_PACKAGE=github.com/jaegertracing/jaeger/cmd/jaeger
SVC_BINARY=jaeger
SVC_VERSION_ARG=version # jaeger has a version command, not a --version flag
SVC_PORTS="OTLP_GRPC OTLP_HTTP QUERY_HTTP QUERY_GRPC HEALTH"

# shellcheck source=scripts/gosvc.sh
. "$(dirname "${BASH_SOURCE[0]}")/gosvc.sh"

svc_launch_args() { printf '%s\n' --config "$SVC_MODULE/config.yaml"; }
svc_health_url() { echo "http://127.0.0.1:$SVC_PORT_HEALTH/status"; }
svc_ready_ports() { echo "$SVC_PORT_OTLP_GRPC $SVC_PORT_OTLP_HTTP $SVC_PORT_QUERY_HTTP $SVC_PORT_QUERY_GRPC"; }
svc_env_lines() {
  echo "OTEL_FOOTPRINT_JAEGER_URL=http://127.0.0.1:$SVC_PORT_QUERY_HTTP"
  echo "OTEL_FOOTPRINT_JAEGER_QUERY_GRPC=127.0.0.1:$SVC_PORT_QUERY_GRPC"
  echo "OTEL_FOOTPRINT_JAEGER_OTLP_GRPC=127.0.0.1:$SVC_PORT_OTLP_GRPC"
  echo "OTEL_FOOTPRINT_JAEGER_OTLP_HTTP=http://127.0.0.1:$SVC_PORT_OTLP_HTTP"
  echo "OTEL_FOOTPRINT_JAEGER_VERSION=$JAEGER_VERSION"
}
svc_other_command() {
  case "$1" in
  help | -h | --help) sed -n '2,21p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' ;;
  *) die "unknown command '$1' (build | start | stop | status | env | run -- CMD)" ;;
  esac
}

gosvc_main "$@"
