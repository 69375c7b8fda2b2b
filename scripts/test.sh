#!/usr/bin/env bash
# Runs every occ test on a fresh machine: installs what the tests need when it is missing,
# then checks formatting, lints (warnings are errors) and runs the whole test suite.
#
# The tests start their own throwaway PostgreSQL cluster (as the unprivileged `postgres` OS
# user when run as root) and their own SQLite files, and clean them up by PID when they end.
# Real OpenClaw gateways are started by the tests on loopback ports and stopped by PID.
# The SSH Compute Driver's tests need root: they run sshd and create (and remove) one Unix
# user per Agent they deploy.
# The web console's browser tests run Debian's chromium (installed through apt-get when missing)
# against a real `occ dev` (scripts/console-e2e.sh). A client generated from the served OpenAPI
# document by openapi-python-client drives another `occ dev` (scripts/generated-client.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '\n== %s\n' "$*" >&2; }

missing=()
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
command -v runuser >/dev/null 2>&1 || missing+=(util-linux)
command -v cc >/dev/null 2>&1 || missing+=(gcc libc6-dev)
# The real-gateway tests install the pinned OpenClaw runtime (Node 24 + openclaw) from the npm
# registry with `npm ci` once per machine (target/openclaw-runtime); `openclaw setup` runs git.
command -v npm >/dev/null 2>&1 || missing+=(npm)
command -v git >/dev/null 2>&1 || missing+=(git)
[ -f /etc/ssl/certs/ca-certificates.crt ] || missing+=(ca-certificates)
# The SSH Compute Driver's tests start their own sshd on 127.0.0.1 and log in as root with the
# system ssh client; the host side creates one Unix user per Agent (useradd, from passwd).
[ -x /usr/sbin/sshd ] || missing+=(openssh-server)
command -v ssh >/dev/null 2>&1 || missing+=(openssh-client)
command -v useradd >/dev/null 2>&1 || missing+=(passwd)
if ((${#missing[@]})); then
  log "installing ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then
    echo "missing system packages: ${missing[*]} (run as root or install them)" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if ! command -v cargo >/dev/null 2>&1; then
  echo "cargo is missing: install Rust with rustup (https://rustup.rs); rust-toolchain.toml pins the version" >&2
  exit 1
fi

# Uncaught failures print one message, not a backtrace per error.
export RUST_BACKTRACE="${RUST_BACKTRACE:-0}"
# insta never writes snapshots here: a missing or changed snapshot fails the run.
export CI=true

log "cargo fmt --check"
cargo fmt --all --check

log "cargo clippy (warnings are errors)"
cargo clippy --workspace --all-targets --locked -- -D warnings

log "cargo test"
cargo test --workspace --locked

log "web console in headless Chromium (installs Debian's chromium when missing)"
./scripts/console-e2e.sh

log "schemathesis against the reference OpenAPI document"
./scripts/schemathesis.sh

log "a client generated from the served OpenAPI document, against occ dev"
./scripts/generated-client.sh
