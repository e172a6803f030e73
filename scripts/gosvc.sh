# shellcheck shell=bash
# Shared by scripts/otelcol.sh and scripts/jaeger.sh (sourced, not run): build a Go binary from the Go
# module proxy once (cached by a stamp of its sources), start it on free loopback ports, wait for its
# health check, write an env file for the tests, and stop it by the pid it started. The lifecycle
# (start, stop, status, env, run) is scripts/svc.sh; this file adds the build and the hooks svc.sh asks for.
#
# The sourcing script sets, before calling gosvc_main "$@":
#   SVC            short name (log prefix, state dir .SVC/, env prefix OTEL_FOOTPRINT_<SVC>_)
#   SVC_MODULE     the Go module folder (go.mod + go.sum, committed)
#   SVC_PACKAGE    the package `go build` builds inside it (. or an import path)
#   SVC_BINARY     the binary's file name under .SVC/bin/
#   SVC_VERSION_ARG  the binary's argument that prints its version (default --version)
#   SVC_PORTS      names of the ports to pick (e.g. "GRPC HTTP HEALTH"); each one is exported to the
#                  process as SVC_PORT_<NAME> and written to the env file
# and defines:
#   svc_launch_args   prints the binary's arguments, one per line (may read $SVC_PORT_<NAME>)
#   svc_health_url    prints the URL that answers 200 once the process is ready
#   svc_env_lines     prints the KEY=VALUE lines of the env file besides PID, LOG, BIN
#   svc_ready_ports   prints the ports that must accept a connection before "ready"
# and may define svc_check (preconditions of start; dies with the reason).
#
# Settings (environment): OTEL_FOOTPRINT_GO_CACHE (GOMODCACHE and GOCACHE, default .gocache/ in the
# checkout), GO (default: go on PATH, else /usr/local/go/bin/go), <SVC>_START_TIMEOUT (s, default 60),
# <SVC>_STOP_TIMEOUT (s, default 10), NICE (build niceness, default 10).
set -euo pipefail

# shellcheck source=scripts/svc.sh
. "$(dirname "${BASH_SOURCE[0]}")/svc.sh"

gosvc_init() {
  STATE=$(realpath -m "${OTEL_FOOTPRINT_STATE_ROOT:-$ROOT}/.$SVC")
  BIN="$STATE/bin/$SVC_BINARY"
  STAMP="$BIN.stamp"
  SVC_WHAT=$BIN
  svc_init
  GO_CACHE=$(realpath -m "${OTEL_FOOTPRINT_GO_CACHE:-$ROOT/.gocache}")
  if [[ -z "${GO:-}" ]]; then
    GO=$(command -v go || true)
    [[ -n "$GO" ]] || GO=/usr/local/go/bin/go
  fi
}

# The Go environment of every build: caches in the checkout (ignored by git), modules only from the
# configured proxy, the toolchain on this machine (never a downloaded one), go.mod/go.sum as committed.
go_env() {
  env GOMODCACHE="$GO_CACHE/mod" GOCACHE="$GO_CACHE/build" GOTOOLCHAIN=local \
    GOFLAGS="-mod=readonly -buildvcs=false" "$@"
}

# What decides whether the cached binary is right: the Go version and every file of the module.
source_stamp() {
  {
    "$GO" version
    (cd "$SVC_MODULE" && find . -maxdepth 1 -type f \( -name '*.go' -o -name 'go.mod' -o -name 'go.sum' \) \
      -print0 | sort -z | xargs -0 sha256sum)
    echo "package $SVC_PACKAGE"
  } | sha256sum | cut -d' ' -f1
}

built_ok() {
  [[ -x "$BIN" && -f "$STAMP" ]] || return 1
  [[ "$(cat "$STAMP")" == "$(source_stamp)" ]] || return 1
  "$BIN" "${SVC_VERSION_ARG:---version}" >/dev/null 2>&1
}

cmd_build() {
  [[ -x "$GO" ]] || command -v "$GO" >/dev/null 2>&1 || die "no Go toolchain ($GO): install Go 1.26+"
  if built_ok; then
    say "$BIN is up to date (skipped): $("$BIN" "${SVC_VERSION_ARG:---version}" 2>/dev/null | head -n 1)"
    return 0
  fi
  local t0
  t0=$(now)
  mkdir -p "$(dirname "$BIN")" "$GO_CACHE"
  say "building $SVC_PACKAGE in $SVC_MODULE ($("$GO" version | cut -d' ' -f3), cache $GO_CACHE) ..."
  # Low priority: the machine is shared, and the compile is CPU-bound for minutes.
  # One "go: downloading" line per module (hundreds on a cold cache) would bury real errors in CI logs.
  (cd "$SVC_MODULE" && go_env nice -n "${NICE:-10}" "$GO" build -trimpath -o "$BIN.tmp" "$SVC_PACKAGE") \
    2> >(grep -v '^go: downloading ' >&2) ||
    die "go build of $SVC_PACKAGE failed in $SVC_MODULE"
  mv "$BIN.tmp" "$BIN"
  source_stamp >"$STAMP"
  say "built $BIN in $(elapsed "$t0") s: $("$BIN" "${SVC_VERSION_ARG:---version}" 2>/dev/null | head -n 1)"
}

# The hooks of svc.sh, from the sourcing script's svc_launch_args, svc_env_lines and svc_check.
svc_can_start() {
  built_ok || die "$BIN is missing or stale: run '$0 build' first"
  # The sourcing script's own preconditions (e.g. a Jaeger to send to), checked in this shell.
  if declare -F svc_check >/dev/null; then svc_check; fi
}

svc_launch() {
  local args name port_env=()
  mapfile -t args < <(svc_launch_args)
  for name in $SVC_PORTS; do
    local var="SVC_PORT_$name"
    port_env+=("$var=${!var}")
  done
  # A minimal environment: a stray OTEL_* variable must not reconfigure the test backend.
  env -i PATH="$PATH" HOME="${HOME:-/root}" LANG=C.UTF-8 TMPDIR="${TMPDIR:-/tmp}" "${port_env[@]}" \
    setsid "$BIN" "${args[@]}" </dev/null >"$LOG_FILE" 2>&1 &
}

svc_env_file() {
  svc_env_lines
  echo "${PREFIX}_BIN=$BIN"
}

# True when pid runs this script's binary.
svc_owns() { [[ "$(readlink "/proc/$1/exe" 2>/dev/null)" == "$BIN"* ]]; }

gosvc_main() {
  gosvc_init
  local cmd=${1:-help}
  (($# > 0)) && shift
  case "$cmd" in
  run) cmd_run "$@" ;;
  build | start | stop | status | env)
    # Several simple commands run in order: `build start`.
    for cmd in "$cmd" "$@"; do
      case "$cmd" in
      build) cmd_build ;;
      start) cmd_start ;;
      stop) cmd_stop ;;
      status) cmd_status ;;
      env) cmd_env ;;
      *) die "'$cmd' cannot follow another command (build | start | stop | status | env)" ;;
      esac
    done
    ;;
  *) svc_other_command "$cmd" "$@" ;;
  esac
}
