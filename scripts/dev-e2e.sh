#!/usr/bin/env bash
# The end-to-end checks that drive a real `occ dev` from outside, against one `occ dev` (API +
# worker, real OpenClaw gateways) on a throwaway data directory: the web console's browser tests
# (scripts/console-e2e.sh), then the client generated from the served OpenAPI document
# (scripts/generated-client.sh). Each of them also runs alone, with an occ dev of its own.
#
# On exit occ dev is stopped by its PID, with every gateway it started, and the directory removed.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

log() { printf '\n== %s\n' "$*" >&2; }

# Gateways of this run listen here (the Rust tests use other ranges).
PORTS=${OCC_DEV_E2E_PORTS:-29800-29849}
RUNTIME=$ROOT/target/openclaw-runtime

# shellcheck source=lib/occ-binary.sh
. "$ROOT/scripts/lib/occ-binary.sh"
occ_binary
# shellcheck source=lib/occ-dev.sh
. "$ROOT/scripts/lib/occ-dev.sh"
DIR=$(mktemp -d)
DATA=$DIR/data

cleanup() {
  local status=$?
  occ_dev_finish "$status" "$DATA" "$DIR/dev.log"
  rm -rf "$DIR"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
URL=http://127.0.0.1:$PORT
log "occ dev on $URL (gateways on $PORTS)"
occ_dev_start "$OCC" "$DATA" "$RUNTIME" "$PORT" "$PORTS" "$DIR/dev.log"

export OCC_URL=$URL OCC_DATA_DIR=$DATA
"$ROOT/scripts/console-e2e.sh"
"$ROOT/scripts/generated-client.sh"
