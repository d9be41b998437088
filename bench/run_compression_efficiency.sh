#!/usr/bin/env bash
# Scaling efficiency of compressed training on a slow link: `train --compress adaptive` on
# tools/emulate-cluster (2 nodes x 1 worker) alternated with one worker alone, REPS times;
# efficiency = median throughput / (2 x median single-worker throughput). Two controls in every
# repetition: two lone workers computing at once, no communication (what sharing this machine's
# cores costs by itself), and the same two emulated nodes training *uncompressed on an unshaped
# link* (what synchronous data parallelism costs here with the fastest network there is: the
# ceiling compression can bring a slow link back to). Needs root.
#
# With --cpus-per-node C each emulated node is bound to C CPUs of its own (tools/emulate-cluster
# --cpus-per-node), as a real node has, and every lone worker is bound the same way (one alone to
# node 0's CPUs; the two at once to node 0's and node 1's); torch threads default to C. Without
# it all runs share all CPUs and threads default to half of them. Needs 2C CPUs: on a 2-vCPU VM
# C = 1 leaves each node's communication one core shared with its compute.
#
# With --ddp [RANK] the peer is measured in the same repetitions, the same way: PyTorch DDP
# (bench/peers/ddp_baseline.py, Gloo) alone, on the two nodes over this link with PyTorch's
# powerSGD_hook at RANK (default 2, our stable phase's rank here; compressing from its third step,
# the earliest the hook allows: our adaptive run compresses from its first; the model in one DDP
# bucket, as the hook only runs reliably over Gloo that way: ddp_baseline.py), and on the two nodes
# uncompressed on an unshaped link. Needs python3-torch (scripts/install-deps.sh --bench).
#
#   sudo bash bench/run_compression_efficiency.sh [--link 20mbit] [--batch-size 64] [--steps 300]
#                                                 [--reps 3] [--compress adaptive]
#                                                 [--cpus-per-node C] [--threads T] [--ddp [RANK]]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$(pwd)/${BIN:-build/bin}
LINK=20mbit BATCH=64 STEPS=300 REPS=3 COMPRESS=adaptive CPUS=0 THREADS=0 DDP=0
while [ $# -gt 0 ]; do
  case "$1" in
    --link) LINK=$2; shift 2 ;;
    --batch-size) BATCH=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --compress) COMPRESS=$2; shift 2 ;;
    --cpus-per-node) CPUS=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --ddp) DDP=2; shift; if [[ ${1:-} =~ ^[0-9]+$ ]]; then DDP=$1; shift; fi ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
[ "$DDP" = 0 ] || source bench/require_torch.sh
out=bench/results/compress-eff-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"
if [ "$THREADS" = 0 ]; then
  THREADS=$CPUS; [ "$CPUS" -gt 0 ] || THREADS=$(( $(nproc) / 2 )); [ "$THREADS" -ge 1 ] || THREADS=1
fi
bind=(); [ "$CPUS" = 0 ] || bind=(--cpus-per-node "$CPUS")
printf 'link=%s batch=%s steps=%s compress=%s cpus_per_node=%s threads=%s ddp_powersgd_rank=%s\n' "$LINK" \
    "$BATCH" "$STEPS" "$COMPRESS" "$CPUS" "$THREADS" "$DDP" > "$out/setup.txt"
common=(--model cnn --nproc-per-node 1 --steps "$STEPS" --batch-size "$BATCH" --seed 1 --threads "$THREADS" --no-progress)
ddp=(/usr/bin/python3 "$(pwd)/bench/peers/ddp_baseline.py" --nproc-per-node 1 --steps "$STEPS" --batch-size "$BATCH"
     --seed 1 --threads "$THREADS")
# A worker alone, not part of any job: on the node-0 CPUs when nodes are bound.
alone() {  # alone JSON TXT [COMMAND... (default: ours)]
  local json=$1 txt=$2; shift 2
  [ $# -gt 0 ] || set -- "$BIN/cann-dist-train" train "${common[@]}"
  if [ "$CPUS" = 0 ]; then
    "$@" --json "$json" > "$txt" 2>&1
  else
    tools/emulate-cluster --nodes 1 "${bind[@]}" -- "$@" --json "$json" > "$txt" 2>&1
  fi
}
for i in $(seq 1 "$REPS"); do
  tools/emulate-cluster --nodes 2 --link "$LINK" "${bind[@]}" -- "$BIN/cann-dist-train" train "${common[@]}" \
      --compress "$COMPRESS" --json "$(pwd)/$out/compressed_$i.json" > "$out/compressed_$i.txt" 2>&1
  alone "$(pwd)/$out/single_$i.json" "$out/single_$i.txt"
  tools/emulate-cluster --nodes 2 "${bind[@]}" -- "$BIN/cann-dist-train" train "${common[@]}" \
      --compress none --json "$(pwd)/$out/unshaped_$i.json" > "$out/unshaped_$i.txt" 2>&1
  if [ "$CPUS" = 0 ]; then
    for k in 1 2; do
      "$BIN/cann-dist-train" train "${common[@]}" --json "$(pwd)/$out/concurrent_${i}_$k.json" \
          > "$out/concurrent_${i}_$k.txt" 2>&1 &
    done
    wait
  else  # two separate one-worker jobs at once, each on its node's CPUs (no CDT_* job variables)
    tools/emulate-cluster --nodes 2 "${bind[@]}" -- sh -c 'exec env -u CDT_NNODES -u CDT_NODE_RANK \
        -u CDT_RDZV_ENDPOINT -u CDT_NODE_ADDR -u CDT_JOB_SECRET "$0" train "$@" \
        --json "'"$(pwd)/$out"'/concurrent_'"$i"'_$((CDT_NODE_RANK + 1)).json" \
        > "'"$(pwd)/$out"'/concurrent_'"$i"'_$((CDT_NODE_RANK + 1)).txt" 2>&1' \
        "$BIN/cann-dist-train" "${common[@]}"
  fi
  if [ "$DDP" != 0 ]; then  # a failed peer run is reported and left out, not fatal
    tools/emulate-cluster --nodes 2 --link "$LINK" "${bind[@]}" -- "${ddp[@]}" --powersgd-rank "$DDP" --powersgd-start 2 \
        --json "$(pwd)/$out/ddp_compressed_$i.json" > "$out/ddp_compressed_$i.txt" 2>&1 ||
        echo "ddp_compressed_$i failed: see $out/ddp_compressed_$i.txt" | tee -a "$out/failed.txt"
    alone "$(pwd)/$out/ddp_single_$i.json" "$out/ddp_single_$i.txt" "${ddp[@]}" ||
        echo "ddp_single_$i failed: see $out/ddp_single_$i.txt" | tee -a "$out/failed.txt"
    tools/emulate-cluster --nodes 2 "${bind[@]}" -- "${ddp[@]}" \
        --json "$(pwd)/$out/ddp_unshaped_$i.json" > "$out/ddp_unshaped_$i.txt" 2>&1 ||
        echo "ddp_unshaped_$i failed: see $out/ddp_unshaped_$i.txt" | tee -a "$out/failed.txt"
  fi
done
python3 - "$out" <<'PY'
import glob, json, os, statistics, sys
d = sys.argv[1]
c = [json.load(open(p))["samples_per_s"] for p in sorted(glob.glob(d + "/compressed_*.json"))]
s = [json.load(open(p))["samples_per_s"] for p in sorted(glob.glob(d + "/single_*.json"))]
print(f"results in {d}")
print("compressed, 2 workers:", ", ".join(f"{x:.1f}" for x in c))
print("single worker:        ", ", ".join(f"{x:.1f}" for x in s))
w = [json.load(open(p))["samples_per_s"] for p in sorted(glob.glob(d + "/concurrent_*.json"))]
print("two lone workers at once, each:", ", ".join(f"{x:.1f}" for x in w))
u = [json.load(open(p))["samples_per_s"] for p in sorted(glob.glob(d + "/unshaped_*.json"))]
print("uncompressed, 2 workers, unshaped link:", ", ".join(f"{x:.1f}" for x in u))
print(f"scaling efficiency (medians): {statistics.median(c) / (2 * statistics.median(s)):.3f}")
unshaped = statistics.median(u) / (2 * statistics.median(s))
print(f"uncompressed on an unshaped link, its scaling efficiency: {unshaped:.3f}; "
      f"compressed on this link against it: {statistics.median(c) / statistics.median(u):.3f} "
      f"(per repetition: {', '.join(f'{a / b:.2f}' for a, b in zip(c, u))})")
shared = statistics.median(w) / statistics.median(s)
print(f"against two lone workers at once (no communication, same sharing): "
      f"{statistics.median(c) / (2 * statistics.median(w)):.3f}; their own ratio to one alone "
      f"{shared:.3f}")
if shared < 0.95 or unshaped < 0.95:
    # The criterion is about nodes with cores of their own; say when this machine cannot show it.
    print(f"note: with no communication at all two workers here ran at {shared:.2f}x one alone, and "
          f"uncompressed training on an unshaped link scaled {unshaped:.2f}: the emulated nodes share "
          f"{os.cpu_count()} CPUs, so their communication work (helper threads, the kernel's network "
          f"stack) runs on the cores that compute, and the efficiency above measures this machine as "
          f"much as the engine (docs/benchmarks.md, 'Where it stands'); on a machine with 2C CPUs, "
          f"--cpus-per-node C with --threads below C gives each node cores of its own with room for "
          f"its communication")
dc = [json.load(open(p))["samples_per_s"] for p in sorted(glob.glob(d + "/ddp_compressed_*.json"))]
if os.path.exists(d + "/failed.txt"):
    print("failed runs, left out:", open(d + "/failed.txt").read().strip().replace("\n", "; "))
if dc:
    ds = [json.load(open(p))["samples_per_s"] for p in sorted(glob.glob(d + "/ddp_single_*.json"))]
    du = [json.load(open(p))["samples_per_s"] for p in sorted(glob.glob(d + "/ddp_unshaped_*.json"))]
    print("PyTorch DDP, powerSGD_hook, 2 workers:", ", ".join(f"{x:.1f}" for x in dc))
    print("PyTorch DDP, single worker:           ", ", ".join(f"{x:.1f}" for x in ds))
    print("PyTorch DDP, uncompressed, 2 workers, unshaped link:", ", ".join(f"{x:.1f}" for x in du))
    print(f"PyTorch DDP scaling efficiency (medians): powerSGD_hook on this link "
          f"{statistics.median(dc) / (2 * statistics.median(ds)):.3f}; uncompressed on an unshaped link "
          f"{statistics.median(du) / (2 * statistics.median(ds)):.3f}")
    print(f"ours / PyTorch DDP throughput on this link: {statistics.median(c) / statistics.median(dc):.2f}x")
PY
