#!/usr/bin/env bash
# make demo: the whole pipeline on the embedded default. A camera process
# renders the synthetic scene (64-beam LiDAR + 1280x720 camera, an obstacle
# crossing the robot's path, a hazard marking only the camera sees) into
# shared slots; an agent process leases them, runs voxel → BEV → model →
# planner and logs cmd_vel. The latency page is served while it runs.
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${DEMO_SECONDS:-20}"
# The latency table is read 2 s before the end.
if ! [[ $secs =~ ^[0-9]+$ ]] || ((secs < 3)); then
	echo "demo: DEMO_SECONDS=$secs: want a whole number of seconds, 3 or more (the latency table is read 2 s before the end)" >&2
	exit 2
fi
http="${DEMO_HTTP:-127.0.0.1:9090}"
dir="$(mktemp -d)"
sock="$dir/camera.sock"
trap 'kill "${cam_pid:-}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$dir"' EXIT

echo "demo: camera → $sock; agent latency page: http://$http/ (for $secs s)"
bin/camera --socket "$sock" --metrics 127.0.0.1:0 --log-level warn &
cam_pid=$!
# Show a latency summary from the running agent shortly before it stops.
(
	sleep "$((secs - 2))"
	echo "---- /latency (p50 / p99 / max in µs, over the run) ----"
	curl -fsS "http://$http/latency" | /usr/bin/python3 scripts/latency_summary.py || echo "  (could not read /latency)"
) &
bin/agent --socket "$sock" --http "$http" --duration "${secs}s" --providers cpu
