# zerohop build. Every target installs what it needs, idempotently
# (scripts/deps.sh: npm if missing, then the pinned ONNX Runtime library).
SHELL := /bin/bash
GO    ?= go
BIN   := bin
# An absolute cache folder: the tests run in their package folders, where a
# relative ZEROHOP_CACHE would name another place than the fetch scripts'.
# override: a ZEROHOP_CACHE given on make's command line would win otherwise.
ifneq ($(ZEROHOP_CACHE),)
override ZEROHOP_CACHE := $(abspath $(ZEROHOP_CACHE))
export ZEROHOP_CACHE
endif

.PHONY: all build test vet fmt-check deps ort ros2-gen models models-check demo bench bench-pool bench-handoff bench-e2e bench-voxel bench-sensor fuzz

all: build

deps:
	@scripts/deps.sh

ort:
	scripts/ort/fetch.sh

# The shipped binaries speak ROS 2 (build tag ros2) when libddsc is present.
build: deps
	$(GO) build $$(pkg-config --exists CycloneDDS 2>/dev/null && echo -tags ros2) -o $(BIN)/ ./cmd/...

vet:
	$(GO) vet ./...

# git must list the files: with none, gofmt would read stdin (a silent pass
# or a hang), e.g. in a clone git refuses as of dubious ownership.
fmt-check:
	@all="$$(git ls-files -co --exclude-standard '*.go')" || { echo "fmt-check: git ls-files failed (not a git checkout, or one git refuses?)"; exit 1; }; \
	files=""; for f in $$all; do [ -e "$$f" ] && files="$$files $$f"; done; \
	[ -n "$$files" ] || { echo "fmt-check: git lists no Go files"; exit 1; }; \
	out="$$(gofmt -l $$files </dev/null)" || exit 1; \
	if [ -n "$$out" ]; then echo "gofmt: these files need formatting:"; echo "$$out"; exit 1; fi

# The fake-CUDA step runs those tests again without -race, with the GPU
# path's overlapped-preprocessing test: allocation counts through the real
# CUDA binding, and across the overlap's goroutine, are only meaningful
# there; so is the count of every allocation over many CPU-path frames.
test: deps vet fmt-check
	ZEROHOP_REQUIRE_ORT=1 ZEROHOP_REQUIRE_ROS2=1 $(GO) test -race -timeout 10m $$($(GO) list ./... | grep -v '/gpu$$')
	# The gpu package alone: its fake-CUDA tests run an OS thread per
	# emulated CUDA thread (a load of 40+ on 2 cores), which starved the
	# agent's end-to-end tests beside them past their 200 ms watchdog.
	ZEROHOP_REQUIRE_ORT=1 ZEROHOP_REQUIRE_ROS2=1 $(GO) test -race -timeout 10m ./gpu/
	$(GO) vet -tags ros2 ./ros2/... ./camera/... ./cmd/...
	ZEROHOP_REQUIRE_ORT=1 ZEROHOP_REQUIRE_ROS2=1 $(GO) test -tags ros2 -race -timeout 5m ./ros2/... ./camera/... ./cmd/agent/ ./cmd/camera/
	$(GO) vet -tags gpu ./gpu/ ./agent/
	ZEROHOP_REQUIRE_ORT=1 $(GO) test -count=1 -run 'FakeCUDA|^TestGPUPath(PreprocessesWhileTheGPUFilters|FrameAllocatesNothing)$$|^TestPipelineFramesAllocateNothingOverMany$$' ./gpu/ ./agent/
	$(GO) vet -tags cudaemu ./gpu/
	# The kernels' BEV cell sort on the CUDA emulation (the rest: make test-cudaemu).
	$(GO) test -tags cudaemu -count=1 -run 'Emulated/reversed' ./gpu/
	@$(MAKE) --no-print-directory test-cuda-libs
	@$(MAKE) --no-print-directory test-arm64

# Jetson is arm64, and nothing else here is. Cross-build every command as
# Dockerfile.jetson does but without the ros2 tag (that needs an arm64
# libddsc), then run the core packages' tests (pool, handoff, voxel,
# planner, sensors, telemetry, the GPU binding's no-GPU paths) as arm64
# binaries under qemu-user. The
# emulation runs on this x86 host's stronger memory order, so it checks
# arm64 code and layouts, not arm64 reordering (see pinned/generations.go
# for that argument). TestSharedSegmentAcrossProcesses re-executes its own
# binary, which needs binfmt_misc: it runs natively above. gpu/ is
# dynamically linked (purego), hence the cross libc's loader (-L).
# Last, the GPU binding's calls through purego under arm64's calling
# convention (cuLaunchKernel's 11 arguments put 3 on the stack), against
# the fake driver built for arm64: only the FakeCUDA tests with few kernel
# launches, as the fake runs a std::thread per CUDA thread and qemu-user
# keeps memory for every thread it ran (RegisteredReadOnlyInput peaks at
# 2.2 GB; the voxel comparisons would take tens).
ARM64_TESTS = ./pinned/ ./handles/... ./planner/ ./voxel/ ./monotime/ ./internal/team/ ./telemetry/ ./sensor/... ./gpu/
ARM64_FAKECUDA = ^TestFakeCUDA(OutParametersSurviveStackMoves|NVRTCNeedsItsBuiltins|NVRTCFoundInTheToolkitFolder|ModuleLoadCarriesTheJITLog|DriverSkipsANewerNVRTC|CubinCacheSkipsNVRTC|RegisteredReadOnlyInput)$$
ARM64_EXEC = qemu-aarch64 -L /usr/aarch64-linux-gnu
.PHONY: test-arm64
test-arm64:
	@scripts/deps.sh arm64 >/dev/null
	@out=$$(mktemp -d); trap 'rm -rf $$out' EXIT; \
	GOARCH=arm64 CGO_ENABLED=1 CC=aarch64-linux-gnu-gcc $(GO) build -o $$out/ ./cmd/... && \
	[ "$$(od -An -tx1 -j18 -N2 $$out/agent | tr -d ' \n')" = b700 ] && echo "test-arm64: cross-built $$(ls $$out | tr '\n' ' ')for arm64"
	GOARCH=arm64 CGO_ENABLED=0 $(GO) vet $(ARM64_TESTS)
	GOARCH=arm64 CGO_ENABLED=0 $(GO) test -count=1 -timeout 5m -exec '$(ARM64_EXEC)' \
		-skip '^TestSharedSegmentAcrossProcesses$$|FakeCUDA' $(ARM64_TESTS)
	@out=$$(ZEROHOP_FAKECUDA_CXX=aarch64-linux-gnu-g++ GOARCH=arm64 CGO_ENABLED=0 $(GO) test -count=1 -timeout 5m \
		-exec '$(ARM64_EXEC)' -run '$(ARM64_FAKECUDA)' -v ./gpu/ 2>&1); rc=$$?; \
	grep -E '^(--- |ok|FAIL|panic)' <<<"$$out"; [ $$rc -eq 0 ] || { echo "$$out" | tail -40; exit $$rc; }; \
	n=$$(grep -c '^--- PASS' <<<"$$out"); [ $$n -eq 7 ] || { echo "test-arm64: $$n of the 7 fake-driver tests passed on arm64"; exit 1; }

# The GPU binding against NVIDIA's real libcuda.so.1 and NVRTC from Debian
# non-free (12: driver 535 + NVRTC 11.8; 13: driver 550 + NVRTC 12.4), on a
# machine without a GPU: the kernels compiled for sm_70…sm_90 and their
# cubins read back, every symbol, the no-GPU start-up, the error names
# (gpu/reallibs_test.go, agent/reallibs_test.go). Elsewhere than Debian 12
# it says NOT RUN.
CUDA_DEBIAN = $${ZEROHOP_CACHE:-$(CURDIR)/.cache}/cuda-debian
CUDA_LIBS = $(CUDA_DEBIAN)/bookworm/lib:$(CUDA_DEBIAN)/trixie/lib
.PHONY: test-cuda-libs
test-cuda-libs:
	@rc=0; scripts/cuda-libs/fetch.sh || rc=$$?; \
	if [ $$rc -eq 3 ]; then echo "test-cuda-libs: NOT RUN: the real CUDA libraries come from Debian 12's archive"; exit 0; fi; \
	[ $$rc -eq 0 ] || exit $$rc
	$(GO) vet -tags cudalibs ./gpu/ ./agent/
	ZEROHOP_REQUIRE_ORT=1 ZEROHOP_CUDA_LIBS=$(CUDA_LIBS) $(GO) test -tags cudalibs -count=1 -run '^TestReal' ./gpu/ ./agent/

ros2-gen:
	ros2/idl/gen.sh

models:
	@/usr/bin/python3 -c 'import onnx' 2>/dev/null || { echo "make models: needs python3-onnx (apt-get install -y python3-onnx)"; exit 1; }
	/usr/bin/python3 models/gen_reference.py
	/usr/bin/python3 infer/testdata/gen_testdata.py

models-check:
	@/usr/bin/python3 -c 'import onnx, numpy' 2>/dev/null || { echo "make models-check: needs python3-onnx and python3-numpy (apt-get install -y python3-onnx python3-numpy)"; exit 1; }
	@tmp=$$(mktemp -d); rc=0; /usr/bin/python3 models/gen_reference.py --out $$tmp >/dev/null || rc=$$?; \
	if [ $$rc -eq 0 ]; then for f in reference.onnx reference.json reference_lidar.onnx reference_lidar.json reference_scan.onnx reference_scan.json; do \
		cmp models/$$f $$tmp/$$f || rc=1; done; fi; \
	[ $$rc -eq 0 ] || echo "make models-check: models/ differs from what models/gen_reference.py writes (make models regenerates it)"; \
	rm -rf $$tmp; exit $$rc

demo: build
	scripts/demo.sh

bench: build
	scripts/bench.sh

bench-handoff:
	$(GO) build -o $(BIN)/bench-handoff ./cmd/bench-handoff
	$(BIN)/bench-handoff --runs 3 --spin --pin-cpu 0 --out docs/bench-handoff.md

bench-e2e: build
	$(BIN)/bench-e2e --seconds $${BENCH_SECONDS:-60} --out docs/bench-e2e.md

bench-pool:
	$(GO) test -run '^$$' -bench . -benchmem -count 5 ./pinned/

bench-voxel:
	$(GO) test -run '^$$' -bench . -benchmem -count 5 -cpu 1,2 ./voxel/

bench-sensor:
	$(GO) test -run '^$$' -bench 'BenchmarkSynthetic(Points|Image)$$' -benchmem -cpu 1 -count 5 ./sensor/

fuzz:
	$(GO) test ./handles -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime 60s
	$(GO) test ./handles -run '^$$' -fuzz '^FuzzRelease$$' -fuzztime 30s
	$(GO) test ./handles/transport -run '^$$' -fuzz '^FuzzControlMessages$$' -fuzztime 30s
	$(GO) test -run '^$$' -fuzz FuzzParseHeader -fuzztime 60s ./sensor/internal/pcd/
	$(GO) test -run '^$$' -fuzz '^FuzzROS2Messages$$' -fuzztime 60s ./camera/

# Docker (no engine on the build machines: `make docker-check` runs the static
# and local-process checks of docker/; the images are built where Docker runs).
.PHONY: docker-build docker-up docker-down docker-logs docker-jetson-build docker-jetson-up docker-check
DOCKER_COMPOSE ?= docker compose
COMPOSE_X86    := -f docker/compose.yaml
COMPOSE_JETSON := -f docker/compose.yaml -f docker/compose.jetson.yaml

docker-build:
	$(DOCKER_COMPOSE) $(COMPOSE_X86) build
docker-up:
	$(DOCKER_COMPOSE) $(COMPOSE_X86) up --build -d
	$(DOCKER_COMPOSE) $(COMPOSE_X86) ps
docker-down:
	$(DOCKER_COMPOSE) $(COMPOSE_X86) down
docker-logs:
	$(DOCKER_COMPOSE) $(COMPOSE_X86) logs -f
docker-jetson-build:
	$(DOCKER_COMPOSE) $(COMPOSE_JETSON) build
docker-jetson-up:
	$(DOCKER_COMPOSE) $(COMPOSE_JETSON) up --build -d
docker-check: deps
	ZEROHOP_REQUIRE_ORT=1 ZEROHOP_REQUIRE_ROS2=1 $(GO) test -count=1 ./docker/

# GPU: build here, run on a machine with an NVIDIA GPU (no Go toolchain needed there):
#   make gpu-check && bin/gpu-check/gpu-check.sh run
.PHONY: gpu-check gpu-check-run gpu-check-rehearse test-cudaemu
gpu-check:
	scripts/gpu-check.sh build $(BIN)/gpu-check
gpu-check-run: gpu-check
	$(BIN)/gpu-check/gpu-check.sh run $(BIN)/gpu-check/gpu-check-results.txt
# The run phase here, on the FAKE driver (gpu/fakecuda) with its quick tests:
# checks the script before a GPU session spends time on it; proves nothing
# about a GPU. nvidia-smi fails here by design.
gpu-check-rehearse: gpu-check
	$(GO) test -count=1 -run '^TestBuildFakeCUDAForRehearsal$$' ./gpu/ -args -fakecuda-dir=$(CURDIR)/$(BIN)/fakecuda
	LD_LIBRARY_PATH=$(CURDIR)/$(BIN)/fakecuda GPU_CHECK_REHEARSAL=1 $(BIN)/gpu-check/gpu-check.sh run $(BIN)/gpu-check/rehearsal-results.txt
# The kernels on a host emulation of CUDA (g++): checks the algorithm, not the GPU.
test-cudaemu:
	$(GO) test -tags cudaemu -count=1 -run Emulated ./gpu/
