#!/usr/bin/env bash
# Two builds of cann-dist-train, one training command, alternated: what a change buys, measured
# in the same hour (this machine's speed moves by ±7% between runs, more than most changes).
# Repetition i runs A then B when i is odd, B then A when even. Prints, per build, the median
# samples/s (and every run's), the median communication wait and forward + backward time.
# Under tools/emulate-cluster with --link (needs root), on this machine with --link loopback;
# --cpus-per-node C binds each emulated node to C CPUs of its own (tools/emulate-cluster).
#
#   bash bench/ab_binaries.sh --a OLD/cann-dist-train --b NEW/cann-dist-train [--reps 6]
#        [--link loopback|20mbit|...] [--cpus-per-node C] -- TRAIN ARGS...
# e.g. build the parent commit in a clone (cmake -S . -B build && cmake --build build --target
# cann-dist-train), then
#   sudo bash bench/ab_binaries.sh --a ../old/build/bin/cann-dist-train --b build/bin/cann-dist-train \
#        --link 20mbit -- --model cnn --nproc-per-node 1 --steps 300 --batch-size 64 --seed 1 --threads 1 --compress adaptive
set -euo pipefail
cd "$(dirname "$0")/.."
A="" B="" REPS=6 LINK=loopback CPUS=0
while [ $# -gt 0 ]; do
  case "$1" in
    --a) A=$(realpath "$2"); shift 2 ;;
    --b) B=$(realpath "$2"); shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --link) LINK=$2; shift 2 ;;
    --cpus-per-node) CPUS=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "ab_binaries: unknown option $1 (see the top of $0)" >&2; exit 2 ;;
  esac
done
[ -x "$A" ] && [ -x "$B" ] || { echo "ab_binaries: --a and --b must name two cann-dist-train binaries" >&2; exit 2; }
bind=(); [ "$CPUS" = 0 ] || bind=(--cpus-per-node "$CPUS")
[ "$CPUS" = 0 ] || [ "$LINK" != loopback ] || { echo "ab_binaries: --cpus-per-node needs an emulated --link" >&2; exit 2; }
out=bench/results/ab-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"
printf 'a=%s\nb=%s\nlink=%s\ncpus_per_node=%s\nargs=%s\n' "$A" "$B" "$LINK" "$CPUS" "$*" > "$out/setup.txt"
for i in $(seq 1 "$REPS"); do
  order="a b"; [ $((i % 2)) = 0 ] && order="b a"
  for v in $order; do
    bin=$A; [ "$v" = b ] && bin=$B
    if [ "$LINK" = loopback ]; then
      "$bin" train "$@" --no-progress --json "$(pwd)/$out/$v-$i.json" > "$out/$v-$i.txt" 2>&1
    else
      tools/emulate-cluster --nodes 2 --link "$LINK" "${bind[@]}" -- "$bin" train "$@" --no-progress \
          --json "$(pwd)/$out/$v-$i.json" > "$out/$v-$i.txt" 2>&1
    fi
  done
done
python3 - "$out" <<'PY'
import glob, json, statistics, sys
d = sys.argv[1]
print(f"results in {d}")
for v in ("a", "b"):
    js = [json.load(open(p)) for p in sorted(glob.glob(f"{d}/{v}-*.json"))]
    t = [j["samples_per_s"] for j in js]
    w = [j["step_time"]["comm_wait_s"] for j in js]
    c = [j["step_time"]["forward_s"] + j["step_time"]["backward_s"] for j in js]
    print(f"{v}: samples/s median {statistics.median(t):.1f} ({' / '.join(f'{x:.1f}' for x in t)}); "
          f"comm wait median {statistics.median(w):.2f} s; forward + backward median {statistics.median(c):.2f} s")
PY
