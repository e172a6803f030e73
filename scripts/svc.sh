# shellcheck shell=bash
# The service lifecycle shared by scripts/phoenix.sh and scripts/gosvc.sh (sourced, not run): start a
# process on free ports (retried on a port clash), wait for its health check, write an env file for the
# tests, and stop, report, export or wrap it by the pid it started. Only the service's own parts differ;
# the sourcing script supplies them.
#
# The sourcing script sets, before calling svc_init:
#   SVC          short name (log prefix, env prefix OTEL_FOOTPRINT_<SVC>_, log file STATE/SVC.log)
#   STATE        the state folder (env file, log)
#   SVC_PORTS    names of the ports to pick (e.g. "HTTP GRPC"); each is exported as SVC_PORT_<NAME>
#   SVC_WHAT     what the process is called in messages (e.g. "phoenix serve", the binary's path)
# and may set SVC_PYTHON (the python probing ports and health, default python3), SVC_PROBE_HOST (where
# free ports are probed, default 127.0.0.1) and SVC_START_TIMEOUT_DEFAULT (s, default 60).
# It defines:
#   svc_can_start     dies with the reason when the service cannot start (not installed, not built, ...)
#   svc_launch        starts the process in the background of this shell (its pid is then $!)
#   svc_health_url    prints the URL that answers 200 once the process is ready
#   svc_ready_ports   prints the ports that must accept a connection before "ready"
#   svc_env_file      prints the KEY=VALUE lines of the env file besides PID and LOG
#   svc_owns PID      true when the live PID is the process this harness starts (pids are reused)
# and may define svc_forget (removes what a failed attempt or a stopped instance leaves behind).
#
# Settings (environment): <SVC>_START_TIMEOUT (s), <SVC>_STOP_TIMEOUT (s, default 10).

# The checkout, for the sourcing scripts.
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck disable=SC2034
readonly ROOT

# shellcheck disable=SC2153 # SVC and STATE are set by the sourcing script
svc_init() {
  UPPER=$(printf '%s' "$SVC" | tr '[:lower:]' '[:upper:]')
  PREFIX="OTEL_FOOTPRINT_${UPPER}"
  ENV_FILE="$STATE/env"
  LOG_FILE="$STATE/$SVC.log"
  local timeout_var="${UPPER}_START_TIMEOUT" stop_var="${UPPER}_STOP_TIMEOUT"
  START_TIMEOUT=${!timeout_var:-${SVC_START_TIMEOUT_DEFAULT:-60}}
  STOP_TIMEOUT=${!stop_var:-10}
}

say() { printf '%s: %s\n' "$SVC" "$*" >&2; }
die() {
  say "ERROR: $*"
  exit 1
}
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# Prints N distinct ports free on SVC_PROBE_HOST right now (0.0.0.0 for a service that binds some
# listener on all interfaces whatever it is told, as Phoenix does with gRPC).
free_ports() {
  "${SVC_PYTHON:-python3}" - "$1" "${SVC_PROBE_HOST:-127.0.0.1}" <<'PY'
import socket, sys

socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((sys.argv[2], 0))
    socks.append(s)
print(*(s.getsockname()[1] for s in socks))
for s in socks:
    s.close()
PY
}

# wait_ready PID URL PORT... : 0 when URL answers 200 and every port accepts a connection, 2 when the
# process died, 3 on timeout.
wait_ready() {
  "${SVC_PYTHON:-python3}" - "$START_TIMEOUT" "$@" <<'PY'
import socket, sys, time, urllib.request

timeout, pid, url, ports = float(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4:]
deadline = time.monotonic() + timeout

def alive() -> bool:
    # A zombie (exited, not yet reaped by the launching shell) still has a /proc entry.
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

# True when pid no longer runs: absent, or a zombie waiting to be reaped by its parent.
process_gone() {
  local state
  state=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 0
  [[ -z "$state" || "$state" == Z ]]
}

# True when pid runs and is the process this harness started: a pid in the env file could be reused.
is_ours() {
  [[ -n "${1:-}" ]] && kill -0 "$1" 2>/dev/null || return 1
  svc_owns "$1"
}

read_env_var() { # read_env_var NAME -> value from the env file (empty when absent)
  [[ -f "$ENV_FILE" ]] || return 0
  sed -n "s/^$1=//p" "$ENV_FILE" | tail -n 1
}

kill_and_wait() { # kill_and_wait PID: SIGTERM, then SIGKILL after STOP_TIMEOUT seconds
  local pid=$1 deadline
  kill -TERM "$pid" 2>/dev/null || return 0
  deadline=$(awk -v n="$(now)" -v t="$STOP_TIMEOUT" 'BEGIN { printf "%.3f", n + t }')
  while ! process_gone "$pid"; do
    if awk -v n="$(now)" -v d="$deadline" 'BEGIN { exit !(n > d) }'; then
      say "pid $pid still alive ${STOP_TIMEOUT} s after SIGTERM: SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      # SIGKILL cannot be caught; give the kernel (and the reaper) a bounded moment to finish it.
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

svc_forget_if_defined() { if declare -F svc_forget >/dev/null; then svc_forget; fi; }

cmd_start() {
  svc_can_start
  local old_pid
  old_pid=$(read_env_var "${PREFIX}_PID")
  if is_ours "$old_pid"; then
    say "already running (pid $old_pid)"
    return 0
  fi
  mkdir -p "$STATE"
  rm -f "$ENV_FILE"
  local t0 attempt pid rc name i ports described
  t0=$(now)
  # Ports are probed, released, then bound by the process: another process may take one in between,
  # so a bind clash is retried with new ports (for Phoenix's HTTP port it only shows after ~10 s).
  for attempt in 1 2 3; do
    read -r -a ports < <(free_ports "$(wc -w <<<"$SVC_PORTS")")
    i=0
    described=""
    for name in $SVC_PORTS; do
      export "SVC_PORT_$name=${ports[$i]}"
      described+="${described:+, }$(printf '%s' "$name" | tr '[:upper:]' '[:lower:]') ${ports[$i]}"
      i=$((i + 1))
    done
    svc_launch
    pid=$!
    rc=0
    # shellcheck disable=SC2046
    wait_ready "$pid" "$(svc_health_url)" $(svc_ready_ports) || rc=$?
    ((rc == 0)) && break
    kill_and_wait "$pid"
    svc_forget_if_defined
    if ((rc == 2)) && grep -qiE 'address already in use|errno 98' "$LOG_FILE" && ((attempt < 3)); then
      say "port clash on attempt $attempt ($described): retrying with new ports"
      continue
    fi
    local why
    why="did not become ready within ${START_TIMEOUT} s ($(svc_health_url) 200, ports $(svc_ready_ports))"
    ((rc == 2)) && why="exited before becoming ready"
    say "ERROR: $SVC_WHAT (pid $pid) $why. Last log lines ($LOG_FILE):"
    if [[ -s "$LOG_FILE" ]]; then tail -n 40 "$LOG_FILE" >&2; else say "(the log is empty)"; fi
    exit 1
  done
  {
    svc_env_file
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
    say "pid $pid is no longer a running $SVC_WHAT: nothing to stop"
  fi
  svc_forget_if_defined
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
