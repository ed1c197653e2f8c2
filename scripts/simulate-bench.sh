#!/usr/bin/env bash
# The trace replay of issue 7: the whole Philly trace (shipped in traces/,
# see traces/PROVENANCE.md) under fifo, nomad, quota and berth; prints the
# table and the wall time. make bench calls it.
set -euo pipefail
cd "$(dirname "$0")/.."
trace=traces/philly-pollux/philly.csv.gz
go build -o bin/berth ./cmd/berth
start=$(date +%s.%N)
bin/berth simulate --trace "$trace" "$@"
end=$(date +%s.%N)
awk -v s="$start" -v e="$end" -v t="$trace" -v n="$(nproc)" 'BEGIN { printf "berth simulate --trace %s: %.1fs wall on %s CPUs\n", t, e - s, n }'
