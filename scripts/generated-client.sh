#!/usr/bin/env bash
# The served OpenAPI document is usable by standard tools: it must pass openapi-spec-validator
# (OpenAPI 3.1), and openapi-python-client must generate a client from it that drives a real
# `occ dev` (API + worker, real OpenClaw gateways) through create Configuration → create Agent →
# deploy → wait for the deployment → write a workspace file → read it back
# (tests/generated-client/round_trip.py).
#
# Installs the Python tools (pinned) into target/generated-client-venv when they are missing, and
# python3-venv through apt-get when `python3 -m venv` cannot work. Everything else it makes lives
# in one temp dir that is removed on exit; occ dev and its gateways are stopped by PID. With
# OCC_URL and OCC_DATA_DIR it drives that running occ dev instead (scripts/dev-e2e.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

log() { printf '\n== %s\n' "$*" >&2; }

GENERATOR_VERSION=0.29.1
VALIDATOR_VERSION=0.9.0
VENV=$ROOT/target/generated-client-venv
# Gateways of this run listen here (the Rust tests and the console tests use other ranges).
PORTS=${OCC_GENERATED_CLIENT_PORTS:-29220-29239}
RUNTIME=$ROOT/target/openclaw-runtime
started=$SECONDS

# --- tools -----------------------------------------------------------------------------------
# shellcheck source=lib/python-venv.sh
. "$ROOT/scripts/lib/python-venv.sh"
python_venv "$VENV" "openapi-python-client==$GENERATOR_VERSION" "openapi-spec-validator==$VALIDATOR_VERSION"

# --- occ dev ---------------------------------------------------------------------------------
# One that is already running (OCC_URL and OCC_DATA_DIR, as scripts/dev-e2e.sh passes them), or
# our own.
# shellcheck source=lib/occ-dev.sh
. "$ROOT/scripts/lib/occ-dev.sh"
DIR=$(mktemp -d)
DATA=${OCC_DATA_DIR:-$DIR/data}
URL=${OCC_URL:-}

cleanup() {
  local status=$?
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
  PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  URL=http://127.0.0.1:$PORT
  log "occ dev on $URL (gateways on $PORTS)"
  occ_dev_start "$OCC" "$DATA" "$RUNTIME" "$PORT" "$PORTS" "$DIR/dev.log"
elif [ -z "${OCC_DATA_DIR:-}" ]; then
  echo "OCC_URL names a running occ dev: OCC_DATA_DIR must name its data directory" >&2
  exit 1
fi

# --- the document, the generated client and the round trip ------------------------------------
"$VENV/bin/python" - "$URL/openapi.json" "$DIR/openapi.json" <<'PY'
import sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=10) as r, open(sys.argv[2], "wb") as f:
    f.write(r.read())
PY

log "openapi-spec-validator $VALIDATOR_VERSION"
"$VENV/bin/openapi-spec-validator" "$DIR/openapi.json"

log "openapi-python-client $GENERATOR_VERSION"
# Warnings (a schema the generator could not turn into a type) fail the run as errors do.
(cd "$DIR" && "$VENV/bin/openapi-python-client" generate --path openapi.json \
  --config "$ROOT/tests/generated-client/config.yml" --output-path client --fail-on-warning)

log "round trip through the generated client"
PYTHONPATH=$DIR/client "$VENV/bin/python" "$ROOT/tests/generated-client/round_trip.py" \
  "$URL" "$DATA/admin-service-key.json"

log "generated client: passed in $((SECONDS - started)) s"
