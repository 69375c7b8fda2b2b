#!/usr/bin/env python3
"""Runs the test suite's jobs in parallel and prints a timing table.

    run-jobs.py --jobs N --logs DIR --tests TESTS.json [NAME=]COMMAND ...

TESTS.json is what `cargo test --no-run --message-format=json` printed: every test executable
(unit tests, integration tests) becomes one job, run exactly as `cargo test` runs it (in its
package's directory, with its package's `CARGO_MANIFEST_DIR`), so tests inside one binary still
share what they share (a gateway, a PostgreSQL cluster). Each COMMAND is one more job. Jobs start longest-known-first: a job's last duration is kept in
DIR/durations.json (a fresh checkout has none; then the order below applies), so the slowest
binaries are never left for the end.

With --gate NAME, the job NAME starts first, and no job that starts gateways or runs the
runtime's CLI starts before it has ended (the runtime they share installs while the other jobs
run).

Output of each job goes to DIR/<job>.log; a failed job's log tail is printed. Every job runs even
after a failure; the exit status is 1 when any failed. A COMMAND's arguments are separated by
`::`; NAME names its job (default: the program's file name). The table at the end lists every job with
its wall time, slowest first.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time

# Jobs that start real gateways (each ~1 GB and ~13 s of a core to start): at most
# --heavy of them run at once (scripts/test.sh passes 2), since the suite is bound by CPU on a
# 2-core machine and gateways that starve each other time out. Every other job may fill the
# remaining slots.
HEAVY = {
    "occ::ssh",
    "occ::dedicated",
    "occ-drivers::kubernetes_dedicated",
    "occ-drivers::process",
    "occ::chat",
    "dev-e2e",
    "occ::rollback",
    "occ-drivers::kubernetes_compute",
    "occ::workspace_files",
    "occ::lifecycle",
    "occ::dedicated_dev",
    "occ-gateway::real_gateway",
    "occ::native_admin",
    "occ::kubernetes",
    "occ::compute_host",
    "occ-host::workspace_setup",
    "occ::harness_launch",
}

# Jobs that run the pinned runtime's CLI without starting gateways: with --gate, they wait for
# the gate (the runtime's install) like the gateway jobs do, rather than run beside it.
RUNTIME_USERS = {
    "occ-host (lib)",
    "occ::dev",
    "occ::runtime_schema",
    "occ-host::harness_launch",
    "occ-host::dedicated_render",
    "occ-testkit (lib)",
}

# Jobs known to take longest (seconds, a fresh-clone run on the 2-core machine), for the order
# when no durations were recorded yet. Unknown jobs count as 10 s.
KNOWN = {
    "occ::ssh": 360,
    "occ::dedicated": 220,
    "occ-drivers::kubernetes_dedicated": 210,
    "occ-drivers::process": 190,
    "occ::chat": 190,
    "dev-e2e": 230,
    "occ::rollback": 160,
    "occ-drivers::kubernetes_compute": 150,
    "occ::workspace_files": 70,
    "occ::lifecycle": 70,
    "occ::dedicated_dev": 70,
    "occ-gateway::real_gateway": 50,
    "schemathesis": 45,
}


def machine_cpu():
    """(busy, total) CPU seconds of the whole machine so far (/proc/stat), or None."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return ((sum(fields) - idle) / ticks, sum(fields) / ticks)


def parse_tests(path):
    """(name, argv, cwd, env) of every test executable cargo built."""
    jobs = []
    seen = set()
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            msg = json.loads(line)
            if msg.get("reason") != "compiler-artifact":
                continue
            if not msg.get("profile", {}).get("test") or not msg.get("executable"):
                continue
            target = msg["target"]
            # Benchmarks are built (and linted) with every target, but they measure rather than
            # test: they are run on their own (docs/BENCHMARKS.md).
            if "bench" in target["kind"]:
                continue
            package = msg["package_id"]
            manifest = msg["manifest_path"]
            pkg_name = os.path.basename(os.path.dirname(manifest))
            kinds = target["kind"]
            name = f"{pkg_name}::{target['name']}" if "test" in kinds else f"{pkg_name} ({kinds[0]})"
            if name in seen:
                continue
            seen.add(name)
            env = {"CARGO_MANIFEST_DIR": os.path.dirname(manifest), "CARGO_PKG_NAME": pkg_name}
            jobs.append((name, [msg["executable"]], os.path.dirname(manifest), env, package))
    return jobs


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=3)
    parser.add_argument("--heavy", type=int, default=2)
    parser.add_argument(
        "--gate",
        help="the job that starts first; gateway and runtime jobs wait until it has ended",
    )
    parser.add_argument("--logs", required=True)
    parser.add_argument("--tests", required=True)
    parser.add_argument("scripts", nargs="*")
    args = parser.parse_args()
    os.makedirs(args.logs, exist_ok=True)

    jobs = [(n, argv, cwd, env) for n, argv, cwd, env, _ in parse_tests(args.tests)]
    for script in args.scripts:
        name, _, command = script.partition("=") if "=" in script.split("::")[0] else ("", "", script)
        argv = command.split("::")
        name = name or os.path.splitext(os.path.basename(argv[0]))[0]
        jobs.append((name, argv, os.getcwd(), {}))

    durations_file = os.path.join(args.logs, "durations.json")
    try:
        with open(durations_file, encoding="utf-8") as f:
            known = json.load(f)
    except (OSError, ValueError):
        known = {}
    expected = lambda name: known.get(name, KNOWN.get(name, 10))
    jobs.sort(key=lambda j: (j[0] != args.gate, -expected(j[0])))

    lock = threading.Lock()
    pending = list(jobs)
    results = {}
    running = {}
    stopping = threading.Event()

    heavy_running = [0]
    wake = threading.Condition(lock)

    def gate_open():
        return args.gate is None or args.gate in results

    def next_job():
        """The first pending job that may start now (under the lock); None when none is left."""
        while pending:
            for i, job in enumerate(pending):
                if (job[0] in HEAVY or job[0] in RUNTIME_USERS) and not gate_open():
                    continue
                if job[0] not in HEAVY or heavy_running[0] < args.heavy:
                    if job[0] in HEAVY:
                        heavy_running[0] += 1
                    return pending.pop(i)
            wake.wait()
        return None

    def worker():
        while not stopping.is_set():
            with lock:
                job = next_job()
                if job is None:
                    return
                name, argv, cwd, extra = job
            log_path = os.path.join(args.logs, name.replace("/", "_").replace(" ", "_") + ".log")
            env = dict(os.environ)
            env.update(extra)
            started = time.monotonic()
            with open(log_path, "w", encoding="utf-8") as log:
                proc = subprocess.Popen(
                    argv, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL, start_new_session=True,
                )
                with lock:
                    running[name] = proc
                # wait4: the CPU time of the job and of every process it waited for.
                _, status, usage = os.wait4(proc.pid, 0)
                code = os.waitstatus_to_exitcode(status)
                proc.returncode = code
            elapsed = time.monotonic() - started
            cpu = usage.ru_utime + usage.ru_stime
            with lock:
                running.pop(name, None)
                results[name] = (code, elapsed, log_path, cpu, started - stage_started)
                done = len(results)
                if name in HEAVY:
                    heavy_running[0] -= 1
                wake.notify_all()
            status = "ok" if code == 0 else f"FAILED ({code})"
            print(
                f"[{done}/{len(jobs)}] {name}: {status} in {elapsed:.0f} s ({cpu:.0f} s of CPU)",
                flush=True,
            )

    stage_started = time.monotonic()

    def interrupt(signum, _frame):
        stopping.set()
        with lock:
            for proc in running.values():
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        sys.exit(128 + signum)

    signal.signal(signal.SIGINT, interrupt)
    signal.signal(signal.SIGTERM, interrupt)

    machine_before = machine_cpu()
    threads = [threading.Thread(target=worker, daemon=True) for _ in range(max(1, args.jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stage_wall = time.monotonic() - stage_started
    machine_after = machine_cpu()

    failed = [n for n, (code, *_) in results.items() if code != 0]
    for name in failed:
        log_path = results[name][2]
        print(f"\n== {name} failed; the end of {log_path}:", flush=True)
        with open(log_path, encoding="utf-8", errors="replace") as log:
            lines = log.readlines()
        sys.stdout.write("".join(lines[-150:]))

    with open(durations_file, "w", encoding="utf-8") as f:
        json.dump({n: round(r[1], 1) for n, r in results.items()}, f, indent=1, sort_keys=True)

    print(
        "\n== test jobs: wall time, CPU time (user + system, with the processes each waited for) "
        "and when each started in the stage, slowest first"
    )
    total_cpu = 0.0
    for name, (code, elapsed, _, cpu, offset) in sorted(results.items(), key=lambda kv: -kv[1][1]):
        mark = "" if code == 0 else "  FAILED"
        total_cpu += cpu
        print(f"{elapsed:8.1f} s  {cpu:8.1f} s CPU  from {offset:6.0f} s  {name}{mark}")
    print(f"{'':10}  {total_cpu:8.1f} s CPU  all jobs")
    if machine_before and machine_after:
        busy = machine_after[0] - machine_before[0]
        total = machine_after[1] - machine_before[1]
        cores = os.cpu_count() or 1
        # Whatever the jobs did not wait for (gateways an sshd started, other users) shows here.
        print(
            f"{stage_wall:8.1f} s  {busy:8.1f} s CPU  the whole machine meanwhile "
            f"({100 * busy / total if total else 0:.0f}% of {cores} cores busy)"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
