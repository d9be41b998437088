#!/usr/bin/env bash
# Compression where the network is the bottleneck: tools/emulate-cluster, 2 nodes x 1 worker on
# a slow link (default 20 Mbit/s), the cnn on Fashion-MNIST, per-rank batch 64, evaluated every
# 50 steps until 88% test accuracy. Runs, in one go: our uncompressed run, our `--compress
# adaptive` run, PyTorch DDP with its fp16_compress_hook, and one worker alone (the scaling-
# efficiency denominator, same threads per worker). Needs root.
#
#   sudo bash bench/run_compression_emulated.sh [--link 20mbit] [--target 0.88] [--max-steps 1500]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/require_torch.sh
BIN=$(pwd)/${BIN:-build/bin}
LINK=20mbit TARGET=0.88 MAX_STEPS=1500 BATCH=64 EVERY=50
while [ $# -gt 0 ]; do
  case "$1" in
    --link) LINK=$2; shift 2 ;;
    --target) TARGET=$2; shift 2 ;;
    --max-steps) MAX_STEPS=$2; shift 2 ;;
    --batch-size) BATCH=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
out=bench/results/compress-emulated-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"
THREADS=$(( $(nproc) / 2 )); [ "$THREADS" -ge 1 ] || THREADS=1
common=(--steps "$MAX_STEPS" --batch-size "$BATCH" --seed 1 --threads "$THREADS" --eval-every "$EVERY"
        --target-accuracy "$TARGET")
echo "results in $out; link $LINK, $THREADS thread(s) per worker"
emu=(tools/emulate-cluster --nodes 2 --link "$LINK" --)
run() {  # name, command...
  local name=$1; shift
  echo "== $name"
  "$@" > "$out/$name.txt" 2>&1 || echo "   $name failed: see $out/$name.txt"
  tail -n 3 "$out/$name.txt" | sed 's/^/   /'
}
run adaptive "${emu[@]}" "$BIN/cann-dist-train" train --model cnn --nproc-per-node 1 "${common[@]}" \
    --compress adaptive --no-progress --json "$(pwd)/$out/adaptive.json"
run ddp_fp16 timeout 1800 "${emu[@]}" /usr/bin/python3 "$(pwd)/bench/peers/ddp_baseline.py" --nproc-per-node 1 \
    "${common[@]}" --fp16-hook --json "$(pwd)/$out/ddp_fp16.json"
run single "$BIN/cann-dist-train" train --model cnn --nproc-per-node 1 --steps 300 --batch-size "$BATCH" \
    --seed 1 --threads "$THREADS" --no-progress --json "$(pwd)/$out/single.json"
run none "${emu[@]}" "$BIN/cann-dist-train" train --model cnn --nproc-per-node 1 "${common[@]}" \
    --no-progress --json "$(pwd)/$out/none.json"
python3 - "$out" <<'PY'
import json, os, sys
d = sys.argv[1]
def load(n):
    p = os.path.join(d, n + ".json")
    return json.load(open(p)) if os.path.exists(p) else None
a, n, f, s = load("adaptive"), load("none"), load("ddp_fp16"), load("single")
def t(r): return r and r.get("time_to_target_s")
print("| run | time to target (s) | steps | samples/s | test accuracy | volume reduction |")
print("|---|---:|---:|---:|---:|---:|")
for name, r in (("ours, uncompressed", n), ("ours, adaptive", a), ("PyTorch DDP, fp16 hook", f)):
    if not r: continue
    vr = r.get("compression", {}).get("volume_reduction")
    print(f"| {name} | {t(r) if t(r) is not None else 'not reached'} | {r['steps']} | {r['samples_per_s']:.1f} | "
          f"{r['test_accuracy']:.4f} | {'' if vr is None else f'{100 * vr:.1f}%'} |")
if a and n and t(a) and t(n): print(f"adaptive / uncompressed time to target: {t(a) / t(n):.2f}")
if a and f: print(f"adaptive / DDP fp16 throughput: {a['samples_per_s'] / f['samples_per_s']:.2f}x")
if a and s: print(f"single worker {s['samples_per_s']:.1f} samples/s; adaptive scaling efficiency "
                  f"{a['samples_per_s'] / (2 * s['samples_per_s']):.2f}")
if a: print("adaptive phases:", a["compression"]["phases"])
PY
