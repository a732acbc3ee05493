#!/usr/bin/env bash
# Build smoke.c, start the stand-in on a free port, run the smoke test against
# it with the real libmongoc client, and stop the server again.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"

[ -d node_modules ] || npm ci --no-audit --no-fund >/dev/null

out="$(mktemp -d)"
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$out"' EXIT

gcc -Wall -Wextra -O1 -o "$out/smoke" smoke.c $(pkg-config --cflags --libs libmongoc-1.0)

node server.js --port 0 >"$out/port" 2>"$out/server.log" &
pid=$!
for _ in $(seq 1 100); do
  grep -q '^listening ' "$out/port" 2>/dev/null && break
  sleep 0.05
done
port="$(awk '/^listening /{print $2}' "$out/port")"
[ -n "$port" ] || { echo "server did not start"; cat "$out/server.log"; exit 1; }

status=0
"$out/smoke" "mongodb://127.0.0.1:$port/?appname=convo-smoke" || status=$?
if [ -s "$out/server.log" ]; then echo "--- server stderr ---"; cat "$out/server.log"; fi
exit $status
