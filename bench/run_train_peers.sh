#!/usr/bin/env bash
# Training throughput: `cann-dist-train train` beside PyTorch DDP (Gloo backend, Debian
# python3-torch) on the same cnn, data order, per-rank batch, optimizer and steps, run alternately
# REPS times in a rotating order; prints the medians (samples/s) and the ratio. With several
# workers per node, also ours with CDT_SHM=0 (same-node ranks over TCP instead of shared memory).
#
#   bash bench/run_train_peers.sh [--nproc 2] [--steps 200] [--batch-size 64] [--reps 3]
#   sudo bash bench/run_train_peers.sh --nodes 2 --link 100mbit   # on tools/emulate-cluster,
#                                                                  # one worker per node
#   [--threads T]  torch threads per worker for every run, the single-worker one included
#                  (default: this machine's cores / all workers, so that the single worker
#                  computes as fast as one of many does: the emulated nodes share these cores)
#   [--extra "ARGS"]  more `train` options for our runs (e.g. --no-overlap-next-forward)
# With --nodes, also one lone worker (the scaling-efficiency denominator) and as many lone workers
# as nodes computing at once, no communication (what the emulated nodes' shared CPU costs).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/require_torch.sh
. bench/rotate.sh
BIN=$(pwd)/${BIN:-build/bin}
NPROC=2 STEPS=200 BATCH=64 REPS=3 NODES=1 LINK= THREADS= EXTRA=
while [ $# -gt 0 ]; do
  case "$1" in
    --nproc) NPROC=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --batch-size) BATCH=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --nodes) NODES=$2; NPROC=1; shift 2 ;;
    --link) LINK=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --extra) EXTRA=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
out=bench/results/train-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"
prefix=()
if [ "$NODES" -gt 1 ]; then
  prefix=(tools/emulate-cluster --nodes "$NODES" ${LINK:+--link "$LINK"} --)
fi
[ -n "$THREADS" ] || THREADS=$(( $(nproc) / (NODES * NPROC) )); [ "$THREADS" -ge 1 ] || THREADS=1
common=(--steps "$STEPS" --batch-size "$BATCH" --seed 1 --threads "$THREADS")
echo "threads per worker: $THREADS" | tee "$out/setup.txt"
run_cdt() {
  "${prefix[@]}" "$BIN/cann-dist-train" train --model cnn --nproc-per-node "$NPROC" "${common[@]}" \
      $EXTRA --no-progress --json "$(pwd)/$out/cdt_$1.json" > "$out/cdt_$1.txt" 2>&1
}
run_cdt_tcp() {  # ours with same-node ranks on TCP only (CDT_SHM=0)
  CDT_SHM=0 "${prefix[@]}" "$BIN/cann-dist-train" train --model cnn --nproc-per-node "$NPROC" \
      "${common[@]}" $EXTRA --no-progress --json "$(pwd)/$out/cdttcp_$1.json" > "$out/cdttcp_$1.txt" 2>&1
}
run_ddp() {
  # PyTorch 1.13's Gloo rendezvous has hung here now and then before the first step: bound each
  # run, keep its output, and try once more.
  local try
  for try in 1 2; do
    timeout --kill-after=10 900 "${prefix[@]}" /usr/bin/python3 "$(pwd)/bench/peers/ddp_baseline.py" \
        --nproc-per-node "$NPROC" "${common[@]}" --json "$(pwd)/$out/ddp_$1.json" \
        > "$out/ddp_$1.txt" 2>&1 && return 0
    mv "$out/ddp_$1.txt" "$out/ddp_$1.failed$try.txt"
    echo "   DDP run $1 failed (kept in $out/ddp_$1.failed$try.txt)"
  done
  return 1
}
run_cdt_single() {  # one worker: the scaling-efficiency denominator
  "$BIN/cann-dist-train" train --model cnn --nproc-per-node 1 "${common[@]}" $EXTRA --no-progress \
      --json "$(pwd)/$out/single_$1.json" > "$out/single_$1.txt" 2>&1
}
run_cdt_concurrent() {  # as many lone workers as nodes, at once: what sharing this CPU costs
  local k pids=()
  for k in $(seq 1 "$NODES"); do
    "$BIN/cann-dist-train" train --model cnn --nproc-per-node 1 "${common[@]}" $EXTRA --no-progress \
        --json "$(pwd)/$out/concurrent_$1_$k.json" > "$out/concurrent_$1_$k.txt" 2>&1 &
    pids+=($!)
  done
  for k in "${pids[@]}"; do wait "$k"; done
}
steps=(run_cdt run_ddp)
[ "$NPROC" -gt 1 ] && steps+=(run_cdt_tcp)
[ "$NODES" -gt 1 ] && steps+=(run_cdt_single run_cdt_concurrent)
run_rotated "$REPS" "${steps[@]}"
python3 - "$out" "$((NODES * NPROC))" <<'PY'
import glob, json, os, statistics, sys
d, workers = sys.argv[1], int(sys.argv[2])
def med(prefix, key):
    v = [json.load(open(p))[key] for p in sorted(glob.glob(os.path.join(d, prefix + "_*.json")))]
    return statistics.median(v) if v else float("nan"), len(v)
cdt, n = med("cdt", "samples_per_s")
ddp, _ = med("ddp", "samples_per_s")
print(f"results in {d}; medians of {n}")
print(f"| workers | cann-dist-train samples/s | PyTorch DDP samples/s | ratio |")
print(f"|---:|---:|---:|---:|")
print(f"| {workers} | {cdt:.1f} | {ddp:.1f} | {cdt / ddp:.2f}x |")
tcp, t = med("cdttcp", "samples_per_s")
if t:
    print(f"cann-dist-train with CDT_SHM=0 (same-node ranks over TCP): {tcp:.1f} samples/s; "
          f"shared memory / TCP {cdt / tcp:.2f}x")
single, m = med("single", "samples_per_s")
if m:
    print(f"single worker: {single:.1f} samples/s; scaling efficiency cdt {cdt / (workers * single):.2f}, "
          f"DDP {ddp / (workers * single):.2f}")
concurrent, c = med("concurrent", "samples_per_s")
if c:
    print(f"lone workers computing at once on this machine: {concurrent:.1f} samples/s each "
          f"({concurrent / single:.2f}x one alone): the emulated nodes share its cores")
    print(f"against {workers} x that (no communication at all, same sharing): cdt {cdt / (workers * concurrent):.2f}, "
          f"DDP {ddp / (workers * concurrent):.2f}")
def per_step(prefix):  # medians over runs of forward + backward and comm wait, ms per step
    runs = [json.load(open(p)) for p in glob.glob(os.path.join(d, prefix + "_*.json"))]
    if not runs:
        return None
    fb = statistics.median(1e3 * (r["step_time"]["forward_s"] + r["step_time"]["backward_s"]) / r["steps"] for r in runs)
    cw = statistics.median(1e3 * r["step_time"]["comm_wait_s"] / r["steps"] for r in runs)
    return fb, cw
for who in ("single", "concurrent", "cdt"):
    v = per_step(who)
    if v:
        print(f"{who}: forward + backward {v[0]:.1f} ms/step, comm wait {v[1]:.1f} ms/step (medians)")
for who in ("cdt", "ddp"):
    runs = [json.load(open(p)) for p in glob.glob(os.path.join(d, who + "_*.json"))]
    o = [r["comm"]["overlap_ratio"] for r in runs if "overlap_ratio" in r.get("comm", {})]
    w = [r["sync_wait_fraction"] for r in runs if "sync_wait_fraction" in r]
    if o and w:
        print(f"{who}: overlap_ratio median {statistics.median(o):.2f}, "
              f"sync_wait_fraction median {statistics.median(w):.2f}")
PY
