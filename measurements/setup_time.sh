#!/usr/bin/env bash
# Time from `make run` until /, /healthz and /api/docs all answer 200: first on a fresh clone with no
# .venv (cold), then once more in the same clone (warm restart: everything reused).
#   measurements/setup_time.sh [CLONE_DIR] [PORT]
# Clones this repository's HEAD into CLONE_DIR (default /tmp/accelopt-fresh, replaced), runs `make run`
# in its own process group, polls once a second, prints the elapsed seconds, then stops the server.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
clone="${1:-/tmp/accelopt-fresh}"
port="${2:-8765}"

rm -rf "$clone"
git clone --quiet "$repo" "$clone"
cd "$clone"

ready() {
  for path in / /healthz /api/docs; do
    code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port$path" || true)
    [ "$code" = 200 ] || return 1
  done
}

time_make_run() {  # $1: label
  local log="$clone.$1.log" start end make_pid
  start=$(date +%s.%N)
  setsid make run PORT="$port" >"$log" 2>&1 &
  make_pid=$!
  until ready; do
    if ! kill -0 "$make_pid" 2>/dev/null; then
      echo "make run exited before the site answered; see $log" >&2
      exit 1
    fi
    sleep 1
  done
  end=$(date +%s.%N)
  awk -v s="$start" -v e="$end" -v l="$1" -v f="$log" \
    'BEGIN { printf "%s: 200 on /, /healthz, /api/docs after %.1f s (log: %s)\n", l, e - s, f }'
  kill -- -"$make_pid"
  wait "$make_pid" 2>/dev/null || true
}

time_make_run cold
time_make_run warm
