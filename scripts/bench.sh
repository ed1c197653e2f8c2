#!/usr/bin/env bash
# make bench: the benchmarks the issues name, with their figures
# (docs/benchmarks.md keeps the last measured ones, each with its command).
#   validate (issue 2), decide (issue 3), the baselines simulate compares
#   against (issue 7), one reconcile cycle (issues 4 and 8), Nomad observe
#   (issue 5), GPU utilization sampling at 10,000 workspaces (issue 38), berth validate against cue vet (issue 2), the whole
#   Philly trace replayed under four policies (issue 7, under two minutes
#   on 2 cores), the same trace three times over, a year (issue 40),
#   berth apply against a real Nomad, and berth at fleet size
#   on a real Nomad (issue 25: scripts/bench-fleet.sh, 15–25 minutes).
#   About 40 minutes on 2 cores.
#
#   BENCH=quick runs only the Go benchmarks, once each (about 2 minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${BENCH:-}" = quick ]; then
	go test -run '^$' -bench 'BenchmarkValidate|BenchmarkDecide|BenchmarkFIFO|BenchmarkNomad|BenchmarkQuota|BenchmarkOnce$' -benchtime 1x -benchmem \
		./load/... ./policies/... ./replay/baseline/ ./reconcile/
	exit 0
fi
go test -run '^$' -bench 'BenchmarkValidate|BenchmarkLargeDocument|BenchmarkDecide|BenchmarkFIFO|BenchmarkNomad|BenchmarkQuota|BenchmarkOnce|BenchmarkDryRunFleet|BenchmarkObserve|BenchmarkSaveHistory|BenchmarkUseRound|BenchmarkUseAttach|BenchmarkWebhookApply|BenchmarkPredictAll|BenchmarkDirSourceRead|BenchmarkReadLoadOneFileChanged|BenchmarkFileCacheOneFileChanged|BenchmarkPrintWorkspaces' -benchmem -timeout 60m \
	./load/... ./policies/... ./replay/baseline/ ./reconcile/... ./drivers/nomad/ ./source/ ./cmd/berth/
# The decision's growth between sizes (must stay within n log n).
BERTH_GROWTH=1 go test -count=1 -run '^TestDecideGrowth$' -v ./policies | grep -v '^=== RUN'
# berth validate against cue vet over the same generated repos (wall, peak memory).
./scripts/bench-validate-vs-cue.sh
# berth simulate over the whole Philly trace: the four-way table.
./scripts/simulate-bench.sh
# The same trace three times end to end, a year of history (issue 40): its
# time against the single trace's, its peak RSS, and the replay's cost per
# decision by simulated month (about 10 minutes on 2 cores).
go test -run '^$' -bench '^BenchmarkSimulateYear$' -benchtime 1x -timeout 60m ./replay/ | grep -v '^goos\|^goarch\|^pkg\|^cpu'
# berth apply of 1,000 workspaces against a real Nomad (when ../shared/nomad-dev is here).
./scripts/bench-nomad.sh
# berth at fleet size, 10,000 workspaces on 51 nodes of a real Nomad (15–25 minutes).
./scripts/bench-fleet.sh
