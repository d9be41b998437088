#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz, clang-14, ASan + UBSan) in build-fuzz/ and runs each for
# SECONDS (default 60), one after another, from its seed corpus in tests/fuzz/corpus/<target>
# (new inputs go to build-fuzz/corpus/<target>; the repository's seeds are not touched). Prints,
# per target, the inputs run, executions per second and the corpus size; a crash is saved in
# build-fuzz/crashes/ and makes the script exit 1 after the other targets ran.
#   bash scripts/run-fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(store_request peer_hello checkpoint carbon_csv carbon_json carbon_provider rules_file fault_spec idx live_document
           certificate sim_documents etcd_reply dashboard_request arena_header replay_document)
fi
if ! command -v clang++-14 > /dev/null; then
  echo "run-fuzz: clang++-14 is missing (make deps installs clang-14 and libclang-rt-14-dev)" >&2
  exit 1
fi
CC=clang-14 CXX=clang++-14 cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCDT_FUZZ=ON \
  > build-fuzz.configure.log 2>&1 || { cat build-fuzz.configure.log; exit 1; }
cmake --build build-fuzz -j "$(nproc)" --target fuzz_targets
mkdir -p build-fuzz/crashes
failed=0
printf '%-16s %10s %12s %8s  %s\n' target runs exec/s corpus result
for t in "${targets[@]}"; do
  corpus="build-fuzz/corpus/$t"
  mkdir -p "$corpus"
  log="build-fuzz/fuzz_$t.log"
  rc=0
  "build-fuzz/bin/fuzz_$t" -max_total_time="$seconds" -print_final_stats=1 -rss_limit_mb=2048 \
    -timeout=10 -artifact_prefix="build-fuzz/crashes/$t-" "$corpus" "tests/fuzz/corpus/$t" \
    > "$log" 2>&1 || rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  size=$(find "$corpus" -type f | wc -l)
  if [ "$rc" -eq 0 ]; then result=ok; else result="CRASH (rc $rc, $log)"; failed=1; fi
  printf '%-16s %10s %12s %8s  %s\n' "$t" "${runs:-?}" "${rate:-?}" "$size" "$result"
done
exit "$failed"
