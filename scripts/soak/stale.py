#!/usr/bin/env python3
"""Stale-command bound from cmdsub's recording (sub.txt) and events.tsv.

sub.txt columns: arrival_ns stamp_ns linear_x angular_z [source_ts_ns]
(source_ts = the agent's DDS write time; if absent, arrival is used).

For each camera event (camkill, camstop) at time K, with H = how long the
camera stays away (camkill: 0.5 s until restart, camstop: 1 s):
  Z    = first zero sample after K from which every sample up to K+H-50ms is zero
  L    = last non-zero sample before Z
  A_w  = Z.write  - L.stamp   capture of the last planned frame -> first zero written by the agent
  A_a  = Z.arrive - L.stamp   same, at the subscriber
  B_w  = Z.write  - L.write   last non-zero written -> first zero written
  C_w  = Z.write  - K         signal -> first zero written
Also: every non-zero sample whose frame was older than --watchdog when the
agent wrote it (age_w = write - stamp) or when it arrived (age_a).
Usage: stale.py DIR [watchdog_ms] [-v]
"""
import sys

args = [a for a in sys.argv[1:] if a != "-v"]
d = args[0]
wd = float(args[1]) if len(args) > 1 else 200.0
S = []
for line in open(d + "/sub.txt"):
    f = line.split()
    if len(f) >= 4 and f[0].isdigit():
        arr, st = int(f[0]), int(f[1])
        w = int(f[4]) if len(f) > 4 else arr
        S.append(dict(arr=arr, st=st, lx=float(f[2]), az=float(f[3]), w=w))
E = [l.split() for l in open(d + "/events.tsv")]
nz = lambda s: s["lx"] != 0.0 or s["az"] != 0.0
ms = lambda ns: ns / 1e6


def pct(v, p):
    v = sorted(v)
    k = (len(v) - 1) * p / 100
    lo = int(k); hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


rows = {}
for kind, rnd, K in E:
    K = int(K)
    if kind not in ("camkill", "camstop"):
        continue
    H = 500e6 if kind == "camkill" else 1000e6
    zi = None
    for i, s in enumerate(S):
        if s["arr"] <= K or nz(s):
            continue
        tail = [x for x in S[i:] if x["arr"] < K + H - 50e6]
        if all(not nz(x) for x in tail):
            zi = i
            break
    if zi is None:
        print(kind, rnd, "no sustained zero after event"); continue
    li = next(i for i in range(zi - 1, -1, -1) if nz(S[i]))
    z, l = S[zi], S[li]
    rows.setdefault(kind, []).append(dict(
        rnd=int(rnd), Aw=ms(z["w"] - l["st"]), Aa=ms(z["arr"] - l["st"]),
        Bw=ms(z["w"] - l["w"]), Cw=ms(z["w"] - K)))

print(f"watchdog {wd:.0f} ms; {len(S)} samples")
cols = (("Aw", "stamp->zero(write)"), ("Aa", "stamp->zero(arrive)"), ("Bw", "lastcmd->zero(write)"), ("Cw", "signal->zero(write)"))
allr = [r for v in rows.values() for r in v]
for name, r in list(rows.items()) + [("all", allr)]:
    if not r:
        continue
    print(f"{name:8s} n={len(r):3d}")
    for key, lab in cols:
        v = [x[key] for x in r]
        print(f"    {lab:22s} p50 {pct(v,50):6.1f}  p99 {pct(v,99):6.1f}  max {max(v):6.1f}  min {min(v):6.1f}  >{wd:.0f}ms: {sum(1 for x in v if x > wd)}/{len(v)}")

for key, lab in (("w", "written"), ("arr", "arrived")):
    bad = [(ms(s[key] - s["st"]), s) for s in S if nz(s) and ms(s[key] - s["st"]) > wd]
    ages = [ms(s[key] - s["st"]) for s in S if nz(s)]
    print(f"non-zero cmds {lab} with frame older than watchdog: {len(bad)} {[f'{a:.1f}' for a, _ in bad[:8]]};"
          f" age p50 {pct(ages,50):.1f} p99 {pct(ages,99):.1f} max {max(ages):.1f} ms")
if "-v" in sys.argv:
    for kind, r in rows.items():
        for x in r:
            print(kind, x["rnd"], " ".join(f"{k}={x[k]:.1f}" for k, _ in cols))
