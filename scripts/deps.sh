#!/usr/bin/env bash
# Install what zerohop's build and tests need on a fresh Debian/Ubuntu machine
# that has only Go and gcc, idempotently: npm (to fetch the pinned ONNX
# Runtime library from the onnxruntime-node package), Cyclone DDS (for the
# ros2 build tag) and g++ (the fake CUDA driver of the GPU tests). Nothing is installed when it is already present.
set -euo pipefail
need=()
command -v npm >/dev/null || need+=(npm)
# ROS 2 on the wire: Cyclone DDS (libddsc, headers, pkg-config file; idlc to regenerate types).
pkg-config --exists CycloneDDS 2>/dev/null || need+=(cyclonedds-dev pkg-config)
command -v idlc >/dev/null || need+=(cyclonedds-tools)
# The GPU binding's plumbing tests build a fake libcuda/libnvrtc in C++20.
command -v g++ >/dev/null || need+=(g++)
if ((${#need[@]})); then
	echo "deps: installing Debian packages: ${need[*]}"
	sudo_cmd=""
	[[ $(id -u) -eq 0 ]] || sudo_cmd="sudo"
	$sudo_cmd apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${need[@]}" >/dev/null
fi
exec "$(dirname "$0")/ort/fetch.sh"
