# shellcheck shell=bash
# Shared by scripts/otelcol.sh and scripts/jaeger.sh (sourced, not run): build a Go binary from the Go
# module proxy once (cached by a stamp of its sources), start it on free loopback ports, wait for its
# health check, write an env file for the tests, and stop it by the pid it started.
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

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly ROOT

gosvc_init() {
  UPPER=$(printf '%s' "$SVC" | tr '[:lower:]' '[:upper:]')
  STATE=$(realpath -m "${OTEL_FOOTPRINT_STATE_ROOT:-$ROOT}/.$SVC")
  BIN="$STATE/bin/$SVC_BINARY"
  STAMP="$BIN.stamp"
  ENV_FILE="$STATE/env"
  LOG_FILE="$STATE/$SVC.log"
  local timeout_var="${UPPER}_START_TIMEOUT" stop_var="${UPPER}_STOP_TIMEOUT"
  START_TIMEOUT=${!timeout_var:-60}
  STOP_TIMEOUT=${!stop_var:-10}
  GO_CACHE=$(realpath -m "${OTEL_FOOTPRINT_GO_CACHE:-$ROOT/.gocache}")
  if [[ -z "${GO:-}" ]]; then
    GO=$(command -v go || true)
    [[ -n "$GO" ]] || GO=/usr/local/go/bin/go
  fi
  PREFIX="OTEL_FOOTPRINT_${UPPER}"
}

say() { printf '%s: %s\n' "$SVC" "$*" >&2; }
die() {
  say "ERROR: $*"
  exit 1
}
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

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

# Prints N distinct ports free on 127.0.0.1 right now.
free_ports() {
  python3 - "$1" <<'PY'
import socket, sys

socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(*(s.getsockname()[1] for s in socks))
for s in socks:
    s.close()
PY
}

# wait_ready PID URL PORT... : 0 when URL answers 200 and every port accepts a connection, 2 when the
# process died, 3 on timeout.
wait_ready() {
  python3 - "$START_TIMEOUT" "$@" <<'PY'
import os, socket, sys, time, urllib.request

timeout, pid, url, ports = float(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4:]
deadline = time.monotonic() + timeout

def alive() -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False

def healthy() -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status == 200
    except OSError:
        return False

def open_(port: str) -> bool:
    try:
        socket.create_connection(("127.0.0.1", int(port)), timeout=1).close()
        return True
    except OSError:
        return False

while time.monotonic() < deadline:
    if not alive():
        sys.exit(2)
    if healthy() and all(open_(p) for p in ports):
        sys.exit(0)
    time.sleep(0.1)
sys.exit(3)
PY
}

process_gone() {
  local state
  state=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 0
  [[ -z "$state" || "$state" == Z ]]
}

# True when pid runs this script's binary: a pid recorded in the env file could have been reused.
is_ours() {
  [[ -n "${1:-}" ]] && kill -0 "$1" 2>/dev/null || return 1
  [[ "$(readlink "/proc/$1/exe" 2>/dev/null)" == "$BIN"* ]]
}

read_env_var() {
  [[ -f "$ENV_FILE" ]] || return 0
  sed -n "s/^$1=//p" "$ENV_FILE" | tail -n 1
}

kill_and_wait() { # SIGTERM, SIGKILL after STOP_TIMEOUT seconds
  local pid=$1 deadline
  kill -TERM "$pid" 2>/dev/null || return 0
  deadline=$(awk -v n="$(now)" -v t="$STOP_TIMEOUT" 'BEGIN { printf "%.3f", n + t }')
  while ! process_gone "$pid"; do
    if awk -v n="$(now)" -v d="$deadline" 'BEGIN { exit !(n > d) }'; then
      say "pid $pid still alive ${STOP_TIMEOUT} s after SIGTERM: SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      for _ in $(seq 50); do
        process_gone "$pid" && break
        sleep 0.1
      done
      break
    fi
    sleep 0.1
  done
  wait "$pid" 2>/dev/null || true
}

cmd_start() {
  built_ok || die "$BIN is missing or stale: run '$0 build' first"
  # The sourcing script's own preconditions (e.g. a Jaeger to send to), checked in this shell.
  if declare -F svc_check >/dev/null; then svc_check; fi
  local old_pid
  old_pid=$(read_env_var "${PREFIX}_PID")
  if is_ours "$old_pid"; then
    say "already running (pid $old_pid)"
    return 0
  fi
  mkdir -p "$STATE"
  rm -f "$ENV_FILE"
  local t0 attempt pid rc name i ports args
  t0=$(now)
  # Ports are probed, released, then bound by the process: another process may take one in between,
  # so a bind clash is retried with new ports.
  for attempt in 1 2 3; do
    read -r -a ports < <(free_ports "$(wc -w <<<"$SVC_PORTS")")
    i=0
    for name in $SVC_PORTS; do
      export "SVC_PORT_$name=${ports[$i]}"
      i=$((i + 1))
    done
    mapfile -t args < <(svc_launch_args)
    local port_env=()
    for name in $SVC_PORTS; do
      local var="SVC_PORT_$name"
      port_env+=("$var=${!var}")
    done
    # A minimal environment: a stray OTEL_* variable must not reconfigure the test backend.
    env -i PATH="$PATH" HOME="${HOME:-/root}" LANG=C.UTF-8 TMPDIR="${TMPDIR:-/tmp}" "${port_env[@]}" \
      setsid "$BIN" "${args[@]}" </dev/null >"$LOG_FILE" 2>&1 &
    pid=$!
    rc=0
    # shellcheck disable=SC2046
    wait_ready "$pid" "$(svc_health_url)" $(svc_ready_ports) || rc=$?
    ((rc == 0)) && break
    kill_and_wait "$pid"
    if ((rc == 2)) && grep -qiE 'address already in use' "$LOG_FILE" && ((attempt < 3)); then
      say "port clash on attempt $attempt: retrying with new ports"
      continue
    fi
    local why
    why="did not become ready within ${START_TIMEOUT} s ($(svc_health_url))"
    ((rc == 2)) && why="exited before becoming ready"
    say "ERROR: $BIN (pid $pid) $why. Last log lines ($LOG_FILE):"
    if [[ -s "$LOG_FILE" ]]; then tail -n 40 "$LOG_FILE" >&2; else say "(the log is empty)"; fi
    exit 1
  done
  {
    svc_env_lines
    echo "${PREFIX}_BIN=$BIN"
    echo "${PREFIX}_PID=$pid"
    echo "${PREFIX}_LOG=$LOG_FILE"
  } >"$ENV_FILE.tmp"
  mv "$ENV_FILE.tmp" "$ENV_FILE"
  say "ready in $(elapsed "$t0") s, pid $pid (env: $ENV_FILE)"
  sed 's/^/  /' "$ENV_FILE" >&2
}

cmd_stop() {
  set +e # stop must always finish its cleanup, whatever fails on the way
  local pid t0
  pid=$(read_env_var "${PREFIX}_PID")
  if [[ -z "$pid" ]]; then
    say "not running (no $ENV_FILE)"
    return 0
  fi
  t0=$(now)
  if is_ours "$pid"; then
    kill_and_wait "$pid"
    say "stopped pid $pid in $(elapsed "$t0") s"
  else
    say "pid $pid is no longer $BIN: nothing to stop"
  fi
  rm -f "$ENV_FILE"
  return 0
}

cmd_status() {
  local pid
  pid=$(read_env_var "${PREFIX}_PID")
  if is_ours "$pid"; then
    cat "$ENV_FILE"
    say "running (pid $pid)"
    return 0
  fi
  say "not running"
  return 1
}

cmd_env() {
  [[ -f "$ENV_FILE" ]] || die "no $ENV_FILE: run '$0 start' first"
  sed 's/^/export /' "$ENV_FILE"
}

cmd_run() {
  [[ "${1:-}" == "--" ]] && shift
  (($# > 0)) || die "usage: $0 run -- CMD [ARGS...]"
  cmd_start
  trap cmd_stop EXIT
  local rc=0
  (
    set -a
    # shellcheck disable=SC1090
    . "$ENV_FILE"
    set +a
    "$@"
  ) || rc=$?
  return "$rc"
}

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
