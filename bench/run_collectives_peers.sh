#!/usr/bin/env bash
# torch.distributed's all_to_all_single (uneven splits), reduce_scatter_tensor and
# all_gather_into_tensor on "cdt" against Gloo (bench/peers/torch_collectives.py, only --backend
# changed) and against Open MPI's MPI_Alltoallv / MPI_Reduce_scatter_block / MPI_Allgather over TCP
# and over its shared memory (bench/peers/mpi_collectives.cc), on this machine, in rotated order
# (bench/rotate.sh), medians of REPS. Issue 42's target: cdt >= 1.0x each peer, 4 ranks,
# 1 KiB - 64 MiB. The engine's own calls from C++ (bench/peers/cdt_collectives.cc) run beside them
# ("cdtcpp"), and a second table sets them against Open MPI's, C++ against C++; Open MPI called from
# Python through mpi4py (bench/peers/mpi4py_collectives.py, "mpi4py_shm") sets the Python calls
# against Open MPI as a Python user reaches it.
#
#   bash bench/run_collectives_peers.sh [--reps 3] [--nproc 4] [--min-bytes 1024] [--max-bytes 67108864]
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=3 NPROC=4 MIN=1024 MAX=$((64 << 20))
while [ $# -gt 0 ]; do
  case "$1" in
    --reps) REPS=$2; shift 2 ;;
    --nproc) NPROC=$2; shift 2 ;;
    --min-bytes) MIN=$2; shift 2 ;;
    --max-bytes) MAX=$2; shift 2 ;;
    *) echo "run_collectives_peers: unknown option $1 (see the top of $0)" >&2; exit 2 ;;
  esac
done
BIN=build/bin
[ -f build/python/cann_dist/__init__.py ] || { echo "run_collectives_peers: build first (make build)" >&2; exit 2; }
bash bench/require_torch.sh
export PYTHONPATH=$PWD/build/python OMP_NUM_THREADS=1
out=bench/results/collectives-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"
echo "results in $out"
mpirun_flags=(--allow-run-as-root --oversubscribe -np "$NPROC")
have_mpi=0; [ -x "$BIN/peer_mpi_collectives" ] && command -v mpirun >/dev/null && have_mpi=1
torch_peer() {  # $1 = backend, $2 = repetition
  /usr/bin/python3 bench/peers/torch_collectives.py --backend "$1" --nproc-per-node "$NPROC" \
    --min-bytes "$MIN" --max-bytes "$MAX" --json "$out/$1_$2.json" > "$out/$1_$2.txt" 2>&1
}
run_cdt() { torch_peer cdt "$1"; }
run_gloo() { torch_peer gloo "$1"; }
run_mpi_tcp() {
  mpirun "${mpirun_flags[@]}" --mca pml ob1 --mca btl self,tcp "$BIN/peer_mpi_collectives" \
    "$MIN" "$MAX" "$out/mpi_tcp_$1.json" > "$out/mpi_tcp_$1.txt" 2>&1
}
run_mpi_shm() {
  mpirun "${mpirun_flags[@]}" "$BIN/peer_mpi_collectives" "$MIN" "$MAX" \
    "$out/mpi_shm_$1.json" > "$out/mpi_shm_$1.txt" 2>&1
}
# Open MPI's shared memory as a Python user calls it (mpi4py), beside torch.distributed's calls.
run_mpi4py_shm() {
  mpirun "${mpirun_flags[@]}" -x OMP_NUM_THREADS=1 /usr/bin/python3 bench/peers/mpi4py_collectives.py \
    "$MIN" "$MAX" "$out/mpi4py_shm_$1.json" > "$out/mpi4py_shm_$1.txt" 2>&1
}
# The engine itself from C++ (bench/peers/cdt_collectives.cc), under its own launcher.
run_cdtcpp() {
  build/bin/cann-dist-train launch --nproc-per-node "$NPROC" -- "$BIN/cdt_collectives" "$MIN" "$MAX" \
    "$out/cdtcpp_$1.json" > "$out/cdtcpp_$1.txt" 2>&1
}
steps=(run_cdt run_gloo)
[ -x "$BIN/cdt_collectives" ] && steps+=(run_cdtcpp)
[ $have_mpi = 1 ] && steps+=(run_mpi_tcp run_mpi_shm)
if [ $have_mpi = 1 ] && /usr/bin/python3 -c 'import mpi4py' 2>/dev/null; then
  steps+=(run_mpi4py_shm)
else
  echo "run_collectives_peers: no mpi4py (scripts/install-deps.sh --bench installs it): no Open MPI from Python column" >&2
fi
source bench/rotate.sh
run_rotated "$REPS" "${steps[@]}"
/usr/bin/python3 - "$out" <<'PY' | tee "$out/summary.txt"
import collections, glob, json, os, statistics, sys
out = sys.argv[1]
times = collections.defaultdict(list)  # (peer, op, bytes) -> [us]
refused = {}
for path in glob.glob(f"{out}/*_*.json"):
    peer = os.path.basename(path).rsplit("_", 1)[0]
    doc = json.load(open(path))
    for r in doc["results"]:
        times[(peer, r["op"], r["bytes"])].append(r["time_us"])
    for op, why in doc.get("unsupported", {}).items():
        refused[(peer, op)] = why
peers = sorted({p for p, _, _ in times} - {"cdt"})
ops = sorted({(o, b) for _, o, b in times}, key=lambda x: (x[0], x[1]))
print(f"{'op':24} {'bytes':>10} {'cdt us':>10} " + " ".join(f"{p + ' us':>12} {'x':>5}" for p in peers))
for op, b in ops:
    c = statistics.median(times[("cdt", op, b)])
    cells = []
    for p in peers:
        if not times[(p, op, b)]:
            cells.append(f"{'refused':>12} {'-':>5}")
            continue
        m = statistics.median(times[(p, op, b)])
        cells.append(f"{m:12.1f} {m / c:5.2f}")
    print(f"{op:24} {b:>10} {c:10.1f} " + " ".join(cells))
print("x = peer time / cdt time (> 1: cdt faster); medians of", len(times[("cdt", *ops[0])]), "runs")
for (p, op), why in sorted(refused.items()):
    print(f"{p} refuses {op}: {why}")
# The engine from C++ against Open MPI from C++: the same calls without Python in between.
if any(p == "cdtcpp" for p, _, _ in times):
    mpis = [p for p in peers if p.startswith("mpi_")]
    print()
    print(f"{'op':24} {'bytes':>10} {'cdt C++ us':>11} " + " ".join(f"{p + ' us':>12} {'x':>5}" for p in mpis))
    for op, b in ops:
        if not times[("cdtcpp", op, b)]:
            continue
        c = statistics.median(times[("cdtcpp", op, b)])
        cells = []
        for p in mpis:
            m = statistics.median(times[(p, op, b)])
            cells.append(f"{m:12.1f} {m / c:5.2f}")
        print(f"{op:24} {b:>10} {c:11.1f} " + " ".join(cells))
    print("x = Open MPI time / the engine's C++ time (> 1: the engine faster)")
PY
