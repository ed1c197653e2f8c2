#!/usr/bin/env bash
# bench-nomad.sh: berth applying many workspaces to a real Nomad v1.6.5
# (../shared/nomad-dev), against Nomad's own placement time (issue 12, item 7).
#
#   Starts 2 client nodes with room for BENCH_N 0-GPU workspaces, stops the
#   second client agent's process (kill -STOP: the server still places on
#   it, nothing runs) and makes node-1 ineligible, so every workspace is
#   placed on node-2. Each workspace asks for 100 MHz of CPU (the default),
#   16 MiB of memory and Nomad's default 300 MB of ephemeral disk; node-2
#   advertises 1,000,000 MHz, 1,000,000 MB of memory and (disk_total_mb,
#   disk_free_mb) 10,000,000 MB of disk, so no dimension runs out.
#   Then `berth apply` (one cycle) places them all; a second apply changes
#   nothing. It reports berth's wall and CPU time (getrusage of the child),
#   the sum of Nomad's own placement times (each evaluation's ModifyTime -
#   CreateTime; with berth's concurrent submissions this counts the time
#   evaluations queue in Nomad's broker too) and Nomad's busy time (the
#   union of those intervals). BENCH_PROFILE=FILE writes berth's CPU
#   profile of the first apply.
#
#   BENCH_N (default 1000), BENCH_PORT (default 4760), NOMAD_DEV (default
#   ../shared/nomad-dev). Exits 0 without measuring when the kit is absent.
set -euo pipefail
cd "$(dirname "$0")/.."
kit=${NOMAD_DEV:-../shared/nomad-dev}
if [ ! -x "$kit/up" ]; then
	echo "bench-nomad: $kit is not here; skipping the real-agent benchmark"
	exit 0
fi
n=${BENCH_N:-1000}
port=${BENCH_PORT:-4760}
work=$(mktemp -d /tmp/berth-bench.XXXXXX)
dir=$work/nomad
cleanup() { "$kit/down" "$dir" >/dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT
go build -o "$work/berth" ./cmd/berth
eval "$("$kit/up" -n 2 -g 1 -p "$port" -c 1000000 -m 1000000 "$dir")"
export NOMAD_ADDR
# Both agents again with a config of our own (the kit takes none): the
# server keeps a silent client "ready" for an hour (min_heartbeat_ttl,
# heartbeat_grace), so the stopped node-2 still gets placements; node-2's
# disk holds BENCH_N default ephemeral disks. The dev server starts empty.
restart() { # restart K EXTRA-HCL ARGS...: agent K again with one more config file
	local k=$1 extra=$2 pid; shift 2
	pid=$(sed -n "${k}p" "$dir/pids")
	kill -INT "$pid"; while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
	printf '%s\n' "$extra" >"$dir/node-$k-bench.hcl"
	TMPDIR="$dir/tmp" nohup "$dir/bin/nomad" agent "$@" -config "$dir/node-$k.hcl" -config "$dir/node-$k-bench.hcl" >>"$dir/node-$k.log" 2>&1 &
	sed -i "${k}s/.*/$!/" "$dir/pids"
}
restart 2 'client {
  disk_total_mb = 10000000
  disk_free_mb = 10000000
}'
restart 1 'server {
  min_heartbeat_ttl = "1h"
  heartbeat_grace = "1h"
}' -dev -bind 127.0.0.1 -node node-1
python3 scripts/bench_nomad.py "$NOMAD_ADDR" "$work" "$n" "$(sed -n 2p "$dir/pids")" "$(sed -n 1p "$dir/pids")"
