#!/usr/bin/env bash
# Browser tests of the web console: headless Chromium (Debian's `chromium`, driven by
# `playwright-core` from npm, pinned in tests/console/package-lock.json) against a real `occ dev`
# with real OpenClaw gateways. Writes the screenshots under docs/console/.
#
# Installs chromium through apt-get when /usr/bin/chromium is missing (as root), runs `npm ci` in
# tests/console, builds occ (unless OCC_BIN names a built one), starts `occ dev` on a throwaway
# data directory and a free port (unless OCC_URL and OCC_DATA_DIR name a running one, as
# scripts/dev-e2e.sh passes them), and runs the tests with node's test runner. On exit it stops
# its occ dev by its PID and every gateway it started (found by the data directory in their
# OPENCLAW_STATE_DIR), then removes the directory.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

log() { printf '\n== %s\n' "$*" >&2; }

CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
# Gateways of this run listen here (the Rust tests use other ranges).
PORTS=${OCC_CONSOLE_E2E_PORTS:-29800-29849}
RUNTIME=$ROOT/target/openclaw-runtime

# --- tools -----------------------------------------------------------------------------------
if [ ! -x "$CHROMIUM" ]; then
  log "installing chromium"
  if [ "$(id -u)" -ne 0 ]; then
    echo "chromium is missing: install Debian's chromium package (run as root or install it)" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium
fi
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "node and npm are missing (scripts/test.sh installs npm)" >&2
  exit 1
fi
node_major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$node_major" -lt 20 ]; then
  echo "playwright-core needs Node.js 20 or newer; this is $(node --version)" >&2
  exit 1
fi

log "npm ci (tests/console)"
(cd tests/console && npm ci --no-audit --no-fund --loglevel=error)

# --- occ dev ---------------------------------------------------------------------------------
# One that is already running (OCC_URL and OCC_DATA_DIR, as scripts/dev-e2e.sh passes them), or
# our own.
# shellcheck source=lib/occ-dev.sh
. "$ROOT/scripts/lib/occ-dev.sh"
DIR=$(mktemp -d)
DATA=${OCC_DATA_DIR:-$DIR/data}
URL=${OCC_URL:-}
TEST_PID=

cleanup() {
  local status=$?
  # the tests first (playwright closes its browser on SIGTERM), then our occ dev and its gateways
  [ -n "$TEST_PID" ] && stop_pid "$TEST_PID"
  if [ -z "${OCC_URL:-}" ]; then occ_dev_finish "$status" "$DATA" "$DIR/dev.log"; fi
  rm -rf "$DIR"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -z "$URL" ]; then
  # shellcheck source=lib/occ-binary.sh
  . "$ROOT/scripts/lib/occ-binary.sh"
  occ_binary
  PORT=$(node -e 'const s = require("net").createServer(); s.listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); })')
  URL=http://127.0.0.1:$PORT
  log "occ dev on $URL (gateways on $PORTS)"
  occ_dev_start "$OCC" "$DATA" "$RUNTIME" "$PORT" "$PORTS" "$DIR/dev.log"
  grep -q "console      $URL/console/" "$DIR/dev.log" || {
    echo "occ dev did not print the console address" >&2
    exit 1
  }
elif [ -z "${OCC_DATA_DIR:-}" ]; then
  echo "OCC_URL names a running occ dev: OCC_DATA_DIR must name its data directory" >&2
  exit 1
fi

# --- the tests -------------------------------------------------------------------------------
log "console tests in headless Chromium ($("$CHROMIUM" --version 2>/dev/null || echo chromium))"
started=$SECONDS
# In the background and waited for, so that a signal runs the cleanup at once.
(
  cd tests/console &&
    exec env OCC_URL="$URL" OCC_DATA_DIR="$DATA" CHROMIUM="$CHROMIUM" \
      node --test --test-concurrency=1 --test-reporter=spec
) &
TEST_PID=$!
wait "$TEST_PID"
TEST_PID=
log "console tests passed in $((SECONDS - started)) s; screenshots in docs/console/"
