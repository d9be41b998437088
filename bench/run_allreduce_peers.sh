#!/usr/bin/env bash
# Allreduce benchmark: cann-dist-train (`auto`, which moves same-node data through shared memory;
# `auto` with CDT_SHM=0, TCP only; every algorithm) beside Open MPI (its default, shared memory, and
# its TCP BTL) and Gloo (ring_chunked, halving_doubling), 4 ranks on this machine, run alternately
# REPS times; bench/summarize.py writes the medians and ratios to docs/benchmarks.md.
#
#   bash bench/run_allreduce_peers.sh [--quick] [--reps N] [--nproc N] [--no-docs]
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/rotate.sh
BIN=${BIN:-build/bin}
REPS=5 NPROC=4 MIN=4096 MAX=$((64 << 20)) DOCS=1 QUICK=0
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=1 REPS=1 MAX=$((16 << 20)); shift ;;
    --reps) REPS=$2; shift 2 ;;
    --nproc) NPROC=$2; shift 2 ;;
    --no-docs) DOCS=0; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
out=bench/results/$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"
mpirun_flags=(--allow-run-as-root --oversubscribe -np "$NPROC")
have_mpi=0; [ -x "$BIN/peer_mpi_allreduce" ] && command -v mpirun >/dev/null && have_mpi=1
have_gloo=0; [ -x "$BIN/peer_gloo_allreduce" ] && have_gloo=1

# One invocation per implementation and repetition, in an order that rotates every repetition, so
# no implementation always runs first (this machine's speed drifts by tens of percent over seconds).
run_cdt_auto() {
  "$BIN/cann-dist-train" bench allreduce --nproc-per-node "$NPROC" --algo auto \
      --min-bytes "$MIN" --max-bytes "$MAX" --json "$out/cdt_$1.json" > "$out/cdt_$1.txt"
}
run_cdt_tcp() {  # `auto` with shared memory off: our TCP transport on the same run
  CDT_SHM=0 "$BIN/cann-dist-train" bench allreduce --nproc-per-node "$NPROC" --algo auto \
      --min-bytes "$MIN" --max-bytes "$MAX" --json "$out/cdttcp_$1.json" > "$out/cdttcp_$1.txt"
}
run_cdt_all() {
  "$BIN/cann-dist-train" bench allreduce --nproc-per-node "$NPROC" --algo all \
      --min-bytes "$MIN" --max-bytes "$MAX" --json "$out/cdtall_$1.json" > "$out/cdtall_$1.txt"
}
run_mpi_tcp() {
  mpirun "${mpirun_flags[@]}" --mca pml ob1 --mca btl self,tcp "$BIN/peer_mpi_allreduce" \
      "$MIN" "$MAX" "$out/mpi_tcp_$1.json" > "$out/mpi_tcp_$1.txt" 2>&1
}
run_mpi_shm() {
  mpirun "${mpirun_flags[@]}" "$BIN/peer_mpi_allreduce" "$MIN" "$MAX" \
      "$out/mpi_shm_$1.json" > "$out/mpi_shm_$1.txt" 2>&1
}
run_gloo() {  # $1 = algorithm, $2 = repetition
  local store
  store=$(mktemp -d)
  "$BIN/cann-dist-train" launch --nproc-per-node "$NPROC" -- "$BIN/peer_gloo_allreduce" \
      "$1" "$store" "$MIN" "$MAX" "$out/gloo_$1_$2.json" > "$out/gloo_$1_$2.txt" 2>&1
  rm -rf "$store"
}
run_gloo_ring() { run_gloo ring_chunked "$1"; }
run_gloo_hd() { run_gloo halving_doubling "$1"; }

steps=(run_cdt_auto run_cdt_tcp)
[ $have_mpi = 1 ] && steps+=(run_mpi_tcp)
[ $have_gloo = 1 ] && steps+=(run_gloo_ring run_gloo_hd)
[ $have_mpi = 1 ] && steps+=(run_mpi_shm)
steps+=(run_cdt_all)
run_rotated "$REPS" "${steps[@]}"
args=("$out")
[ $DOCS = 1 ] && [ $QUICK = 0 ] && args+=(--docs docs/benchmarks.md)
python3 bench/summarize.py "${args[@]}"
