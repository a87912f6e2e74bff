#!/usr/bin/env bash
# make gpu-check, in two phases, because the GPU machine has no Go toolchain:
#
#   scripts/gpu-check.sh build [DIR]   here: builds the gpu test binary (-tags gpu),
#                                      bin/agent and bin/camera, and packs them with
#                                      this script (and the cached ONNX Runtime library
#                                      when the agent run is on) into DIR (default bin/gpu-check)
#   DIR/gpu-check.sh run [RESULTS]     there, from the packed folder, needing only
#                                      the binaries: device info, the GPU tests, the
#                                      GPU voxel benchmark and (once the agent has a
#                                      GPU path, or GPU_CHECK_AGENT=1) a 20 s agent run;
#                                      prints everything and writes it to RESULTS
#                                      (default DIR/gpu-check-results.txt)
#
# The run phase exits non-zero when any step fails; a missing GPU makes the
# tests fail (they never skip).
set -uo pipefail

phase="${1:-}"
case "$phase" in
build)
	set -e
	cd "$(dirname "$0")/.."
	out="${2:-bin/gpu-check}"
	go="${GO:-go}"
	rm -rf "$out"
	mkdir -p "$out/gpu" "$out/lib"
	# The test binary runs with gpu/ as its working directory, like go test.
	"$go" test -c -tags gpu -o "$out/gpu/gpu.test" ./gpu
	cp -r gpu/kernels "$out/gpu/"
	"$go" build -o "$out/" ./cmd/agent ./cmd/camera
	cp scripts/gpu-check.sh "$out/"
	# The ONNX Runtime library (~50 MB) only for the agent run (see run).
	if "$out/agent" -h 2>&1 | grep -qiE -- '-gpu\b' || [ "${GPU_CHECK_AGENT:-0}" = 1 ]; then
		ort="$(find .cache/ort -name libonnxruntime.so.1 2>/dev/null | sort -V | tail -n 1 || true)"
		if [ -n "$ort" ]; then cp "$ort" "$out/lib/"; fi
	fi
	git rev-parse HEAD >"$out/COMMIT" 2>/dev/null || echo unknown >"$out/COMMIT"
	git status --short >>"$out/COMMIT" 2>/dev/null || true
	echo "gpu-check: packed $(du -sh "$out" | cut -f1) in $out; on the GPU machine run: $out/gpu-check.sh run"
	;;
run)
	cd "$(dirname "$0")"
	results="${2:-$PWD/gpu-check-results.txt}"
	status=0
	step() { # step NAME COMMAND...: runs, records the exit status
		local name="$1"
		shift
		echo
		echo "==== $name: $*"
		"$@"
		local rc=$?
		echo "==== $name: exit $rc"
		[ "$rc" -eq 0 ] || status=1
	}
	{
		echo "zerohop gpu-check $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname)"
		echo "commit: $(head -n 1 COMMIT 2>/dev/null)"
		uname -a
		if command -v nvidia-smi >/dev/null; then
			nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv || true
		else
			echo "nvidia-smi: not found"
		fi
		(
			cd gpu || exit 1
			step "device info" ./gpu.test -test.run '^TestOpen$' -test.v -test.count=1
			step "gpu tests" ./gpu.test -test.run 'TestGPU' -test.v -test.count=1 -test.timeout=5m
			step "gpu voxel benchmark" ./gpu.test -test.run '^$' -test.bench 'BenchmarkGPUVoxel' -test.benchmem -test.count=5 -test.timeout=5m
			exit "$status"
		) || status=1
		if ./agent -h 2>&1 | grep -qiE -- '-gpu\b' || [ "${GPU_CHECK_AGENT:-0}" = 1 ]; then
			export ZEROHOP_ORT_LIB="${ZEROHOP_ORT_LIB:-$PWD/lib/libonnxruntime.so.1}"
			http=127.0.0.1:9391
			(sleep 18 && { curl -fsS "http://$http/latency" || echo "(could not read /latency)"; } ) &
			step "agent, synthetic scene, 20 s" ./agent --camera synthetic --duration 20s --http "$http" --log-level warn
			wait
		else
			echo
			echo "==== agent run: skipped (the agent has no GPU path yet; GPU_CHECK_AGENT=1 runs it anyway)"
		fi
		echo
		echo "gpu-check: $([ "$status" -eq 0 ] && echo PASS || echo FAIL)"
		exit "$status"
	} 2>&1 | tee "$results"
	rc="${PIPESTATUS[0]}"
	echo "gpu-check: results in $results"
	exit "$rc"
	;;
*)
	echo "usage: $0 build [DIR] | run [RESULTS]" >&2
	exit 2
	;;
esac
