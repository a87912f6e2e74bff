#!/usr/bin/env bash
# Install what zerohop's build and tests need on a fresh Debian/Ubuntu machine
# that has only Go and gcc, idempotently: npm (to fetch the pinned ONNX
# Runtime library from the onnxruntime-node package), Cyclone DDS (for the
# ros2 build tag), OpenSSL (the SROS2 tests' keystores), g++ (the fake CUDA
# driver of the GPU tests), curl and python3 (make demo's latency table). Nothing is installed when it is already present.
set -euo pipefail
need=()
command -v npm >/dev/null || need+=(npm)
# ROS 2 on the wire: Cyclone DDS (libddsc, headers, pkg-config file; idlc to regenerate types).
pkg-config --exists CycloneDDS 2>/dev/null || need+=(cyclonedds-dev pkg-config)
command -v idlc >/dev/null || need+=(cyclonedds-tools)
# The SROS2 tests make a keystore (certificates, signed documents) with OpenSSL.
command -v openssl >/dev/null || need+=(openssl)
# The GPU binding's plumbing tests build a fake libcuda/libnvrtc in C++20.
command -v g++ >/dev/null || need+=(g++)
# make demo's closing latency table reads the agent's /latency.
command -v curl >/dev/null || need+=(curl)
[[ -x /usr/bin/python3 ]] || need+=(python3)
# `deps.sh arm64` (make test-arm64): the Jetson cross build and the core
# packages' tests under user-mode emulation.
if [[ ${1:-} == arm64 ]]; then
	command -v aarch64-linux-gnu-gcc >/dev/null || need+=(gcc-aarch64-linux-gnu)
	command -v aarch64-linux-gnu-g++ >/dev/null || need+=(g++-aarch64-linux-gnu) # the fake CUDA driver for arm64
	command -v qemu-aarch64 >/dev/null || need+=(qemu-user)
fi
if ((${#need[@]})); then
	echo "deps: installing Debian packages: ${need[*]}"
	sudo_cmd=""
	if [[ $(id -u) -ne 0 ]]; then
		command -v sudo >/dev/null || { echo "deps: installing ${need[*]} needs root: run as root, install sudo, or install them yourself" >&2; exit 1; }
		sudo_cmd="sudo"
	fi
	# A fresh VM often runs apt-daily or unattended-upgrades at boot, which
	# hold the apt and dpkg locks for minutes: wait for them rather than
	# fail. (DPkg::Lock::Timeout covers install; update on Debian 12 does
	# not honour it, so it is retried.)
	for try in 1 2 3 4 5 6 7 8 9 10; do
		out="$($sudo_cmd apt-get update -qq 2>&1)" && break
		echo "${out}" >&2
		# Only a held lock is worth waiting for; anything else is final.
		grep -q "Could not get lock" <<<"${out}" || { echo "deps: apt-get update failed" >&2; exit 1; }
		[[ $try -lt 10 ]] || { echo "deps: the apt lock was still held after 10 tries" >&2; exit 1; }
		echo "deps: the apt lock is held (apt-daily, unattended-upgrades?); retrying in 30 s" >&2
		sleep 30
	done
	DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq -o DPkg::Lock::Timeout=600 "${need[@]}" >/dev/null
fi
exec "$(dirname "$0")/ort/fetch.sh"
