#!/usr/bin/env bash
# bench-fleet.sh: berth at fleet size on a real Nomad v1.6.5
# (../shared/nomad-dev's scale mode), issue 25.
#
#   Starts `up -S -n 51` (node-1 is the server's own client, made
#   ineligible; clients 2-51 are stopped with kill -STOP, so the server
#   places on them and nothing runs), writes BENCH_N workspaces (default
#   10,000; one file each, 20 projects, one in 33 with a GPU, the rest
#   without) and measures (scripts/bench_fleet.py): the first `berth apply`
#   against Nomad's own busy time; `berth apply` after one file changed;
#   `berth reconcile` on the directory, file written -> job registered
#   (p50, p99 over 20 changes); the requests berth makes (through
#   scripts/countproxy) and the Nomad server's CPU over BENCH_IDLE seconds
#   (default 120) idle, with berth and without, and what its CPU profile
#   shows it spent on berth's requests; `berth plan` of a one-file change;
#   berth's peak RSS; the top of reconcile's CPU profile.
#
#   It takes 15–25 minutes at 10,000 workspaces on 2 cores (912 s at c410ccf; the first
#   apply most of it: Nomad places fewer than 10 a second once each node
#   holds ~150; what it has not placed after three 5-minute cycles is set
#   Stopped, and said), about 10 minutes with BENCH_N=5000, and about 3 GiB
#   of memory: `make bench` runs it last; CI does not.
#   BENCH_N, BENCH_IDLE, BENCH_PORT (default 4860), NOMAD_DEV (default
#   ../shared/nomad-dev). Exits 0 without measuring when the kit is absent.
set -euo pipefail
cd "$(dirname "$0")/.."
kit=${NOMAD_DEV:-../shared/nomad-dev}
if [ ! -x "$kit/up" ]; then
	echo "bench-fleet: $kit is not here; skipping the fleet benchmark"
	exit 0
fi
n=${BENCH_N:-10000}
port=${BENCH_PORT:-4860}
work=$(mktemp -d /tmp/berth-fleet.XXXXXX)
dir=$work/nomad
cleanup() {
	# Stopped clients must go on to stop.
	[ -e "$dir/pids" ] && xargs -r kill -CONT <"$dir/pids" 2>/dev/null || true
	"$kit/down" "$dir" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT
started=$(date +%s)
go build -o "$work/berth" ./cmd/berth
go build -o "$work/countproxy" ./scripts/countproxy
eval "$("$kit/up" -S -n 51 -g 8 -p "$port" -c 1000000 -m 1000000 "$dir")"
export NOMAD_ADDR
python3 scripts/bench_fleet.py "$NOMAD_ADDR" "$work" "$dir" "$n"
echo "bench-fleet: $(( $(date +%s) - started )) s wall"
