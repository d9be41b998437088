#!/usr/bin/env bash
# torch.distributed send/recv between two ranks on "cdt" against Gloo (bench/peers/torch_p2p.py,
# only --backend changed): ping-pong with tag 0 and a named source, with tag 3, and with receives
# from any source, 4 B - 64 MiB, in rotated order (bench/rotate.sh), medians of REPS runs.
#
#   bash bench/run_p2p_peers.sh [--reps 3] [--max-bytes 67108864]
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=3 MAX=$((64 << 20))
while [ $# -gt 0 ]; do
  case "$1" in
    --reps) REPS=$2; shift 2 ;;
    --max-bytes) MAX=$2; shift 2 ;;
    *) echo "run_p2p_peers: unknown option $1 (see the top of $0)" >&2; exit 2 ;;
  esac
done
[ -f build/python/cann_dist/__init__.py ] || { echo "run_p2p_peers: build first (make build)" >&2; exit 2; }
bash bench/require_torch.sh
export PYTHONPATH=$PWD/build/python OMP_NUM_THREADS=1
out=bench/results/p2p-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"
echo "results in $out"
peer() {  # $1 = backend, $2 = repetition
  /usr/bin/python3 bench/peers/torch_p2p.py --backend "$1" --max-bytes "$MAX" \
    --json "$out/$1_$2.json" > "$out/$1_$2.txt" 2>&1
}
run_cdt() { peer cdt "$1"; }
run_gloo() { peer gloo "$1"; }
source bench/rotate.sh
run_rotated "$REPS" run_cdt run_gloo
/usr/bin/python3 - "$out" <<'PY' | tee "$out/summary.txt"
import collections, glob, json, os, statistics, sys
out = sys.argv[1]
times = collections.defaultdict(list)  # (peer, mode, bytes) -> [one-way us]
for path in glob.glob(f"{out}/*_*.json"):
    peer = os.path.basename(path).rsplit("_", 1)[0]
    for r in json.load(open(path))["results"]:
        times[(peer, r["mode"], r["bytes"])].append(r["one_way_us"])
keys = sorted({(m, b) for _, m, b in times})
print(f"{'mode':10} {'bytes':>10} {'cdt us':>10} {'GB/s':>7} {'gloo us':>10} {'GB/s':>7} {'x':>6}")
for m, b in keys:
    c = statistics.median(times[("cdt", m, b)])
    g = statistics.median(times[("gloo", m, b)])
    print(f"{m:10} {b:>10} {c:10.1f} {b / c / 1e3:7.3f} {g:10.1f} {b / g / 1e3:7.3f} {g / c:6.2f}")
print("one-way time = round trip / 2; x = gloo time / cdt time (> 1: cdt faster); medians of",
      len(times[("cdt", *keys[0])]), "runs")
PY
