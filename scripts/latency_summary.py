#!/usr/bin/python3
"""Print the agent's /latency JSON (read from stdin) as a small table."""
import json
import sys

d = json.load(sys.stdin)
print(f"  provider={d.get('provider')} gpu={d.get('gpu')} voxel={d.get('voxel_path')} kernels={d.get('gpu_kernels')} handoff={d.get('handoff')} inputs={d.get('inputs')}")
print(f"  {'stage':11s} {'count':>7s} {'p50 µs':>9s} {'p99 µs':>9s} {'max µs':>9s}")
for s in d.get("stages", []):
    t = s["since_start"]
    print(f"  {s['name']:11s} {t['count']:7d} {t['p50']:9.1f} {t['p99']:9.1f} {t['max']:9.1f}")
print("  counters:", {k: int(v) for k, v in d.get("counters", {}).items()})
