#!/usr/bin/env bash
# Installs the Debian packages cann-dist-train needs, only those missing (idempotent; quick when
# nothing is missing). Run as root, or with sudo available. Set CDT_SKIP_DEPS=1 to skip entirely.
# --bench also installs what only the benchmarks need (numpy for the DDP baseline's data, mpi4py
# for Open MPI called from Python).
set -euo pipefail

[ "${CDT_SKIP_DEPS:-0}" = "1" ] && exit 0

packages=(
  build-essential cmake pkg-config ccache
  googletest libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev nlohmann-json3-dev libfmt-dev libsodium-dev
  libopenmpi-dev openmpi-bin libgloo-dev
  iproute2 python3 zlib1g-dev libeigen3-dev liblz4-dev libzstd-dev libcpp-httplib-dev etcd-server
  libssl-dev openssl  # the dashboard's HTTPS (--tls-cert/--tls-key) and its test's certificate
  libtorch-dev dataset-fashion-mnist
  # The Python front end (src/python, python/cann_dist; docs/python.md) and its tests
  python3-dev python3-torch python3-pybind11 python3-pytest
  python3-venv  # scripts/install-torch.sh: PyTorch 2.x from PyPI in a virtual environment
  python3-wheel  # pip wheel . without build isolation (tests/packaging/install_test.sh)
  # The dashboard's end-to-end test (tests/dashboard): the page in headless Chromium over the
  # DevTools protocol, /metrics read by the Prometheus client's own parser
  chromium python3-websocket python3-prometheus-client
  # make fuzz / CI's fuzz run: libFuzzer with ASan and UBSan
  clang-14 libclang-rt-14-dev
  # Debian's libtorch calls the generic libblas.so.3; without an optimised one that is netlib's
  # reference BLAS and the cnn trains 1.9x slower (docs/benchmarks.md). The OpenMP build, not the
  # pthread one: it follows torch::set_num_threads, where the pthread build starts a thread per
  # core in every worker however many workers share the machine.
  libopenblas0-openmp
)
# mpi4py: Open MPI from Python, a peer of bench/run_collectives_peers.sh.
[ "${1:-}" = "--bench" ] && packages+=(python3-numpy python3-mpi4py)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" != "0" ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "install-deps: missing packages (${missing[*]}) and not root; install them or run as root" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
# Update the package lists once if they are empty or older than a day.
if [ -z "$(ls -A /var/lib/apt/lists 2>/dev/null | grep -v lock)" ] || \
   [ -n "$(find /var/lib/apt/lists -maxdepth 0 -mmin +1440 2>/dev/null)" ]; then
  $SUDO apt-get update -qq
fi
if ! $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"; then
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
