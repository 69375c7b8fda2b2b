# Sourced by the scripts that drive the `occ` binary: sets OCC to $OCC_BIN when it is set
# (scripts/test.sh builds it once with every test target and runs these scripts in parallel, so
# none of them may start a cargo build of its own), else builds it (debug) first.
occ_binary() {
  if [ -n "${OCC_BIN:-}" ]; then
    OCC=$OCC_BIN
  else
    printf '\n== %s\n' "cargo build -p occ" >&2
    cargo build -p occ --locked
    OCC=$ROOT/target/debug/occ
  fi
}
