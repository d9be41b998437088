#!/usr/bin/env bash
# Allreduce on the emulated cluster (tools/emulate-cluster, needs root): cann-dist-train (every
# algorithm, and `auto` on its own) beside Gloo ring_chunked and halving_doubling, REPS times in a
# rotating order; prints medians of algbw (the issue's metric) with bench/summarize.py.
#
#   sudo bash bench/run_emulated_peers.sh [--nodes 2] [--nproc 2 | --nproc-list 1,3] [--link 1gbit]
#                                         [--link-of I=RATE] [--reps 3] [--max-bytes 64M]
#                                         [--steps "run_cdt_auto run_cdt_tcp ..."]
#
# run_cdt_tcp is `auto` with CDT_SHM=0: the same-node steps over TCP instead of shared memory.
#
# `auto` runs with --adaptive-comm (topology planner + online autotuning); the strategy cache lives
# in the results folder, so the first run of a configuration probes and the later ones reuse it
# (the fingerprint cannot see tc shaping, so a shared cache could hand one link setting's plan to
# another).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/rotate.sh
BIN=$(pwd)/${BIN:-build/bin}
NODES=2 NPROC=2 NPROC_LIST= LINK=1gbit REPS=3 MIN=4096 MAX=$((64 << 20))
link_of=()
steps=()
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) NODES=$2; shift 2 ;;
    --nproc) NPROC=$2; shift 2 ;;
    --nproc-list) NPROC_LIST=$2; shift 2 ;;
    --link) LINK=$2; shift 2 ;;
    --link-of) link_of+=(--link-of "$2"); shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --max-bytes) MAX=$2; shift 2 ;;
    --min-bytes) MIN=$2; shift 2 ;;
    --steps) read -ra steps <<< "$2"; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
out=bench/results/emulated-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"
cluster=(tools/emulate-cluster --nodes "$NODES" --link "$LINK" "${link_of[@]}" --)
nproc_args=(--nproc-per-node "$NPROC")
if [ -n "${NPROC_LIST:-}" ]; then
  # Unequal ranks per node: each node takes its entry of the list (the launcher reads
  # CDT_NPROC_PER_NODE when --nproc-per-node is absent).
  export NPROC_LIST
  cluster+=(bash -c 'IFS=, read -ra n <<< "$NPROC_LIST"; export CDT_NPROC_PER_NODE=${n[$CDT_NODE_RANK]}; exec "$@"' _)
  nproc_args=()
fi
adaptive=(--adaptive-comm --cache-dir "$(pwd)/$out/strategies")
run_cdt_auto() {
  "${cluster[@]}" "$BIN/cann-dist-train" bench allreduce "${nproc_args[@]}" --algo auto "${adaptive[@]}" \
      --min-bytes "$MIN" --max-bytes "$MAX" --json "$(pwd)/$out/cdt_$1.json" > "$out/cdt_$1.txt" 2>&1
}
run_cdt_tcp() {
  CDT_SHM=0 "${cluster[@]}" "$BIN/cann-dist-train" bench allreduce "${nproc_args[@]}" --algo auto \
      "${adaptive[@]}" --min-bytes "$MIN" --max-bytes "$MAX" --json "$(pwd)/$out/cdttcp_$1.json" \
      > "$out/cdttcp_$1.txt" 2>&1
}
run_cdt_all() {
  "${cluster[@]}" "$BIN/cann-dist-train" bench allreduce "${nproc_args[@]}" --algo all "${adaptive[@]}" \
      --min-bytes "$MIN" --max-bytes "$MAX" --json "$(pwd)/$out/cdtall_$1.json" > "$out/cdtall_$1.txt" 2>&1
}
run_gloo() {  # $1 algorithm, $2 repetition; node 0's rank 0 writes the JSON
  local store
  store=$(mktemp -d)
  "${cluster[@]}" "$BIN/cann-dist-train" launch "${nproc_args[@]}" -- \
      "$BIN/peer_gloo_allreduce" "$1" "$store" "$MIN" "$MAX" "$(pwd)/$out/gloo_$1_$2.json" \
      > "$out/gloo_$1_$2.txt" 2>&1
  rm -rf "$store"
}
run_gloo_ring() { run_gloo ring_chunked "$1"; }
run_gloo_hd() { run_gloo halving_doubling "$1"; }
[ -n "${steps[*]:-}" ] || steps=(run_cdt_auto run_cdt_tcp run_gloo_ring run_gloo_hd run_cdt_all)
run_rotated "$REPS" "${steps[@]}"
python3 bench/summarize.py "$out" --metric algbw_GBps
