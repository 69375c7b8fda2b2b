#!/usr/bin/env bash
# occ's main job on a fresh machine: installs the system packages `occ dev` needs when they are
# missing (npm to install the pinned OpenClaw runtime from the npm registry, git for
# `openclaw setup`, CA certificates, bubblewrap to contain each Agent), builds occ and runs `occ dev` (API + worker, SQLite under
# ./.occ, real OpenClaw gateways). Arguments are passed to `occ dev` (e.g. --port 3001).
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v npm >/dev/null 2>&1 || missing+=(npm)
command -v git >/dev/null 2>&1 || missing+=(git)
command -v cc >/dev/null 2>&1 || missing+=(gcc libc6-dev)
[ -f /etc/ssl/certs/ca-certificates.crt ] || missing+=(ca-certificates)
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
if ((${#missing[@]})); then
  echo "== installing ${missing[*]}" >&2
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
cargo build -p occ --locked
exec ./target/debug/occ dev "$@"
