#!/usr/bin/env python3
"""Where the CPU went while a command ran: the machine's time by kind (/proc/stat: user, system,
softirq, irq, idle, steal) and, for every process whose command name matches --name, each
thread's user + system seconds (/proc/PID/task/TID/stat), seconds runnable but waiting for a CPU
and times scheduled in (/proc/PID/task/TID/schedstat), the process's first thread apart, and the
same three per thread name ("by_name": [cpu s, run-queue s, switches]; ours are named by
common/thread_name.h).

    python3 bench/cpu_account.py [--name cann-dist-train] [--json FILE] -- COMMAND ...

Threads are sampled every --interval seconds and the last sample of each counts, so a thread's
final fraction of an interval is missed (at most --interval seconds per thread). Used to tell what
the emulated nodes' kernel networking and our communicator threads take from the training
threads (docs/benchmarks.md, "Scaling efficiency on two emulated nodes").
"""
import argparse
import json
import os
import subprocess
import sys
import time

TICK = os.sysconf("SC_CLK_TCK")
KINDS = ["user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"]


def machine():
    with open("/proc/stat") as f:
        fields = f.readline().split()[1:1 + len(KINDS)]
    return dict(zip(KINDS, (int(x) / TICK for x in fields)))


def threads(name, seen):
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() != name:
                    continue
            for tid in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{tid}/stat") as f:
                    s = f.read()
                # Fields after the parenthesised name: state is field 3, utime 14, stime 15.
                rest = s[s.rindex(")") + 2:].split()
                cpu = (int(rest[11]) + int(rest[12])) / TICK
                tname = s[s.index("(") + 1:s.rindex(")")]  # the thread's name (common/thread_name.h)
                try:  # run ns, run-queue wait ns, timeslices (absent without CONFIG_SCHEDSTATS)
                    with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                        _, wait_ns, slices = (int(x) for x in f.read().split()[:3])
                except (FileNotFoundError, ValueError):
                    wait_ns, slices = 0, 0
                seen[(int(pid), int(tid))] = (cpu, wait_ns / 1e9, slices, tname)
        except (FileNotFoundError, ProcessLookupError, ValueError):
            continue  # the thread ended between listing and reading


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--name", default="cann-dist-train")
    ap.add_argument("--interval", type=float, default=0.2)
    ap.add_argument("--json")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not cmd:
        ap.error("no command given (put it after --)")
    seen = {}
    before, t0 = machine(), time.monotonic()
    child = subprocess.Popen(cmd)
    while child.poll() is None:
        threads(a.name, seen)
        time.sleep(a.interval)
    wall = time.monotonic() - t0
    after = machine()
    used = {k: round(after[k] - before[k], 2) for k in KINDS}
    procs = {}
    for (pid, tid), (cpu, wait, slices, tname) in seen.items():
        p = procs.setdefault(pid, {"first_thread_s": 0.0, "other_threads_s": 0.0, "threads": 0,
                                   "first_thread_runqueue_s": 0.0, "other_threads_runqueue_s": 0.0,
                                   "first_thread_switches": 0, "other_threads_switches": 0,
                                   "by_name": {}})
        p["threads"] += 1
        who = "first_thread" if pid == tid else "other_threads"
        p[who + "_s"] += cpu
        p[who + "_runqueue_s"] += wait
        p[who + "_switches"] += slices
        # Per thread name: cpu seconds, run-queue seconds, times scheduled in (summed over
        # threads of one name, e.g. torch's pool).
        n = p["by_name"].setdefault("main" if pid == tid else tname, [0.0, 0.0, 0])
        n[0] += cpu
        n[1] += wait
        n[2] += slices
    for p in procs.values():
        p["by_name"] = {k: [round(v[0], 2), round(v[1], 2), v[2]] for k, v in sorted(p["by_name"].items())}
    procs = {pid: {k: round(v, 2) if isinstance(v, float) else v for k, v in p.items()}
             for pid, p in procs.items() if p["first_thread_s"] + p["other_threads_s"] > 0.5}
    report = {"command": cmd, "exit": child.returncode, "wall_s": round(wall, 2), "cpus": os.cpu_count(),
              "machine_s": used, "processes": procs}
    print(json.dumps(report, indent=1), file=sys.stderr)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=1)
    sys.exit(child.returncode)


if __name__ == "__main__":
    main()
