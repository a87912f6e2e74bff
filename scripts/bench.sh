#!/usr/bin/env bash
# make bench: these benchmarks, side by side where a ratio is claimed, into
# BENCHMARKS.md (machine, date, Go version, commit at the top); raw results
# in docs/bench-raw/:
#   pool      go test -bench . ./pinned/         (pool vs make([]byte) vs sync.Pool)
#   voxel     go test -bench . -cpu 1,2 ./voxel/ (filter vs brute-force reference)
#   resize    go test -bench 'AreaPaths|Preprocess1280x720/.*/.*/serial' ./infer/
#             (column-wise vs direct area resize)
#   handoff   bin/bench-handoff                  (event-driven zero-copy vs copy vs
#             pipe floor, 1 KiB … 16 MiB, one run; no --spin, no --pin-cpu)
#   e2e       bin/bench-e2e                      (camera + agent, unix vs copy, 60 s each)
# Not here: make bench-sensor, make bench-handoff (3 runs, spin and one-CPU
# cases, into docs/bench-handoff.md), make bench-e2e (docs/bench-e2e.md).
# BENCH_SECONDS (default 60) sets the e2e duration; BENCH_COUNT (default 5)
# the go test -count.
set -euo pipefail
cd "$(dirname "$0")/.."
count="${BENCH_COUNT:-5}"
secs="${BENCH_SECONDS:-60}"
# Checked before the Go benchmarks spend their minutes: bench-e2e runs last
# and needs two segments of 5 s or more per transport.
if ! [[ "$secs" =~ ^[0-9]+$ ]] || ((secs < 10)); then
	echo "bench: BENCH_SECONDS=$secs: want a whole number of seconds, 10 or more (bench-e2e interleaves two transports in segments of 5 s or more)" >&2
	exit 2
fi
out=BENCHMARKS.md
mkdir -p docs/bench-raw

# --report rewrites BENCHMARKS.md from the raw results of the last run.
if [[ "${1:-}" != --report ]]; then
	# The commit, and whether the tree differs from it, before this run
	# writes its own (tracked) results.
	{
		git rev-parse --short HEAD 2>/dev/null || echo unknown
		[[ -z "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]] || echo "with uncommitted changes"
	} | paste -sd' ' >docs/bench-raw/commit.txt
	go test -run '^$' -bench . -benchmem -count "$count" ./pinned/ | tee docs/bench-raw/pool.txt
	go test -run '^$' -bench . -benchmem -count "$count" -cpu 1,2 ./voxel/ | tee docs/bench-raw/voxel.txt
	go test -run '^$' -bench 'AreaPaths|Preprocess1280x720/.*/serial' -benchmem -count "$count" -cpu 1 ./infer/ | tee docs/bench-raw/resize.txt
	bin/bench-handoff --out docs/bench-raw/handoff.md
	# Its SVGs go beside it (docs/bench-raw/e2e-unix.svg, -copy.svg), apart
	# from make bench-e2e's docs/bench-e2e*.
	bin/bench-e2e --seconds "$secs" --out docs/bench-raw/e2e.md
fi
for f in pool.txt voxel.txt handoff.md e2e.md; do
	[[ -f "docs/bench-raw/$f" ]] || { echo "bench: docs/bench-raw/$f is missing: run make bench" >&2; exit 1; }
done

medians() { # benchmark lines → "| name | median ns/op | runs |" (POSIX awk + sort)
	awk '/^Benchmark/ {print $1, $3}' "$1" | # the -N suffix is GOMAXPROCS: keep -cpu runs apart
		sort -k1,1 -k2,2g |
		awk '{n[$1]++; v[$1, n[$1]] = $2}
		END {for (k in n) {m = n[k] % 2 ? v[k, (n[k] + 1) / 2] : (v[k, n[k] / 2] + v[k, n[k] / 2 + 1]) / 2; printf "| %s | %s | %d |\n", k, m, n[k]}}' |
		sort
}

{
	echo "# zerohop benchmarks"
	echo
	echo "$(date -u -r docs/bench-raw/e2e.md +'%Y-%m-%d %H:%M UTC'), commit $(cat docs/bench-raw/commit.txt 2>/dev/null || echo unknown), $(go version | cut -d' ' -f3-4),"
	echo "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) CPUs, $(uname -srm)."
	echo "A shared machine: medians of $count runs per Go benchmark; every ratio comes from one run."
	echo
	echo "## Slot pool (\`go test -run '^\$' -bench . -benchmem -count $count ./pinned/\`), median ns/op"
	echo
	echo "| benchmark | ns/op | runs |"
	echo "| --- | ---: | ---: |"
	medians docs/bench-raw/pool.txt
	echo
	echo "## Voxel filter (\`go test -run '^\$' -bench . -benchmem -count $count -cpu 1,2 ./voxel/\`), median ns/op (p50/p99 per call in the raw lines below)"
	echo
	echo "| benchmark | ns/op | runs |"
	echo "| --- | ---: | ---: |"
	medians docs/bench-raw/voxel.txt
	echo
	echo "<details><summary>raw voxel lines</summary>"
	echo
	echo '```'
	grep '^Benchmark' docs/bench-raw/voxel.txt
	echo '```'
	echo
	echo "</details>"
	echo
	echo "## Image resize 1280×720 → 256×144 (\`go test -run '^\$' -bench 'AreaPaths|Preprocess1280x720/.*/serial' -benchmem -count $count -cpu 1 ./infer/\`), median ns/op"
	echo
	echo "direct = the per-footprint loop, packed = column sums first (what Preprocess uses); same output bit for bit."
	echo
	echo "| benchmark | ns/op | runs |"
	echo "| --- | ---: | ---: |"
	if [[ -f docs/bench-raw/resize.txt ]]; then medians docs/bench-raw/resize.txt; fi
	echo
	# bench-handoff's own how-to-refresh line would send readers to make
	# bench-handoff, which writes docs/bench-handoff.md, not this file.
	sed 's/^# /## /; s/; rerun it (or `make bench-handoff`) to refresh\.$/ during `make bench`, which alone refreshes this section (`make bench-handoff` writes `docs\/bench-handoff.md` instead)./' docs/bench-raw/handoff.md
	echo
	sed 's/^# /## /; s/^## \([a-z]* transport\)/### \1/; s/^## \(copy vs unix\)/### \1/; s#](e2e-#](docs/bench-raw/e2e-#' docs/bench-raw/e2e.md
} >"$out"
echo "bench: wrote $out"
