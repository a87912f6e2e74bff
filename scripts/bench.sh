#!/usr/bin/env bash
# make bench: every benchmark, side by side where a ratio is claimed, into
# BENCHMARKS.md (machine, date, Go version, commit at the top).
#   pool      go test -bench ./pinned/   (pool vs make([]byte) vs sync.Pool)
#   voxel     go test -bench ./voxel/    (filter vs brute-force reference)
#   resize    go test -bench AreaPaths ./infer/ (column-wise vs direct area resize)
#   handoff   bin/bench-handoff          (zero-copy vs copy, 1 KiB … 16 MiB)
#   e2e       bin/bench-e2e              (camera + agent, zero-copy vs copy, 60 s each)
# BENCH_SECONDS (default 60) sets the e2e duration; BENCH_COUNT (default 5)
# the go test -count.
set -euo pipefail
cd "$(dirname "$0")/.."
count="${BENCH_COUNT:-5}"
secs="${BENCH_SECONDS:-60}"
out=BENCHMARKS.md
mkdir -p docs/bench-raw

# --report rewrites BENCHMARKS.md from the raw results of the last run.
if [[ "${1:-}" != --report ]]; then
	go test -run '^$' -bench . -benchmem -count "$count" ./pinned/ | tee docs/bench-raw/pool.txt
	go test -run '^$' -bench . -benchmem -count "$count" -cpu 1,2 ./voxel/ | tee docs/bench-raw/voxel.txt
	go test -run '^$' -bench 'AreaPaths|Preprocess1280x720/.*/serial' -benchmem -count "$count" -cpu 1 ./infer/ | tee docs/bench-raw/resize.txt
	bin/bench-handoff --out docs/bench-raw/handoff.md
	bin/bench-e2e --seconds "$secs" --out docs/bench-e2e.md
fi

medians() { # benchmark lines → "| name | median ns/op | runs |" (POSIX awk + sort)
	awk '/^Benchmark/ {print $1, $3}' "$1" | # the -N suffix is GOMAXPROCS: keep -cpu runs apart
		sort -k1,1 -k2,2g |
		awk '{n[$1]++; v[$1, n[$1]] = $2}
		END {for (k in n) printf "| %s | %s | %d |\n", k, v[k, int((n[k] + 1) / 2)], n[k]}' |
		sort
}

{
	echo "# zerohop benchmarks"
	echo
	echo "$(date -u -r docs/bench-e2e.md +'%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), $(go version | cut -d' ' -f3-4),"
	echo "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) CPUs, $(uname -srm)."
	echo "A shared machine: medians of $count runs per Go benchmark; every ratio comes from one run."
	echo
	echo "## Slot pool (\`go test -bench ./pinned/\`), median ns/op"
	echo
	echo "| benchmark | ns/op | runs |"
	echo "| --- | ---: | ---: |"
	medians docs/bench-raw/pool.txt
	echo
	echo "## Voxel filter (\`go test -bench -cpu 1,2 ./voxel/\`), median ns/op (p50/p99 per call in the raw lines below)"
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
	echo "## Image resize 1280×720 → 256×144 (\`go test -bench 'AreaPaths|Preprocess1280x720/.*/serial' -cpu 1 ./infer/\`), median ns/op"
	echo
	echo "direct = the per-footprint loop, packed = column sums first (what Preprocess uses); same output bit for bit."
	echo
	echo "| benchmark | ns/op | runs |"
	echo "| --- | ---: | ---: |"
	if [[ -f docs/bench-raw/resize.txt ]]; then medians docs/bench-raw/resize.txt; fi
	echo
	sed 's/^# /## /' docs/bench-raw/handoff.md
	echo
	sed 's/^# /## /; s/^## \([a-z]* transport\)/### \1/; s/^## \(copy vs unix\)/### \1/; s#](bench-e2e-#](docs/bench-e2e-#' docs/bench-e2e.md
} >"$out"
echo "bench: wrote $out"
