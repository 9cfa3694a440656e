#!/bin/sh
# Installs the pinned official MCP TypeScript SDK (package.json and
# package-lock.json beside this script) into DEST (the build folder's
# node/), and copies the SDK client tests there, so that Node resolves the
# SDK from it. ctest runs it as the setup fixture of the mcp_sdk_* tests.
# Usage: npm_setup.sh SRC_DIR DEST_DIR
set -eu
src=$1
dest=$2
fail() {
  echo "mcp_sdk_setup: $*" >&2
  echo "mcp_sdk_setup: the MCP SDK client test needs Node.js >= 18 and npm:" \
    "run 'make deps' (Debian packages nodejs, npm)" >&2
  exit 1
}
command -v node >/dev/null 2>&1 || fail "node not found on PATH"
command -v npm >/dev/null 2>&1 || fail "npm not found on PATH"
major=$(node -p 'process.versions.node.split(".")[0]') ||
  fail "node --version does not work"
[ "$major" -ge 18 ] || fail "node $(node --version) is older than 18"
mkdir -p "$dest"
cp "$src/sdk_client_test.mjs" "$src/sdk_agent_test.mjs" "$src/review.jsonc" \
  "$dest/"
if cmp -s "$src/package-lock.json" "$dest/package-lock.json" &&
  [ -f "$dest/node_modules/@modelcontextprotocol/sdk/package.json" ]; then
  echo "mcp_sdk_setup: @modelcontextprotocol/sdk already installed in $dest"
  exit 0
fi
cp "$src/package.json" "$src/package-lock.json" "$dest/"
cd "$dest"
npm ci --no-audit --no-fund --loglevel=error ||
  fail "npm ci in $dest failed (is the npm registry reachable?)"
echo "mcp_sdk_setup: installed $(node -p \
  'require("./node_modules/@modelcontextprotocol/sdk/package.json").version') in $dest"
