#!/usr/bin/env bash
# The trace replay of issue 7: the whole Philly trace under fifo, nomad,
# quota and berth, when ../shared holds it; prints the table and the wall
# time. make bench can call it.
set -euo pipefail
cd "$(dirname "$0")/.."
trace=../shared/traces/philly-pollux/philly.csv
if [ ! -f "$trace" ]; then
	echo "simulate: no $trace; skipped"
	exit 0
fi
go build -o bin/berth ./cmd/berth
start=$(date +%s.%N)
bin/berth simulate --trace "$trace" "$@"
end=$(date +%s.%N)
awk -v s="$start" -v e="$end" -v t="$trace" -v n="$(nproc)" 'BEGIN { printf "berth simulate --trace %s: %.1fs wall on %s CPUs\n", t, e - s, n }'
