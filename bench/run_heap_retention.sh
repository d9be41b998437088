#!/usr/bin/env bash
# What keeping freed heap memory in each worker buys (common/heap_retention.h, the default) against
# glibc's defaults (`train --use-default-allocator`): the cnn on Fashion-MNIST, one run of each
# alternated REPS times, on one worker and on NPROC workers of this machine. Per run: training
# throughput, evaluation seconds, and from GNU time over the whole job (agent and workers): wall,
# kernel seconds, minor page faults and the largest resident set of any one process.
#
#   bash bench/run_heap_retention.sh [--reps 5] [--steps 300] [--batch-size 64] [--nproc 4]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$(pwd)/${BIN:-build/bin}
REPS=5 STEPS=300 BATCH=64 NPROC=4
while [ $# -gt 0 ]; do
  case "$1" in
    --reps) REPS=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --batch-size) BATCH=$2; shift 2 ;;
    --nproc) NPROC=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
[ -x /usr/bin/time ] || { echo "needs GNU time (Debian package time)" >&2; exit 2; }
out=bench/results/heap-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"
for i in $(seq 1 "$REPS"); do
  for n in 1 "$NPROC"; do
    for mode in kept default; do
      extra=(); [ "$mode" = kept ] || extra=(--use-default-allocator)
      /usr/bin/time -o "$out/time_${n}_${mode}_$i.txt" -f '{"wall_s": %e, "sys_s": %S, "user_s": %U, "minflt": %R, "maxrss_kb": %M}' \
        "$BIN/cann-dist-train" train --model cnn --nproc-per-node "$n" --steps "$STEPS" --batch-size "$BATCH" \
        --seed 1 --no-progress "${extra[@]}" --json "$(pwd)/$out/train_${n}_${mode}_$i.json" \
        > "$out/train_${n}_${mode}_$i.txt" 2>&1
    done
  done
done
python3 - "$out" "$NPROC" <<'PY'
import glob, json, statistics, sys
d, nproc = sys.argv[1], sys.argv[2]
print(f"results in {d}")
print("| workers | allocator | samples/s | forward + backward s | evaluation s | job wall s | kernel s | minor faults | largest RSS MB |")
print("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
for n in ["1", nproc]:
    med = {}
    for mode in ["kept", "default"]:
        rows = []
        for p in sorted(glob.glob(f"{d}/train_{n}_{mode}_*.json")):
            i = p.rsplit("_", 1)[1][:-5]
            t, r = json.load(open(f"{d}/time_{n}_{mode}_{i}.txt")), json.load(open(p))
            st = r["step_time"]
            rows.append([r["samples_per_s"], st["forward_s"] + st["backward_s"], r["eval_s"],
                         t["wall_s"], t["sys_s"], t["minflt"], t["maxrss_kb"] / 1024])
        med[mode] = [statistics.median(c) for c in zip(*rows)]
        per = " / ".join(f"{x[0]:.0f}" for x in rows)
        m = med[mode]
        print(f"| {n} | {mode} | {m[0]:.1f} ({per}) | {m[1]:.2f} | {m[2]:.2f} | {m[3]:.1f} | {m[4]:.2f} | "
              f"{m[5]:.0f} | {m[6]:.0f} |")
    k, g = med["kept"], med["default"]
    print(f"| {n} | kept / default | {k[0] / g[0]:.3f}x | {k[1] / g[1]:.3f}x | {k[2] / g[2]:.3f}x | "
          f"{k[3] / g[3]:.3f}x | {k[4] / g[4]:.3f}x | {k[5] / g[5]:.3f}x | {k[6] / g[6]:.3f}x |")
PY
