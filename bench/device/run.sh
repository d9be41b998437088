#!/usr/bin/env bash
# Issue 43's accelerator checks in one run (docs/device.md), for a machine with a GPU:
#   1. builds the engine with CUDA (no libtorch needed) in build-device;
#   2. the GPU tests (make test-gpu's binary): every dtype and op, world sizes 1-4 sharing the GPU,
#      the stream-order test;
#   3. bench allreduce, 2 and 4 ranks, buffers on the GPU (staged) and on the CPU, --check;
#   4. torch's Gloo all_reduce of CUDA tensors, the same ranks and sizes (the reference), when a
#      CUDA torch is importable.
# Raw results go to $OUT (the device tool's folder) or bench/device/results. Where apt cannot
# install libsodium and cpp-httplib, run bench/device/prepare.sh on a Debian machine first and
# carry bench/device/sysroot. Each step's log is kept; a failing step does not stop the others.
#
#   bash bench/device/run.sh            # about 5 minutes on one H200 with 16 cores
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-bench/device/results}
BUILD=${BUILD:-build-device}
BUILD_TYPE=${BUILD_TYPE:-Release}
MAX=${MAX_BYTES:-256M}
mkdir -p "$OUT"
sysroot=$PWD/bench/device/sysroot
if [ -d "$sysroot" ]; then
  export PKG_CONFIG_PATH=$sysroot/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
  export LD_LIBRARY_PATH=$sysroot/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
cmake_extra=()
if [ -d "$sysroot" ] && [ ! -f /usr/include/openssl/ssl.h ]; then
  cmake_extra+=(-DOPENSSL_ROOT_DIR="$sysroot/usr")
fi
step() { echo "== $1 ($(date +%T))"; }
status=0

step "machine"
{ nvidia-smi; nproc; free -g; nvcc --version | tail -1; } > "$OUT/machine.txt" 2>&1
head -20 "$OUT/machine.txt"

step "build"
if ! { cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE="$BUILD_TYPE" -DCMAKE_DISABLE_FIND_PACKAGE_Torch=ON \
         -DCMAKE_DISABLE_FIND_PACKAGE_pybind11=ON -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON \
         "${cmake_extra[@]}" &&
       cmake --build "$BUILD" -j "$(nproc)" --target cann-dist-train cdt_gpu_tests; } \
     > "$OUT/build.log" 2>&1; then
  tail -30 "$OUT/build.log"
  echo "run.sh: the build failed ($OUT/build.log)"
  exit 1
fi
grep -E "CUDA" "$OUT/build.log" | head -3

step "GPU tests"
"$BUILD/bin/cdt_gpu_tests" --gtest_output="json:$OUT/gpu_tests.json" > "$OUT/gpu_tests.txt" 2>&1 ||
  status=1
grep -E "^\[  (PASSED|FAILED|SKIPPED) |FAILED  \]" "$OUT/gpu_tests.txt"

for n in 2 4; do
  for device in cuda cpu; do
    step "bench allreduce, $n ranks, buffers on $device"
    "$BUILD/bin/cann-dist-train" bench allreduce --nproc-per-node "$n" --device "$device" \
      --min-bytes 64K --max-bytes "$MAX" --check --json "$OUT/cdt_${n}_${device}.json" \
      > "$OUT/cdt_${n}_${device}.txt" 2>&1 || status=1
    grep -v "^\[rank" "$OUT/cdt_${n}_${device}.txt" | tail -9
  done
  step "torch Gloo all_reduce of CUDA tensors, $n ranks"
  if python3 -c 'import torch; assert torch.cuda.is_available()' 2> /dev/null; then
    timeout 600 python3 bench/device/torch_cuda_allreduce.py --backend gloo --nproc-per-node "$n" \
      --max-bytes $(( $(numfmt --from=iec "$MAX") )) --json "$OUT/gloo_${n}_cuda.json" \
      > "$OUT/gloo_${n}_cuda.txt" 2>&1 || status=1
    tail -9 "$OUT/gloo_${n}_cuda.txt"
  else
    echo "no CUDA torch for python3: the Gloo reference is left out"
  fi
done
echo "run.sh: done, status $status; raw results in $OUT"
exit $status
