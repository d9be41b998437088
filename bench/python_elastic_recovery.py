#!/usr/bin/python3
"""kill -9 of one of 4 workers of examples/python/elastic_train.py: in-process recovery under
`cann-dist-train launch --elastic` against torchrun's restart of the same script (which resumes
from the checkpoint the script saves every --checkpoint-every steps), alternated, one kill per run.
(torchrun 1.13 on Python 3.11 needs `--redirects 1 --tee 2` to start at all.)

  PYTHONPATH=build/python /usr/bin/python3 bench/python_elastic_recovery.py --reps 5 \
      --json bench/results/python_elastic_recovery.json

Per run: seconds from the kill (this script's clock, the moment kill(2) returned) to the next
step completed by the group after it (the first line of rank 0's step log written by a new
generation, or by a restarted process), steps redone, the job's wall time and test accuracy;
and one uninterrupted run for the accuracy the interrupted ones are compared with."""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "python", "elastic_train.py")


def read_log(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip().endswith("}")]


def workers(root_pid):
    """pid -> environment of the python3 workers under `root_pid`."""
    out = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().split(b"\0")
            if not any(c.endswith(b"elastic_train.py") for c in cmd) or int(pid) == root_pid:
                continue
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
            out[int(pid)] = {k.decode(): v.decode() for k, v in env.items()}
        except (OSError, ValueError):
            continue
    return out


def one_run(kind, a, kill_step, victim, tmp):
    log = os.path.join(tmp, f"{kind}-steps.jsonl")
    res = os.path.join(tmp, f"{kind}-result.json")
    ckpt = os.path.join(tmp, f"{kind}-ckpt")
    shutil.rmtree(ckpt, ignore_errors=True)
    for f in (log, res):
        if os.path.exists(f):
            os.remove(f)
    script = [sys.executable, EXAMPLE, "--steps", str(a.steps), "--step-log", log, "--json", res]
    if kind == "cdt":
        cmd = [a.cli, "launch", "--elastic", "--nproc-per-node", "4", "--spares", "1", "--"] + script
    else:
        cmd = ["torchrun", "--standalone", "--nproc_per_node", "4", "--max_restarts", "3",
               "--monitor_interval", str(a.monitor_interval), "--redirects", "1", "--tee", "2"] + script[1:] + \
              ["--checkpoint", ckpt, "--checkpoint-every", str(a.checkpoint_every)]
    env = dict(os.environ, OMP_NUM_THREADS="1", CDT_AUTOTUNE="0")
    start = time.time()
    errfile = open(os.path.join(tmp, f"{kind}-stderr.txt"), "w+")
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=errfile, text=True,
                         start_new_session=True)
    t_kill = None
    before = None
    while p.poll() is None:
        entries = read_log(log)
        if t_kill is None and entries and entries[-1]["step"] >= kill_step:
            target = [pid for pid, e in workers(p.pid).items()
                      if e.get("RANK") == str(victim) and e.get("CDT_SPARE") != "1"]
            if target:
                before = entries[-1]
                os.kill(target[0], signal.SIGKILL)
                t_kill = time.time()
        if time.time() - start > a.timeout:
            os.killpg(p.pid, signal.SIGKILL)
            raise SystemExit(f"{kind}: run did not finish in {a.timeout} s")
        time.sleep(0.01)
    errfile.seek(0)
    err = errfile.read()
    if p.returncode != 0 or not os.path.exists(res):
        raise SystemExit(f"{kind}: exit {p.returncode}\n{err[-3000:]}")
    entries = read_log(log)
    with open(res) as f:
        result = json.load(f)
    out = {"kind": kind, "wall_s": time.time() - start, "test_accuracy": result["test_accuracy"],
           "world_at_end": result["world_size"]}
    if t_kill is not None:
        after = [e for e in entries if e["t"] > t_kill and
                 (e["generation"] > before["generation"] or e["pid"] != before["pid"])]
        out.update(kill_step=before["step"], victim=victim,
                   kill_to_next_step_s=after[0]["t"] - t_kill if after else None,
                   resumed_at_step=after[0]["step"] if after else None,
                   steps_redone=before["step"] - (after[0]["step"] - 1) if after else None)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--checkpoint-every", type=int, default=20)
    p.add_argument("--monitor-interval", type=float, default=0.1,
                   help="torchrun's (its default is 5 s; 0.1 is as generous to it as "
                        "bench/run_elastic_recovery.sh)")
    p.add_argument("--cli", default=os.path.join(ROOT, "build", "bin", "cann-dist-train"))
    p.add_argument("--timeout", type=float, default=300)
    p.add_argument("--json")
    a = p.parse_args()
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        base = one_run("cdt", a, kill_step=10 ** 9, victim=None, tmp=tmp)
        print(f"uninterrupted: accuracy {base['test_accuracy']:.4f}, {base['wall_s']:.1f} s", flush=True)
        for rep in range(a.reps):
            kill_step = 90 + 25 * rep
            victim = 1 + rep % 3
            for kind in (("cdt", "torchrun") if rep % 2 == 0 else ("torchrun", "cdt")):
                r = one_run(kind, a, kill_step, victim, tmp)
                r["rep"] = rep
                runs.append(r)
                print(json.dumps(r), flush=True)
    summary = {"uninterrupted": base, "runs": runs}
    for kind in ("cdt", "torchrun"):
        mine = [r for r in runs if r["kind"] == kind and r.get("kill_to_next_step_s") is not None]
        summary[kind] = {
            "median_kill_to_next_step_s": statistics.median(r["kill_to_next_step_s"] for r in mine),
            "median_steps_redone": statistics.median(r["steps_redone"] for r in mine),
            "median_wall_s": statistics.median(r["wall_s"] for r in mine),
            "accuracy": [r["test_accuracy"] for r in mine],
            "max_accuracy_gap_pp": max(abs(r["test_accuracy"] - base["test_accuracy"]) for r in mine) * 100,
        }
        print(kind, json.dumps(summary[kind]), flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(summary, f, indent=1)


if __name__ == "__main__":
    main()
