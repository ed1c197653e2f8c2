#!/usr/bin/env bash
# make e2e: berth against a real Nomad (v1.6.5; NOMAD_DEV_VERSION=2.0.5 for
#   the kit's other version) with fake GPUs: every TestReal… test of the
#   module, the driver's conformance suite (TestRealConformance,
#   drivers/nomad) and the rest in internal/e2e's *_real_test.go files
#   (the driver alone, berth's loop over it, the binary, the pack).
#
#   Lanes: E2E_LANES clusters (default 2; never more than there are
#   tests), each from ../shared/nomad-dev/up (2 client nodes, 4 fake GPUs
#   each), side by side. Each lane takes the next test from one queue (the
#   slowest known first: E2E_SLOW) and runs it alone against its cluster,
#   in a process of its own (the package's test binary, built once with
#   go test -c): a test has a cluster to itself, as with go test -p 1, and
#   the bad-day tests may stop its clients. The tests mostly wait on Nomad,
#   so two lanes take about half the time on two cores. Each test's
#   seconds are listed at the end, slowest first; a failed test's output
#   is printed whole (-test.v), a passed one's only with E2E_VERBOSE=1.
#
#   E2E_RUN narrows the tests (a -run pattern of top-level tests), E2E_PKGS the
#   packages (default: those with TestReal tests). E2E_PORT is lane 1's
#   HTTP port (default 4646), lane K's E2E_PORT + E2E_PORT_STEP·(K-1) (step
#   100; a kit's clients use PORT+10·N); E2E_DIR is lane 1's directory
#   (default .nomad-dev; absolute or under the repository), lane K's
#   DIR-K. E2E_ACL=1 starts the clusters with ACLs on (up -A; NOMAD_TOKEN
#   is the management token), for the tests that need them (they skip
#   without). make e2e-v2 runs its tests on Nomad v2.0.5 with these
#   (lanes from port 4846).
#   The clusters are stopped at the end, also on failure.
set -euo pipefail
cd "$(dirname "$0")/.."
kit=${NOMAD_DEV:-../shared/nomad-dev}
if [ ! -x "$kit/up" ]; then
	echo "make e2e needs $kit (a real Nomad with fake GPUs); it is not here" >&2
	exit 1
fi
# An absolute E2E_DIR keeps the kit out of the tree, and short: a task's
# Task API socket lives under it and holds 107 bytes at most
# (TestRealPackWorkloadIdentity: E2E_DIR=/tmp/bwi).
case ${E2E_DIR:-.nomad-dev} in
/*) base=$E2E_DIR ;;
*) base=$(pwd)/${E2E_DIR:-.nomad-dev} ;;
esac
port=${E2E_PORT:-4646}
step=${E2E_PORT_STEP:-100}
lanes=${E2E_LANES:-2}
run=${E2E_RUN:-^TestReal}
# The slowest tests as measured, slowest first (a stale list only
# balances the lanes less well).
slow=${E2E_SLOW:-TestRealLongPartition TestRealLeaderElection TestRealNodeLossMovesWorkspace TestRealFollowedSnapshotEqualsFullRead TestRealPackAgent TestRealNoConnectionPileUp TestRealPersistentFailureBacksOff TestRealConformance TestRealPruneDelaySurvivesRestart TestRealWalkthrough TestRealIdleNotebookStopped TestRealSecretsReachTheTask TestRealTimeLimitStopsWithCheckpoint TestRealReachAndLogs TestRealPackWorkloadIdentity TestRealQuickstart}
started=$(date +%s)
work=$(mktemp -d)
laneDir() { if [ "$1" = 1 ]; then echo "$base"; else echo "$base-$1"; fi; }
lanePort() { echo $((port + step * ($1 - 1))); }
upped=()
cleanup() {
	for d in "${upped[@]}"; do "$kit/down" "$d" >/dev/null 2>&1 & done
	wait
	rm -rf "$work"
}
trap cleanup EXIT
# startKit K: lane K's cluster, in the background; its environment (the
# exports up prints) goes to $work/env-K, its exit status to wait.
startKit() {
	local d
	d=$(laneDir "$1")
	[ -e "$d/pids" ] && "$kit/down" "$d" >/dev/null 2>&1 || true
	rm -rf "$d"
	upped+=("$d")
	"$kit/up" -n 2 -g 4 -p "$(lanePort "$1")" ${E2E_ACL:+-A} "$d" >"$work/env-$1" &
	kitPid[$1]=$!
}
declare -a kitPid
startKit 1 # while the tests build

# go-nvml's header marks calls berth never makes as deprecated: keep cgo
# quiet (make exports the same when e2e runs through it).
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}"
pkgs=${E2E_PKGS:-$(git ls-files --cached --others --exclude-standard '*_test.go' | xargs grep -l '^func TestReal' | xargs -n1 dirname | sort -u | sed 's#^#./#')}
: >"$work/list"
for p in $pkgs; do
	bin=$work/$(echo "${p#./}" | tr / _).test
	go test -c -o "$bin" "$p"
	[ -x "$bin" ] || continue # no test files
	(cd "$p" && "$bin" -test.list "$run") | grep '^Test' | sed "s#^#$p $bin #" >>"$work/list" || true
done
# The queue: the slowest known first, then the rest in order.
: >"$work/queue"
for s in $slow; do grep " $s\$" "$work/list" >>"$work/queue" || true; done
grep -v -F -x -f "$work/queue" "$work/list" >>"$work/queue" || true
n=$(wc -l <"$work/queue")
if [ "$n" = 0 ]; then
	echo "e2e: no test matches $run in $pkgs" >&2
	exit 1
fi
[ "$lanes" -gt "$n" ] && lanes=$n
for k in $(seq 2 "$lanes"); do startKit "$k"; done
for k in $(seq 1 "$lanes"); do
	if ! wait "${kitPid[$k]}"; then
		echo "e2e: $kit/up for lane $k ($(laneDir "$k"), port $(lanePort "$k")) failed" >&2
		exit 1
	fi
done
ports=$(for k in $(seq 1 "$lanes"); do lanePort "$k"; done | paste -sd,)
tests=tests
[ "$n" = 1 ] && tests=test
echo "e2e: $n $tests on Nomad v${NOMAD_DEV_VERSION:-1.6.5}${E2E_ACL:+ with ACLs on}, $lanes lane(s), each a cluster of 2 nodes with 4 fake GPUs (ports $ports)"

# next prints the queue's next test and takes it off, or nothing.
next() { flock "$work/queue.lock" sh -c 'head -n1 "$1"; sed -i 1d "$1"' _ "$work/queue"; }
# lane K runs tests from the queue against its cluster until it is empty.
lane() {
	local k=$1 dir item p bin name log rc t0 secs status
	dir=$(laneDir "$k")
	eval "$(cat "$work/env-$k")"
	export NOMAD_ADDR
	[ -n "${E2E_ACL:-}" ] && export NOMAD_TOKEN
	# The bad-day tests fail GPUs and nodes of this cluster (its
	# directory) and report what they measure to a file printed at the end.
	export NOMAD_DEV_DIR=$dir E2E_REPORT=$dir/report.txt
	while item=$(next) && [ -n "$item" ]; do
		read -r p bin name <<<"$item"
		log=$work/$name.log
		t0=$(date +%s%N)
		rc=0
		(cd "$p" && "$bin" -test.run "^$name\$" -test.count=1 -test.timeout=15m -test.v) >"$log" 2>&1 || rc=$?
		secs=$(awk -v ns=$(($(date +%s%N) - t0)) 'BEGIN { printf "%.1f", ns / 1e9 }')
		status=PASS
		if grep -q "^--- SKIP: $name " "$log"; then status=SKIP; fi
		if [ "$rc" != 0 ] || ! grep -q "^--- \(PASS\|SKIP\): $name " "$log"; then status=FAIL; fi
		echo "$status $secs $name $k" >>"$work/results"
		flock "$work/out.lock" sh -c '
			printf "e2e: lane %s: %-4s %-50s %6s s\n" "$1" "$2" "$3" "$4"
			case $2$6 in
			FAIL* | *1) sed "s/^/    /" "$5" ;;
			SKIP) sed -n "/^=== RUN/,/^--- SKIP/p" "$5" | grep -v "^===\|^---" | head -3 ;;
			esac
		' _ "$k" "$status" "$name" "$secs" "$log" "${E2E_VERBOSE:-}"
	done
}
for k in $(seq 1 "$lanes"); do lane "$k" & done
wait

echo "e2e: seconds per test, slowest first (lane)"
sort -k2,2 -n -r "$work/results" | awk '{printf "  %-50s %6.1f  %s%s\n", $3, $2, $4, ($1 == "PASS" ? "" : "  " $1)}'
for k in $(seq 1 "$lanes"); do
	r=$(laneDir "$k")/report.txt
	if [ -s "$r" ]; then echo "e2e: measured (lane $k)"; sed 's/^/  /' "$r"; fi
done
failed=$(grep -c '^FAIL' "$work/results" || true)
echo "e2e: $(grep -c '^PASS' "$work/results" || true) passed, $(grep -c '^SKIP' "$work/results" || true) skipped, $failed failed; $(($(date +%s) - started)) s wall"
[ "$failed" = 0 ]
