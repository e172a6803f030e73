#!/usr/bin/env bash
# Installs and builds the JavaScript recorder (js/otel-footprint: `npm ci` + `npm run build`), Grafana's
# TraceQL grammar for the query tests (tests/node/traceql, `npm ci`), then the Node.js clients' pinned
# packages (tests/node, `npm ci` from package-lock.json; it links the built recorder). Idempotent: each `npm ci` is skipped when node_modules already matches its lock file. Without node/npm it says so
# and exits 0 (the Node.js tests then skip); NODE_INSTALL_REQUIRED=1 makes that an error instead.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly PROJECT="$ROOT/tests/node"
readonly STAMP="$PROJECT/node_modules/.otel-footprint-lock.sha256"

say() { printf 'node-install: %s\n' "$*" >&2; }

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  if [[ "${NODE_INSTALL_REQUIRED:-0}" == 1 ]]; then
    say "ERROR: node and npm are required (Node.js >= 20.6)"
    exit 1
  fi
  say "node/npm not found: skipping (the Node.js client tests will be skipped)"
  exit 0
fi

major=$(node -p 'process.versions.node.split(".")[0]')
if ((major < 20)); then
  say "ERROR: Node.js $(node --version) is too old; the pinned OpenTelemetry JS SDK needs >= 20.6"
  exit 1
fi

readonly RECORDER="$ROOT/js/otel-footprint"
recorder_want=$(sha256sum "$RECORDER/package-lock.json" | cut -d' ' -f1)
recorder_stamp="$RECORDER/node_modules/.otel-footprint-lock.sha256"
if [[ -f "$recorder_stamp" && "$(cat "$recorder_stamp")" == "$recorder_want" ]]; then
  say "js/otel-footprint/node_modules matches package-lock.json (skipped)"
else
  (cd "$RECORDER" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error)
  echo "$recorder_want" >"$recorder_stamp"
fi
# Always rebuilt (a second with tsc): tests/node links this folder and imports its dist/.
(cd "$RECORDER" && npm run --silent build)
say "js/otel-footprint built"

readonly TRACEQL="$ROOT/tests/node/traceql"
traceql_want=$(sha256sum "$TRACEQL/package-lock.json" | cut -d' ' -f1)
traceql_stamp="$TRACEQL/node_modules/.otel-footprint-lock.sha256"
if [[ -f "$traceql_stamp" && "$(cat "$traceql_stamp")" == "$traceql_want" ]]; then
  say "tests/node/traceql/node_modules matches package-lock.json (skipped)"
else
  (cd "$TRACEQL" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error)
  echo "$traceql_want" >"$traceql_stamp"
fi

want=$(sha256sum "$PROJECT/package-lock.json" | cut -d' ' -f1)
if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$want" ]]; then
  say "tests/node/node_modules matches package-lock.json (skipped)"
  exit 0
fi

start=$(date +%s.%N)
# --ignore-scripts: no package here needs an install script (protobufjs' only checks its version),
# and none should run code at install time.
(cd "$PROJECT" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error)
echo "$want" >"$STAMP"
say "npm ci in tests/node done in $(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s"
