# Sourced by the scripts that test against a throwaway `occ dev` (API + worker, real OpenClaw
# gateways): start it on a data directory of its own and stop it again, together with every
# gateway it started (gateways run detached and outlive occ dev). Processes are stopped by PID.
#
#   occ_dev_start OCC DATA RUNTIME PORT GATEWAY_PORTS LOG   # sets OCC_DEV_PID; waits until it serves
#   occ_dev_stop DATA                                        # stops occ dev, then its gateways
#   occ_dev_finish STATUS DATA LOG                           # the same, with LOG's tail on failure

OCC_DEV_PID=

# SIGTERM, then SIGKILL after 20 s.
stop_pid() {
  local pid=$1 i
  kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 1 100); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.2
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

# Processes whose environment places their state under DATA.
occ_dev_gateway_pids() {
  local data=$1 environ pid
  for environ in /proc/[0-9]*/environ; do
    pid=${environ#/proc/}
    pid=${pid%/environ}
    if { tr '\0' '\n' <"$environ"; } 2>/dev/null | grep -q "^OPENCLAW_STATE_DIR=$data/"; then
      echo "$pid"
    fi
  done
}

occ_dev_start() {
  local occ=$1 data=$2 runtime=$3 port=$4 gateway_ports=$5 log=$6 deadline
  OCC_PROCESS_PORT_RANGE=$gateway_ports OCC_LOG=${OCC_LOG:-info} \
    "$occ" dev --data-dir "$data" --runtime-dir "$runtime" --port "$port" >"$log" 2>&1 &
  OCC_DEV_PID=$!
  # The first run on a machine installs the runtime (about a minute) before listening.
  deadline=$((SECONDS + 600))
  until grep -q "occ dev is running at" "$log" 2>/dev/null; do
    if ! kill -0 "$OCC_DEV_PID" 2>/dev/null; then
      echo "occ dev exited before listening" >&2
      return 1
    fi
    if [ "$SECONDS" -gt "$deadline" ]; then
      echo "occ dev did not start within 600 s" >&2
      return 1
    fi
    sleep 0.2
  done
}

occ_dev_stop() {
  local data=$1 pid pids i
  if [ -n "$OCC_DEV_PID" ]; then
    stop_pid "$OCC_DEV_PID"
    OCC_DEV_PID=
  fi
  for i in $(seq 1 50); do
    pids=$(occ_dev_gateway_pids "$data")
    [ -z "$pids" ] && break
    for pid in $pids; do kill -KILL "$pid" 2>/dev/null || true; done
    sleep 0.1
  done
}

# For EXIT traps: stops occ dev and its gateways; after a failure shows the end of its log.
occ_dev_finish() {
  local status=$1 data=$2 log=$3
  occ_dev_stop "$data"
  if [ "$status" -ne 0 ] && [ -f "$log" ]; then
    printf '\n== occ dev log (last 60 lines)\n' >&2
    tail -n 60 "$log" >&2 || true
  fi
}
