# README's two commands: `make demo` and `make test`. Both install what is missing, configure and
# build. `make bench` runs the benchmarks against OpenMPI and Gloo (long; not part of CI).
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=RelWithDebInfo

.PHONY: deps configure build test test-torch2 test-gpu demo bench asan asan-unit tsan fuzz clean format

deps:
	@bash scripts/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD) $(CMAKE_FLAGS) > $(BUILD).configure.log 2>&1 || (cat $(BUILD).configure.log; exit 1)

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j 1 --timeout 900

# PyTorch 2.x from PyPI (scripts/install-torch.sh; Debian's is 1.13): the trainer, the "cdt" backend
# and the Python front end built against it in build-torch$(TORCH2), then the tests that touch
# torch: the Python front end's (every collective against Gloo, DDP and its hooks, elastic, FSDP
# where torch has it), the trainer's libtorch units, and the trainer end to end. CI runs it.
TORCH2 ?= 2.11.0
# Only the targets below are built there: the tests of the other binaries are not registered.
# packaging installs this tree as users do (cmake --install, a wheel into a fresh environment with
# this torch). CI leaves out the trainer's end-to-end binaries (cdt_train_tests, the custom-model
# example) and the install targets, with their tests.
TORCH2_SKIP ?= emulated_cluster|dashboard_browser|_NOT_BUILT
TORCH2_TARGETS ?= cdt_python cann-dist-train cdt_train_unit_tests cdt_train_tests cdt_example_custom_model \
    cann-dashboard cdt
test-torch2: deps
	@py=$$(bash scripts/install-torch.sh $(TORCH2)) && \
	  cmake -S . -B build-torch$(TORCH2) $(CMAKE_FLAGS) -DCDT_TORCH_PYTHON=$$py \
	  > build-torch$(TORCH2).configure.log 2>&1 || (cat build-torch$(TORCH2).configure.log; exit 1)
	@cmake --build build-torch$(TORCH2) -j $(JOBS) --target $(TORCH2_TARGETS)
	cd build-torch$(TORCH2) && ctest --output-on-failure -j 1 --timeout 900 -E '$(TORCH2_SKIP)'

# The GPU tests (tests/gpu, docs/device.md): collectives on CUDA memory, world sizes 1-4 sharing
# cuda:0. Built wherever the CUDA toolkit is (make test builds them; CI compiles and links them
# without a GPU); each test skips, naming what it needs, where no GPU is. bench/device/run.sh runs
# them with the device benchmarks on an accelerator machine.
test-gpu: build
	@if [ -x $(BUILD)/bin/cdt_gpu_tests ]; then $(BUILD)/bin/cdt_gpu_tests; \
	else echo "make test-gpu: $(BUILD)/bin/cdt_gpu_tests was not built: it needs the CUDA toolkit (nvcc and the CUDA runtime; $(BUILD).configure.log says what CMake found)"; fi

# A short 4-worker training run of the cnn on Fashion-MNIST (about a minute here), the carbon-aware
# plan of a day-long job on California's 2022 grid, then the allreduce benchmark beside its peers
# (short run).
demo: configure
	@cmake --build $(BUILD) -j $(JOBS) --target demo_binaries
	$(BUILD)/bin/cann-dist-train train --model cnn --dataset fashion-mnist --nproc-per-node 4 \
	    --steps 300 --batch-size 32 --eval-every 150 --energy-windows
	$(BUILD)/bin/cann-dist-train green --plan-only --trace knowledge_base/carbon_traces/CISO_2022.csv \
	    --start 2022-03-14T05:00:00Z --job-hours 24 --deadline 72 --workers 4 --min-workers 1 --max-workers 8 \
	    --power-kw 1.2 --strategy elastic
	@bash bench/run_allreduce_peers.sh --quick --no-docs

bench: build
	@bash scripts/install-deps.sh --bench
	@bash bench/run_allreduce_peers.sh

# Sanitizer builds: ASan+UBSan for everything, TSan for the communication tests.
asan:
	@$(MAKE) test BUILD=build-asan CMAKE_FLAGS="-DCMAKE_BUILD_TYPE=Debug -DCDT_SANITIZE=address"

# ASan + UBSan (-fno-sanitize-recover) of the unit tests, then of a subset of the multi-process
# integration tests (real processes over TCP and shared memory, killed and stopped for real; the
# binaries without libtorch, so the trainer's tests stay out): what CI runs after make test.
# Of the allreduce sweep's seven world sizes, 2 and 3 ranks run under ASan (a power of two and
# not: the same code as 1, 4, 5, 7 and 8, which took four of the unit tests' minutes at -O0).
ASAN_SWEEP = WorldSizes/CollectivesTest.AllreduceEveryAlgorithmTypeAndCount
ASAN_UNIT_SKIP ?= $(ASAN_SWEEP)/p1:$(ASAN_SWEEP)/p4:$(ASAN_SWEEP)/p5:$(ASAN_SWEEP)/p7:$(ASAN_SWEEP)/p8
ASAN_INTEGRATION ?= FailureDetection.*:Launcher.BadLaunchOptions*:Launcher.AWrapping*:Launcher.BenchAllreduceAllAlgorithmsChecked:Launcher.EncryptedBench*:Launcher.FirstFailure*:HostileNetwork.AnIdleConnectionFlood*:HostileNetwork.NoProcess*:WorldSizes/SweepTest.*/p3:WorldSizes/SmallMessageBench.*/p4
asan-unit: deps
	@cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DCDT_SANITIZE=address \
	    -DCMAKE_DISABLE_FIND_PACKAGE_Torch=ON -DCMAKE_DISABLE_FIND_PACKAGE_pybind11=ON > /dev/null
	@cmake --build build-asan -j $(JOBS) --target cdt_unit_tests cdt_integration_tests cdt_test_worker cann-dist-train
	cd build-asan && ASAN_OPTIONS=detect_leaks=1 ./bin/cdt_unit_tests --gtest_filter='-$(ASAN_UNIT_SKIP)'
	cd build-asan && ASAN_OPTIONS=detect_leaks=1 ./bin/cdt_integration_tests --gtest_filter='$(ASAN_INTEGRATION)'

# Every libFuzzer target of tests/fuzz for FUZZ_SECONDS each (scripts/run-fuzz.sh).
FUZZ_SECONDS ?= 60
fuzz: deps
	@bash scripts/run-fuzz.sh $(FUZZ_SECONDS)

tsan: deps
	@cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DCDT_SANITIZE=thread > /dev/null
	@cmake --build build-tsan -j $(JOBS) --target cdt_tsan_tests
	cd build-tsan && ./bin/cdt_tsan_tests --gtest_filter='Communicator.*:PointToPoint.*:TcpStore.*:HostileStore.*:MemoryStore.*:MalformedInput.*:*BroadcastAllgather*p3:*Hierarchical*:Compress.*:Allreduce.*:NodeArena.*'

format:
	@clang-format -i $$(git ls-files '*.cc' '*.h')

clean:
	rm -rf $(BUILD) build-asan build-tsan build-fuzz
