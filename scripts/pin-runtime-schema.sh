#!/usr/bin/env bash
# Regenerates runtime/gateway/openclaw.schema.json: the JSON Schema of openclaw.json exactly as
# the pinned OpenClaw runtime prints it (`openclaw config schema`). Run it after changing the
# runtime pin (runtime/gateway/package*.json), review the diff, and commit both together: occ
# validates every Configuration against this file, embedded in the binary.
#
# The runtime is installed into target/openclaw-runtime (or $OCC_OPENCLAW_RUNTIME) on first use,
# from the npm registry. The first run rewrites the file from the installed runtime; the second,
# with the rebuilt binary, checks it and `occ runtime install`'s own check against it.
set -euo pipefail
cd "$(dirname "$0")/.."

OCC_UPDATE_GOLDEN=1 cargo test -p occ --test runtime_schema -- the_checked_in_schema_is_what_the_pinned_runtime_prints
cargo test -p occ --test runtime_schema
git status --short runtime/gateway/openclaw.schema.json
