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
# against a real `occ dev` (scripts/console-e2e.sh); a client generated from the served OpenAPI
# document by openapi-python-client then drives the same `occ dev` (scripts/generated-client.sh;
# both through scripts/dev-e2e.sh).
#
# Every target is compiled once, with clippy wrapping the compiler (the build is the lint); then
# the pinned runtime's install, every test binary, the doc tests, schemathesis and one occ dev
# for the console and the generated client run as parallel jobs (scripts/lib/run-jobs.py; each
# binary exactly as `cargo test` runs it, on gateway port ranges of its own). The run ends with a
# table of each stage's and each job's wall time and CPU time.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '\n== %s\n' "$*" >&2; }

# The run's clock starts here, so the table's total includes installing system packages.
run_started=$SECONDS
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
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
# The browser tests' Chromium, and venv for the pinned Python tools (schemathesis, the generated
# client): installed here, once, because those run as parallel jobs and apt-get cannot run twice
# at once.
[ -x /usr/bin/chromium ] || missing+=(chromium)
command -v python3 >/dev/null 2>&1 || missing+=(python3)
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

if ! command -v cargo >/dev/null 2>&1; then
  echo "cargo is missing: install Rust with rustup (https://rustup.rs); rust-toolchain.toml pins the version" >&2
  exit 1
fi

# Uncaught failures print one message, not a backtrace per error.
export RUST_BACKTRACE="${RUST_BACKTRACE:-0}"
# insta never writes snapshots here: a missing or changed snapshot fails the run.
export CI=true

# Every stage's wall time, printed as a table when the run ends (pass or fail).
STAGES=()
stage_started=$SECONDS
STAGES+=("$(printf '%6d s  %s' $((SECONDS - run_started)) 'system packages (installed when missing)')")
stage() {
  local name=$1
  shift
  log "$name"
  stage_started=$SECONDS
  "$@"
  STAGES+=("$(printf '%6d s  %s' $((SECONDS - stage_started)) "$name")")
}
report() {
  local status=$?
  printf '\n== stages, wall time\n' >&2
  local line
  for line in "${STAGES[@]}"; do printf '%s\n' "$line" >&2; done
  printf '%6d s  total (%s)\n' $((SECONDS - run_started)) "$([ "$status" -eq 0 ] && echo passed || echo FAILED)" >&2
}
trap report EXIT

stage "cargo fmt --check" cargo fmt --all --check

# From scratch, incremental compilation only costs time (and disk); a developer's own builds
# keep it.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"

# One compilation lints and builds: clippy-driver wraps rustc for the workspace's own crates (what
# `cargo clippy` does, but with code generation), so every crate is compiled once rather than once
# for clippy and again for the tests. `--all-targets` is what `cargo clippy --all-targets` checks
# (benchmarks included; run-jobs.py does not run them). The test binaries then run in parallel,
# each exactly as `cargo test` runs it; the doc tests reuse these builds, so they run with the
# same wrapper.
clippy_driver="$(rustc --print sysroot)/bin/clippy-driver"
if [ ! -x "$clippy_driver" ]; then
  echo "clippy is missing: rustup component add clippy (rust-toolchain.toml names it)" >&2
  exit 1
fi
export RUSTC_WORKSPACE_WRAPPER="$clippy_driver"
export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"

mkdir -p target/test-jobs
export OCC_BIN=$PWD/target/debug/occ
stage "cargo test --all-targets --no-run with clippy (warnings are errors)" \
  bash -c 'cargo test --workspace --all-targets --locked --no-run --message-format=json-render-diagnostics >target/test-jobs/tests.json'

# The Rust test binaries, the doc tests, schemathesis against the reference OpenAPI document,
# and one occ dev driven by the web console's browser tests (headless Chromium) and then by the
# generated client (scripts/dev-e2e.sh), as parallel jobs (OCC_TEST_JOBS at once, default 4; of
# them at most OCC_TEST_HEAVY, default 2, start real gateways: a third beside them starved
# gateways into timeouts on 2 cores without finishing the run any sooner, as it is CPU-bound).
# The pinned OpenClaw runtime installs first, as the gate of the jobs that start gateways or run
# its CLI (it is mostly downloading and unpacking, so the other jobs run meanwhile; a job that
# needs it earlier anyway waits on the install's lock).
stage "tests: every test binary, doc tests, schemathesis, console and generated client" \
  python3 scripts/lib/run-jobs.py --jobs "${OCC_TEST_JOBS:-4}" --heavy "${OCC_TEST_HEAVY:-2}" \
    --logs target/test-jobs \
    --tests target/test-jobs/tests.json --gate openclaw-runtime \
    "openclaw-runtime=$OCC_BIN::runtime::install::--dir::target/openclaw-runtime" \
    "doctests=cargo::test::--workspace::--locked::--doc" \
    ./scripts/schemathesis.sh ./scripts/dev-e2e.sh
