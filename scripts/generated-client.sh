#!/usr/bin/env bash
# The served OpenAPI document is usable by standard tools: it must pass openapi-spec-validator
# (OpenAPI 3.1), and openapi-python-client must generate a client from it that drives a real
# `occ dev` (API + worker, real OpenClaw gateways) through create Configuration → create Agent →
# deploy → wait for the deployment → write a workspace file → read it back
# (tests/generated-client/round_trip.py).
#
# Installs the Python tools (pinned) into target/generated-client-venv when they are missing, and
# python3-venv through apt-get when `python3 -m venv` cannot work. Everything else it makes lives
# in one temp dir that is removed on exit; occ dev and its gateways are stopped by PID.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

log() { printf '\n== %s\n' "$*" >&2; }

GENERATOR_VERSION=0.29.1
VALIDATOR_VERSION=0.9.0
VENV=$ROOT/target/generated-client-venv
# Gateways of this run listen here (the Rust tests and the console tests use other ranges).
PORTS=${OCC_GENERATED_CLIENT_PORTS:-29850-29869}
RUNTIME=$ROOT/target/openclaw-runtime
started=$SECONDS

# --- tools -----------------------------------------------------------------------------------
missing=()
command -v python3 >/dev/null 2>&1 || missing+=(python3)
# Debian's python3 ships `venv` without `ensurepip` unless python3-venv is installed.
python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || missing+=(python3-venv)
if ((${#missing[@]})); then
  log "installing ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then
    echo "missing system packages: ${missing[*]} (run as root or install them)" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

installed() {
  "$VENV/bin/python" - "$GENERATOR_VERSION" "$VALIDATOR_VERSION" 2>/dev/null <<'PY'
import importlib.metadata as m, sys
sys.exit(0 if [m.version("openapi-python-client"), m.version("openapi-spec-validator")] == sys.argv[1:] else 1)
PY
}
if ! installed; then
  log "installing openapi-python-client $GENERATOR_VERSION and openapi-spec-validator $VALIDATOR_VERSION into $VENV"
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    "openapi-python-client==$GENERATOR_VERSION" "openapi-spec-validator==$VALIDATOR_VERSION"
fi

log "cargo build -p occ"
cargo build -p occ --locked
OCC=$ROOT/target/debug/occ

# --- occ dev ---------------------------------------------------------------------------------
# shellcheck source=lib/occ-dev.sh
. "$ROOT/scripts/lib/occ-dev.sh"
DIR=$(mktemp -d)
DATA=$DIR/data

cleanup() {
  local status=$?
  occ_dev_stop "$DATA"
  if [ "$status" -ne 0 ] && [ -f "$DIR/dev.log" ]; then
    log "occ dev log (last 60 lines)"
    tail -n 60 "$DIR/dev.log" >&2 || true
  fi
  rm -rf "$DIR"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
URL=http://127.0.0.1:$PORT
log "occ dev on $URL (gateways on $PORTS)"
occ_dev_start "$OCC" "$DATA" "$RUNTIME" "$PORT" "$PORTS" "$DIR/dev.log"

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
