#!/usr/bin/env bash
# Regenerate docs/explain-demo.png (the "At a glance" screen of the demo's run view) and
# docs/explain-stuck-shadow.png (one run's view) with headless Chromium (Debian: apt-get install
# chromium). Usage: scripts/explain-screenshot.sh [otel-footprint binary]
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${1:-.venv/bin/otel-footprint}"
browser="$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)"
[ -n "$browser" ] || { echo "no chromium on PATH" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$bin" demo -o "$work/demo.jsonl" >/dev/null
"$bin" explain "$work/demo.jsonl" --format html >"$work/demo.html"
"$bin" demo --scenario stuck-shadow -o "$work/shadow.jsonl" >/dev/null
"$bin" explain "$work/shadow.jsonl" --format html >"$work/shadow.html"
shoot() {
  "$browser" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --hide-scrollbars \
    --window-size="$1" --screenshot="$2" "file://$3" 2>/dev/null
}
shoot 1280,800 docs/explain-demo.png "$work/demo.html"
shoot 1280,1500 docs/explain-stuck-shadow.png "$work/shadow.html"
echo "wrote docs/explain-demo.png docs/explain-stuck-shadow.png"
