#!/usr/bin/env bash
# Produces the command output quoted in docs/incidents.md: a denied call, a stuck tool
# (timeout) and a crashed ToolRunner, investigated with the roost CLI.
# Usage: scripts/incident_walkthrough.sh   (uses .venv; leaves no process behind)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOST=".venv/bin/roost"
HOME_DIR=$(mktemp -d /tmp/roost-incidents-home.XXXXXX)
ROOT=$(mktemp -d /tmp/roost-incidents-repo.XXXXXX)
printf '# Repo\n' > "$ROOT/README.md"
trap '$ROOST --home "$HOME_DIR" daemon stop >/dev/null 2>&1 || true; rm -rf "$HOME_DIR" "$ROOT"' EXIT
r() { echo "\$ roost $*"; $ROOST --home "$HOME_DIR" "$@" || true; echo; }

r daemon start
r project start "$ROOT" --id shop --opt tool_timeout_ms=1000 --opt network_egress_policy=allow
r conversation start shop --id c1

echo "## 1. A denied call"
r send shop c1 "read ../../etc/passwd" --correlation-id corr-denied --wait
r timeline shop c1 --correlation-id corr-denied
r project diagnostics shop

echo "## 2. A stuck tool"
r send shop c1 "run it" --correlation-id corr-stuck --wait \
  --llm '{"tool_calls": [{"name": "command.run", "args": {"command": "sleep 30"}}]}'
r timeline shop c1 --correlation-id corr-stuck
r incident shop c1 --correlation-id corr-stuck --format md

echo "## 3. A crash"
r project start "$ROOT" --id ops --opt network_egress_policy=allow
r conversation start ops --id c1
r send ops c1 "run it again" --correlation-id corr-crash \
  --llm '{"tool_calls": [{"name": "command.run", "args": {"command": "sleep 30"}, "run_mode": "async"}]}'
for _ in $(seq 50); do
  if $ROOST --home "$HOME_DIR" --json projection ops c1 pending_tool_calls | grep -q running; then break; fi
  sleep 0.1
done
r projection ops c1 pending_tool_calls
RUNNER=$($ROOST --home "$HOME_DIR" --json project diagnostics ops | .venv/bin/python -c 'import json,sys; print(json.load(sys.stdin)["actors"]["toolrunner"])')
echo "\$ kill -9 $RUNNER   # the ToolRunner's pid, from 'roost project diagnostics ops --json'"
kill -9 "$RUNNER"
for _ in $(seq 50); do
  if $ROOST --home "$HOME_DIR" --json projection ops c1 diagnostics | grep -q '"status":"idle"'; then break; fi
  sleep 0.2
done
r timeline ops c1 --correlation-id corr-crash
r project diagnostics ops --json
r verify ops
r daemon stop
