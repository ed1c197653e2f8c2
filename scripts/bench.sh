#!/usr/bin/env bash
# make bench: the benchmarks the issues name, with their figures.
set -euo pipefail
cd "$(dirname "$0")/.."
go test -run '^$' -bench 'BenchmarkValidate|BenchmarkDecide|BenchmarkOnce' -benchmem -timeout 60m ./schema/... ./policies/... ./reconcile/...
# berth validate against cue vet over the same generated repos (wall, peak memory).
./scripts/bench-validate-vs-cue.sh
