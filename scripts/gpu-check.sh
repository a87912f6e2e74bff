#!/usr/bin/env bash
# make gpu-check, in two phases, because the GPU machine has no Go toolchain:
#
#   scripts/gpu-check.sh build [DIR]   here: builds the gpu and agent test binaries
#                                      (-tags gpu) and bin/agent, and packs them with this script, the
#                                      latency table printer and the cached ONNX Runtime
#                                      library (gzipped) into DIR (default bin/gpu-check)
#   DIR/gpu-check.sh run [RESULTS]     there, from the packed folder, needing only the
#                                      binaries, bash, coreutils, gzip and curl (or
#                                      python3): device info, the GPU tests (with the
#                                      pinned/pageable bandwidth check), the GPU voxel and
#                                      host→device benchmarks, the agent pipeline's GPU
#                                      vs CPU outputs, agent runs on the synthetic
#                                      scene (GPU voxel mapped, copied, CPU), and the ONNX
#                                      Runtime CUDA/TensorRT providers when a GPU build of
#                                      ONNX Runtime is on the machine; prints everything,
#                                      a PASS/FAIL summary, and writes it all to RESULTS
#                                      (default DIR/gpu-check-results.txt)
#
# The run phase exits non-zero when any step fails; a missing GPU makes the
# tests fail (they never skip). Every step runs under timeout, and the whole
# run phase under a budget (GPU_CHECK_BUDGET_S, default 360 s): a step that
# would start past it is not run and counts as failed. Expected on an H200:
# about 4 minutes.
set -uo pipefail

phase="${1:-}"
case "$phase" in
build)
	set -e
	cd "$(dirname "$0")/.."
	out="${2:-bin/gpu-check}"
	go="${GO:-go}"
	find_ort() { find .cache/ort -name libonnxruntime.so.1 2>/dev/null | sort -V | tail -n 1 || true; }
	ort="$(find_ort)"
	if [ -z "$ort" ]; then
		echo "gpu-check: no ONNX Runtime library under .cache/ort; fetching it (scripts/deps.sh, as make deps)"
		scripts/deps.sh
		ort="$(find_ort)"
	fi
	if [ -z "$ort" ]; then
		echo "gpu-check: no .cache/ort/*/libonnxruntime.so.1 (make deps)" >&2
		exit 1
	fi
	rm -rf "$out"
	mkdir -p "$out/gpu" "$out/lib"
	# The test binary runs with gpu/ as its working directory, like go test.
	"$go" test -c -tags gpu -o "$out/gpu/gpu.test" ./gpu
	cp -r gpu/kernels "$out/gpu/"
	# The agent's pipeline on the GPU against its CPU path (agent/gpu_gpu_test.go).
	mkdir -p "$out/agent-tests"
	"$go" test -c -tags gpu -ldflags='-s -w' -o "$out/agent-tests/agent.test" ./agent
	"$go" build -ldflags='-s -w' -o "$out/agent" ./cmd/agent
	# The camera as its own process, for the cross-process step (gzipped:
	# the folder must stay under the device tool's 64 MiB).
	"$go" build -ldflags='-s -w' -o "$out/camera" ./cmd/camera
	gzip -9 "$out/camera"
	cp scripts/gpu-check.sh scripts/latency_summary.py "$out/"
	# ~46 MB → ~17 MB; run unpacks it into a temporary folder.
	gzip -c "$ort" >"$out/lib/libonnxruntime.so.1.gz"
	basename "$(dirname "$ort")" >"$out/lib/ORT_VERSION"
	git rev-parse HEAD >"$out/COMMIT" 2>/dev/null || echo unknown >"$out/COMMIT"
	git status --short >>"$out/COMMIT" 2>/dev/null || true
	echo "gpu-check: packed $(du -sh "$out" | cut -f1) in $out; on the GPU machine run: $out/gpu-check.sh run"
	;;
run)
	# RESULTS is relative to where the script was started, not to its folder.
	results="${2:-}"
	if [ -n "$results" ] && [ "${results#/}" = "$results" ]; then results="$PWD/$results"; fi
	cd "$(dirname "$0")" || exit 1
	results="${results:-$PWD/gpu-check-results.txt}"
	budget="${GPU_CHECK_BUDGET_S:-360}"
	{
		# Inside the group, so that even this failure reaches the results file.
		tmp="$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX")" || {
			echo "gpu-check: cannot create a temporary folder in ${TMPDIR:-/tmp}: FAIL"
			exit 1
		}
		trap 'rm -rf "$tmp"' EXIT
		status=0
		names=() verdicts=() notes=()
		have_timeout=0
		command -v timeout >/dev/null && have_timeout=1

		# limit N: N seconds, or what is left of the run-phase budget if less.
		limit() {
			local left=$((budget - SECONDS))
			if [ "$1" -lt "$left" ]; then echo "$1"; else echo "$((left > 0 ? left : 0))"; fi
		}
		bounded() { # bounded SECONDS CMD...: CMD, killed after SECONDS (exit 124)
			local s="$1"
			shift
			if [ "$have_timeout" = 1 ]; then timeout -k 5 "$s" "$@"; else "$@"; fi
		}
		record() { # record NAME PASS|FAIL|N/A [NOTE]
			names+=("$1")
			verdicts+=("$2")
			notes+=("${3:-}")
			[ "$2" != FAIL ] || status=1
		}
		# begin NAME LIMIT WHAT: header; false (and a FAIL) when the budget is spent.
		begin() {
			echo
			if [ "$2" -lt 15 ]; then
				echo "==== $1: NOT RUN: the run-phase budget (${budget} s) is spent"
				record "$1" FAIL "not run: budget spent"
				return 1
			fi
			echo "==== $1 (timeout $2 s): $3"
			step_start=$SECONDS
		}
		end() { # end NAME RC LIMIT
			local took=$((SECONDS - step_start))
			if [ "$2" -eq 124 ] || [ "$2" -eq 137 ]; then
				echo "==== $1: TIMED OUT after $3 s (exit $2)"
			else
				echo "==== $1: exit $2 (${took} s)"
			fi
			if [ "$2" -eq 0 ]; then
				record "$1" PASS "${took} s"
			elif [ "$2" -eq 124 ] || [ "$2" -eq 137 ]; then
				record "$1" FAIL "timed out after $3 s"
			else
				record "$1" FAIL "exit $2, ${took} s"
			fi
		}
		step() { # step NAME LIMIT DIR CMD...; with $step_log set, its output is copied there too
			local name="$1" lim="$2" dir="$3" rc
			shift 3
			begin "$name" "$lim" "$*" || return 0
			if [ -n "${step_log:-}" ]; then
				(cd "$dir" && bounded "$lim" "$@") 2>&1 | tee "$step_log"
				rc="${PIPESTATUS[0]}"
			else
				(cd "$dir" && bounded "$lim" "$@")
				rc=$?
			fi
			end "$name" "$rc" "$lim"
		}
		now_ms() { # wall clock in ms (bash 5's EPOCHREALTIME, else date)
			if [ -n "${EPOCHREALTIME:-}" ]; then
				local us="${EPOCHREALTIME/[.,]/}"
				echo $((10#$us / 1000))
			else
				date +%s%3N
			fi
		}
		processed_in() { # processed_in JSON: /latency's frames_processed (0 if absent)
			local n
			n="$(grep -o '"frames_processed": *[0-9]*' <<<"$1" | grep -o '[0-9]*$')"
			echo "${n:-0}"
		}
		fetch() { # fetch URL: body on stdout, within 5 s
			if command -v curl >/dev/null; then
				curl -fsS --max-time 5 "$1"
			else
				bounded 8 python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())' "$1"
			fi
		}
		show_latency() { # show_latency ADDR: /latency as a table and as one line of JSON
			local json
			if ! json="$(fetch "http://$1/latency")" || [ -z "$json" ]; then
				echo "---- /latency from $1: could not read it"
				return 1
			fi
			latency_json="$json"
			echo "---- /latency from $1 (since start):"
			printf '%s\n' "$json" | bounded 10 python3 latency_summary.py 2>/dev/null || true
			# CPU the agent used: process CPU seconds over its uptime (all cores).
			local cpu up
			cpu="$(fetch "http://$1/metrics" 2>/dev/null | awk '$1 == "process_cpu_seconds_total" {print $2}')"
			up="$(fetch "http://$1/metrics" 2>/dev/null | awk '$1 == "zerohop_uptime_seconds" {print $2}')"
			if [ -n "$cpu" ] && [ -n "$up" ]; then
				awk -v c="$cpu" -v u="$up" 'BEGIN { printf "  agent CPU: %.2f s over %.1f s = %.1f %% of one core\n", c, u, (u > 0 ? 100 * c / u : 0) }'
			fi
			# One line of JSON; names keep their spaces ("NVIDIA H200").
			printf '%s' "$json" | bounded 10 python3 -c 'import json, sys; print(json.dumps(json.load(sys.stdin), separators=(",", ":")))' 2>/dev/null ||
				{ printf '%s' "$json" | tr -d '\n' | sed 's/  */ /g'; echo; }
		}
		# agent_step NAME LIMIT PORT SECONDS LOG ARGS...: runs the agent on the synthetic
		# scene for SECONDS (output to LOG when not empty, else here), reads /latency
		# about 2 s before it ends (once its endpoint answers), then waits for it.
		# Nothing of the step runs on after it: the reads are in the foreground and
		# the agent is waited for (and killed by timeout at LIMIT).
		agent_step() {
			local name="$1" lim="$2" port="$3" secs="$4" log="$5"
			shift 5
			local addr="127.0.0.1:$port"
			local args=("${agent_source[@]}" --duration "${secs}s" --http "$addr" "$@")
			begin "$name" "$lim" "./agent ${args[*]}" || return 0
			if [ ! -s "$ortlib" ]; then
				echo "(no ONNX Runtime library: $ortlib)"
				end "$name" 1 "$lim"
				return 0
			fi
			if [ -n "$log" ]; then
				bounded "$lim" ./agent "${args[@]}" >"$log" 2>&1 &
			else
				bounded "$lim" ./agent "${args[@]}" &
			fi
			# In milliseconds: $SECONDS counts whole seconds, so "3 s on"
			# could come 2 s after the start. The rate is judged from when
			# the endpoint first answered (it answers once the agent has
			# started: CUDA, the model), so that a slow start (cuInit
			# without persistence mode) does not read as a slow pipeline.
			local apid=$! t0 read_rc=1 ready_ms="" ready_n=0 read_ms=0 json
			t0="$(now_ms)"
			latency_json=""
			while kill -0 "$apid" 2>/dev/null; do
				if [ -z "$ready_ms" ] && json="$(fetch "http://$addr/latency" 2>/dev/null)"; then
					ready_ms="$(now_ms)"
					ready_n="$(processed_in "$json")"
				fi
				if [ -n "$ready_ms" ] && [ $(($(now_ms) - t0)) -ge $(((secs - 2) * 1000)) ]; then
					read_ms="$(now_ms)"
					show_latency "$addr"
					read_rc=$?
					break
				fi
				sleep 0.2
			done
			[ "$read_rc" -eq 0 ] || echo "---- /latency: not read (the agent exited before its endpoint answered, or it did not answer)"
			wait "$apid"
			local rc=$?
			if [ -n "$log" ]; then
				echo "---- agent log, execution providers and GPU:"
				grep -iE 'model ready|execution provider|provider|tensorrt|cuda|gpu|voxel' "$log" || echo "(none of those lines)"
				if [ "$rc" -ne 0 ]; then
					echo "---- agent log, last 30 lines:"
					tail -n 30 "$log"
				fi
			fi
			[ "$rc" -ne 0 ] || [ "$read_rc" -eq 0 ] || rc=1
			# An agent that ran but planned (almost) nothing, or whose GPU
			# path failed over to the CPU, has not passed. With the GPU not
			# in a rehearsal: the fake driver's emulation takes seconds per
			# frame (the CPU steps are checked there too).
			if [ "$rc" -eq 0 ] && { [ "$rehearsal" != 1 ] || [[ " $* " != *" --gpu on "* ]]; }; then
				# Frames between the endpoint's first answer and the read,
				# 2 s before the end: at least 5 Hz of the camera's 30, and
				# at least one.
				local processed failures window_ms=$((read_ms - ready_ms)) want
				want=$((window_ms * 5 / 1000))
				[ "$want" -ge 1 ] || want=1
				processed="$(processed_in "$latency_json")"
				failures="$(grep -o '"gpu_voxel_failures_total": *[0-9]*' <<<"$latency_json" | grep -o '[0-9]*$')"
				# (Not for the ONNX Runtime GPU step: a TensorRT engine build
				# may take most of its run.)
				local frames=$((${processed:-0} - ${ready_n:-0})) window
				window="$((window_ms / 1000)).$(printf '%03d' $((window_ms % 1000))) s"
				if [ "$frames" -lt "$want" ] && [ "${skip_rate_check:-0}" != 1 ]; then
					echo "---- FAIL: $frames frames processed in the $window between the endpoint's first answer and the /latency read, want at least $want (5 Hz of the camera's 30)"
					rc=1
				else
					echo "---- $frames frames processed in the $window between the endpoint's first answer ($(((ready_ms - t0) / 1000)).$(printf '%03d' $(((ready_ms - t0) % 1000))) s after the start) and the /latency read"
				fi
				if [[ " $* " == *" --gpu on "* ]]; then
					if [ "${failures:-1}" != 0 ]; then
						echo "---- FAIL: gpu_voxel_failures_total ${failures:-missing}: the GPU path failed and the agent went on on the CPU"
						rc=1
					fi
					if ! grep -q '"voxel_path": *"gpu"' <<<"$latency_json"; then
						echo "---- FAIL: /latency does not say voxel_path gpu"
						rc=1
					fi
					local staged
					staged="$(grep -o '"gpu_voxel_staged_total": *[0-9]*' <<<"$latency_json" | grep -o '[0-9]*$')"
					if [ "${staged:-1}" != 0 ]; then
						echo "---- FAIL: gpu_voxel_staged_total ${staged:-missing}: frames were copied into pinned memory, not read in place (the camera's pools were not registered)"
						rc=1
					fi
				fi
			fi
			# A LiDAR-only or planar-LiDAR run must say so (also in a
			# rehearsal), and a planar one drop no scan as the other kind.
			if [ "$rc" -eq 0 ] && [[ " $* " == *" --lidar-only "* ]] && ! grep -q '"inputs": *"lidar"' <<<"$latency_json"; then
				echo "---- FAIL: /latency does not say inputs lidar under --lidar-only"
				rc=1
			fi
			if [ "$rc" -eq 0 ] && [[ " $* " == *" --planar-lidar "* ]]; then
				if ! grep -q '"inputs": *"scan"' <<<"$latency_json"; then
					echo "---- FAIL: /latency does not say inputs scan under --planar-lidar"
					rc=1
				elif ! grep -q '"lidar_scan_mismatch_total": *0[,}]' <<<"$latency_json"; then
					echo "---- FAIL: lidar_scan_mismatch_total is not 0: scans were dropped as the other kind"
					rc=1
				fi
			fi
			end "$name" "$rc" "$lim"
		}
		agent_source=(--camera synthetic)
		# camera_agent_step NAME LIMIT PORT SECONDS LOG ARGS...: agent_step with
		# the camera as its own process, as users run them: the agent maps the
		# camera's pools read-only from the unix socket and registers them
		# with the GPU (cuMemHostRegister READ_ONLY). A failed registration
		# does not stop the agent (its frames are copied into pinned memory,
		# one log line), so that line fails this step.
		camera_agent_step() {
			local name="$1" lim="$2" port="$3" secs="$4" log="$5"
			shift 5
			local sock="$tmp/camera.sock" clog="$tmp/camera.log" cpid waited=0
			if [ ! -x "$camera" ]; then
				begin "$name" "$lim" "camera + agent" || return 0
				echo "(no camera binary: camera.gz missing from the packed folder, or not unpacked)"
				end "$name" 1 "$lim"
				return 0
			fi
			# Not through bounded: backgrounded, a function runs in a subshell,
			# and $! (what is signalled and waited for) would be that subshell.
			if [ "$have_timeout" = 1 ]; then
				timeout -k 5 "$lim" "$camera" --socket "$sock" --metrics "" >"$clog" 2>&1 &
			else
				"$camera" --socket "$sock" --metrics "" >"$clog" 2>&1 &
			fi
			cpid=$!
			while [ ! -S "$sock" ] && [ "$waited" -lt 50 ] && kill -0 "$cpid" 2>/dev/null; do
				sleep 0.2
				waited=$((waited + 1))
			done
			if [ ! -S "$sock" ]; then
				begin "$name" "$lim" "camera --socket $sock" || return 0
				echo "(the camera did not serve $sock within 10 s; its log:)"
				tail -n 20 "$clog"
				kill -TERM "$cpid" 2>/dev/null
				wait "$cpid"
				end "$name" 1 "$lim"
				return 0
			fi
			agent_source=(--socket "$sock")
			agent_step "$name" "$lim" "$port" "$secs" "$log" "$@"
			agent_source=(--camera synthetic)
			kill -TERM "$cpid" 2>/dev/null
			wait "$cpid"
			local crc=$? last=$((${#verdicts[@]} - 1))
			echo "---- camera log, last 10 lines (exit $crc):"
			tail -n 10 "$clog"
			if [ -f "$log" ]; then
				echo "---- agent log, GPU registration of the camera's pools:"
				grep -iE 'regist|read.only|pinned' "$log" || echo "(no registration lines: registered without a note)"
				if grep -q 'GPU registration of a camera pool failed' "$log"; then
					verdicts[last]=FAIL
					notes[last]+="; the camera's pools were not registered (frames staged)"
					status=1
				fi
			fi
			# The camera exits 0 on SIGTERM (timeout passes the signal on and
			# returns its status); anything else is a failed shutdown.
			if [ "$crc" -ne 0 ] && [ "${verdicts[last]}" = PASS ]; then
				verdicts[last]=FAIL
				notes[last]+="; camera exit $crc"
				status=1
			fi
		}
		# ort_gpu_step: the agent with a GPU build of ONNX Runtime, if there is one.
		ort_gpu_step() {
			local name="onnx runtime cuda/tensorrt providers" pyinfo="" pyver="" pydir="" pyprov="" dir="" lib="" found
			echo
			echo "==== $name: looking for a GPU build of ONNX Runtime"
			if command -v python3 >/dev/null &&
				pyinfo="$(bounded 60 python3 -c 'import onnxruntime as o, os; print(o.__version__); print(os.path.dirname(o.__file__)); print(",".join(o.get_available_providers()))' 2>/dev/null)"; then
				pyver="$(sed -n 1p <<<"$pyinfo")"
				pydir="$(sed -n 2p <<<"$pyinfo")"
				pyprov="$(sed -n 3p <<<"$pyinfo")"
				echo "python3 onnxruntime $pyver at $pydir; available providers: $pyprov"
			else
				echo "python3 onnxruntime: not importable"
			fi
			if [ -n "${ZEROHOP_ORT_GPU_LIB:-}" ]; then
				lib="$ZEROHOP_ORT_GPU_LIB"
				dir="$(dirname "$lib")"
				found="\$ZEROHOP_ORT_GPU_LIB=$lib"
			elif [ -n "$pydir" ]; then
				dir="$pydir/capi"
				lib="$(find "$dir" -maxdepth 1 -name 'libonnxruntime.so.1*' 2>/dev/null | sort -V | tail -n 1)"
				found="python3 onnxruntime $pyver, $dir"
			else
				found="\$ZEROHOP_ORT_GPU_LIB unset, no python3 onnxruntime"
			fi
			if [ -n "$dir" ]; then
				found="$found: $(cd "$dir" 2>/dev/null && find . -maxdepth 1 -name 'lib*onnxruntime*.so*' -printf '%f ' 2>/dev/null)"
			fi
			if [ -z "$lib" ] || [ ! -f "$lib" ] || [ ! -f "$dir/libonnxruntime_providers_cuda.so" ]; then
				echo "no GPU build of ONNX Runtime here (found: $found); cuda/tensorrt providers not exercised"
				record "$name" N/A "not run: no GPU build of ONNX Runtime here"
				return 0
			fi
			echo "GPU build: $found"
			# pip's CUDA/cuDNN/TensorRT wheels keep their libraries in site-packages.
			local site extra="" d
			site="$(dirname "${pydir:-/nonexistent}")"
			for d in "$site"/nvidia/*/lib "$site"/tensorrt_libs; do
				[ -d "$d" ] && extra="$extra${extra:+:}$d"
			done
			[ -z "$extra" ] || echo "LD_LIBRARY_PATH += $extra"
			local -x LD_LIBRARY_PATH="$extra${extra:+${LD_LIBRARY_PATH:+:}}${LD_LIBRARY_PATH:-}"
			local ortlib="$lib" skip_rate_check=1 # seen by agent_step
			agent_step "$name" "$(limit 120)" 9394 "${GPU_CHECK_ORT_SECONDS:-10}" "$tmp/ort-gpu.log" \
				--gpu on --ort-lib "$lib" --providers tensorrt,cuda,cpu --trt-cache "$tmp/trt" --log-level info
			if [ -f "$tmp/ort-gpu.log" ]; then
				local used last=$((${#verdicts[@]} - 1))
				used="$(grep '"model ready"' "$tmp/ort-gpu.log" | grep -o '"provider":"[^"]*"' | head -n 1 | tr -d '"' | tr : =)"
				notes[last]+="; model ready with ${used:-no provider (no \"model ready\" line)}"
				# The agent falls back to the CPU when the GPU providers do not
				# start (a wheel built for another CUDA major, say), and its run
				# passes: that is not a pass of this step.
				if [ "${verdicts[last]}" = PASS ] && [ "$used" != provider=tensorrt ] && [ "$used" != provider=cuda ]; then
					verdicts[last]=N/A
					notes[last]+="; neither GPU provider started (see the \"execution provider skipped\" lines above)"
					grep '"execution provider skipped"' "$tmp/ort-gpu.log" | head -n 4
				fi
			fi
		}

		# GPU_CHECK_REHEARSAL=1 (make gpu-check-rehearse): the script's own flow on
		# the FAKE driver of gpu/fakecuda, with the tests that are quick on its
		# host emulation. It proves nothing about a GPU.
		rehearsal="${GPU_CHECK_REHEARSAL:-0}"
		gpu_tests='TestGPU'
		agent_tests='^TestGPU'
		if [ "$rehearsal" = 1 ]; then
			gpu_tests='^TestGPU(ZeroCopyHostAlloc|RegisteredMmap|DeviceMemoryCopiesAndEvents|ErrorsCarryCUDANames|HostToDeviceBandwidth|VoxelRegisteredReadOnlyInput|VoxelOnAgentViewOfSharedPool|CloudChangingMidRunNeverFaults)$'
			agent_tests='^TestGPU(PathFeeds|Failure|PathFrame)'
			echo "REHEARSAL on a FAKE CUDA driver (LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}): checks this script, proves nothing about a GPU"
		fi
		echo "zerohop gpu-check $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname)"
		echo "commit: $(head -n 1 COMMIT 2>/dev/null)"
		uname -a
		echo "cpus: $(nproc 2>/dev/null); run-phase budget: ${budget} s"
		# The packed binaries were built against glibc 2.34 or newer (cgo):
		# an older one here fails every step, which this line explains.
		echo "glibc: $(getconf GNU_LIBC_VERSION 2>/dev/null || ldd --version 2>/dev/null | head -n 1 || echo unknown) (the binaries need 2.34 or newer)"

		# NVRTC: the agent and tests search the linker path and the CUDA
		# toolkit folders themselves; where NVRTC exists only inside pip's
		# nvidia-* wheels, point $ZEROHOP_NVRTC at it.
		ld_dirs=()
		IFS=: read -r -a ld_dirs <<<"${LD_LIBRARY_PATH:-}"
		# The newest by its file name's version (sorting whole paths would
		# put /usr/local/cuda-12.8/... after /usr/lib/...so.13), and of
		# that version the soname link when the folder has one.
		sys_nvrtc="$( (
			ldconfig -p 2>/dev/null | grep -o '/[^ ]*libnvrtc\.so\.1[0-9.]*$'
			for d in "${ld_dirs[@]}" /usr/local/cuda*/lib64 /usr/local/cuda*/targets/*/lib; do ls "$d"/libnvrtc.so.1* 2>/dev/null; done
		) | grep -v builtins | awk -F/ '{print $NF "\t" $0}' | sort -t"$(printf '\t')" -k1,1V -k2,2 | tail -n 1 | cut -f2)"
		if [ -n "$sys_nvrtc" ]; then
			nvrtc_dir="$(dirname "$sys_nvrtc")"
			nvrtc_base="$(basename "$sys_nvrtc")"
			for soname in "${nvrtc_base%.*.*}" "${nvrtc_base%.*}"; do
				case "$soname" in
				libnvrtc.so.1[0-9] | libnvrtc.so.11.[0-2])
					if [ -e "$nvrtc_dir/$soname" ]; then
						sys_nvrtc="$nvrtc_dir/$soname"
						break
					fi
					;;
				esac
			done
		fi
		if [ -n "${ZEROHOP_NVRTC:-}" ]; then
			echo "NVRTC: \$ZEROHOP_NVRTC=$ZEROHOP_NVRTC"
		elif [ -n "$sys_nvrtc" ]; then
			echo "NVRTC: $sys_nvrtc"
			# The loader looks for sonames (libnvrtc.so.13, .12, .11.2…): a
			# folder with only libnvrtc.so.13.0.48, say, needs the path.
			case "$(basename "$sys_nvrtc")" in
			libnvrtc.so.1[0-9] | libnvrtc.so.11.[0-2]) ;;
			*)
				export ZEROHOP_NVRTC="$sys_nvrtc"
				echo "NVRTC: no soname link beside it; \$ZEROHOP_NVRTC=$sys_nvrtc"
				;;
			esac
		else
			pip_site="$(bounded 30 python3 -c 'import site; print(site.getsitepackages()[0])' 2>/dev/null)"
			pip_nvrtc="$(find "${pip_site:-/nonexistent}/nvidia" -maxdepth 3 -name 'libnvrtc.so.1[0-9]*' ! -name '*builtins*' 2>/dev/null | sort -V | tail -n 1)"
			if [ -n "$pip_nvrtc" ]; then
				export ZEROHOP_NVRTC="$pip_nvrtc"
				echo "NVRTC: none on the linker path or in /usr/local/cuda*; using pip's $pip_nvrtc"
			else
				echo "NVRTC: none found (linker path, /usr/local/cuda*, pip's nvidia wheels): the kernels run from PTX the driver JIT-compiles (the embedded voxel PTX); the cubin cache test is skipped"
			fi
		fi

		# Unpacked beside the packed files, not in $TMPDIR, which may be
		# mounted noexec (dlopen would fail); $tmp if this folder is read-only.
		bindir="$PWD/lib"
		[ -w "$bindir" ] || bindir="$tmp"
		ortlib="$bindir/libonnxruntime.so.1"
		if [ -f lib/libonnxruntime.so.1.gz ]; then
			gzip -dc lib/libonnxruntime.so.1.gz >"$ortlib" || rm -f "$ortlib"
		elif [ -f lib/libonnxruntime.so.1 ]; then
			cp lib/libonnxruntime.so.1 "$ortlib"
		fi
		echo "packed ONNX Runtime: $(cat lib/ORT_VERSION 2>/dev/null || echo '?') ($([ -s "$ortlib" ] && echo "$ortlib" || echo missing))"
		camera="$bindir/camera"
		if [ -f camera.gz ]; then
			{ gzip -dc camera.gz >"$camera" && chmod +x "$camera"; } || rm -f "$camera"
		fi

		lim="$(limit 30)"
		if begin "nvidia-smi" "$lim" "nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap; nvidia-smi"; then
			if command -v nvidia-smi >/dev/null; then
				bounded "$lim" nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv &&
					bounded "$lim" nvidia-smi
				end "nvidia-smi" $? "$lim"
			else
				echo "nvidia-smi: not found"
				end "nvidia-smi" 127 "$lim"
			fi
		fi
		lim="$(limit 60)"
		step "device info (TestOpen)" "$lim" gpu env ZEROHOP_REQUIRE_GPU=1 ./gpu.test -test.run '^TestOpen$' -test.v -test.count=1
		lim="$(limit 300)"
		step_log="$tmp/gpu-tests.log"
		step "gpu tests (TestGPU*, incl. bandwidth)" "$lim" gpu ./gpu.test -test.run "$gpu_tests" -test.v -test.count=1 -test.timeout="$((lim > 20 ? lim - 10 : 10))s"
		step_log=""
		# A skipped test is not a passed one: it gets its own N/A line in the
		# summary (today only the cubin cache, which needs NVRTC).
		skipped="$(grep -o -- '--- SKIP: [^ ]*' "$tmp/gpu-tests.log" 2>/dev/null | cut -d' ' -f3 | paste -sd, -)"
		[ -z "$skipped" ] || record "gpu tests SKIPPED (not verified)" N/A "$skipped"
		lim="$(limit 180)"
		if [ "$rehearsal" = 1 ]; then
			echo
			echo "==== gpu voxel benchmark: not in a rehearsal (minutes on the emulation)"
			record "gpu voxel benchmark" N/A "rehearsal"
		else
			step "gpu voxel benchmark" "$lim" gpu ./gpu.test -test.run '^$' -test.bench '^BenchmarkGPUVoxel$' -test.benchmem -test.count=5 -test.timeout="$((lim > 20 ? lim - 10 : 10))s"
		fi
		lim="$(limit 120)"
		step "host-to-device benchmark" "$lim" gpu ./gpu.test -test.run '^$' -test.bench '^BenchmarkGPUHostToDevice$' -test.benchtime=500ms -test.count=3 -test.timeout="$((lim > 20 ? lim - 10 : 10))s"

		lim="$(limit 120)"
		step "agent pipeline, GPU vs CPU outputs (TestGPU*)" "$lim" agent-tests env ZEROHOP_REQUIRE_ORT=1 ZEROHOP_ORT_LIB="$ortlib" \
			./agent.test -test.run "$agent_tests" -test.v -test.count=1 -test.timeout="$((lim > 20 ? lim - 10 : 10))s"

		# Info level: the start-up lines say which kernels ran (kernels_for:
		# sm_XY from NVRTC, or the embedded compute_70 PTX) and why.
		common=(--ort-lib "$ortlib" --providers cpu --log-level info)
		agent_step "agent, GPU voxel, mapped input, 20 s" "$(limit 60)" 9391 20 "$tmp/agent-mapped.log" --gpu on --gpu-input mapped "${common[@]}"
		# The same with waits for the GPU sleeping instead of spinning (the
		# driver's default, auto, spins): its "agent CPU" line against the
		# step above's, and its latency against theirs.
		agent_step "agent, GPU voxel, mapped input, --gpu-sync block, 10 s" "$(limit 45)" 9398 10 "$tmp/agent-block.log" --gpu on --gpu-input mapped --gpu-sync block "${common[@]}"
		camera_agent_step "camera + agent processes, GPU voxel, 10 s" "$(limit 45)" 9395 10 "$tmp/agent-socket.log" --gpu on --gpu-input mapped "${common[@]}"
		agent_step "agent, GPU voxel, copied input, 10 s" "$(limit 45)" 9392 10 "$tmp/agent-copy.log" --gpu on --gpu-input copy "${common[@]}"
		agent_step "agent, CPU voxel (--gpu off), 10 s" "$(limit 45)" 9393 10 "$tmp/agent-cpu.log" --gpu off "${common[@]}"
		# A robot without a camera: the GPU voxel path with no image stage beside it.
		agent_step "agent, LiDAR only, GPU voxel, 5 s" "$(limit 30)" 9396 5 "$tmp/agent-lidar.log" --gpu on --lidar-only "${common[@]}"
		# A robot with a 2D laser scanner: one level beam, its scans marked
		# planar, through the GPU voxel path.
		agent_step "agent, planar scan, GPU voxel, 5 s" "$(limit 30)" 9397 5 "$tmp/agent-scan.log" --gpu on --planar-lidar "${common[@]}"
		ort_gpu_step

		echo
		echo "==== summary ($SECONDS s)"
		for i in "${!names[@]}"; do
			printf '%-5s %-40s %s\n' "${verdicts[$i]}" "${names[$i]}" "${notes[$i]}"
		done
		echo
		echo "gpu-check$([ "$rehearsal" = 1 ] && echo " REHEARSAL (fake driver)"): $([ "$status" -eq 0 ] && echo PASS || echo FAIL)"
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
