#!/usr/bin/env bash
# Compares `berth validate` with `cue vet` of the same schema over the same
# generated spec repos (1,000 and 10,000 files): wall time and peak memory.
# Both binaries are built first, so neither pays for compilation; cue comes
# from the cuelang.org/go module berth itself uses.
#
#   scripts/bench-validate-vs-cue.sh [SIZES...]    (default: 1000 10000)
set -euo pipefail
cd "$(dirname "$0")/.."
sizes=("${@:-1000}")
[ $# -gt 0 ] || sizes=(1000 10000)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

go build -o "$tmp/berth" ./cmd/berth
go build -o "$tmp/cue" cuelang.org/go/cmd/cue
cp load/schema.cue "$tmp/schema.cue"
cat > "$tmp/doc.cue" <<'CUE'
package schema

// Every document is one of the kinds, told apart by kind.
#Doc: #PriorityTier | #Project | #Workspace | #Volume | #SchedulingPolicy
CUE

# measure CMD...: prints wall time, CPU time (user+system: steadier than
# wall on a shared machine) and peak memory for one run of CMD.
measure() {
  /usr/bin/time -o "$tmp/time" -f '%e %U %S %M %x' "$@" >/dev/null 2>"$tmp/stderr" || true
  awk '{printf "%6.2f s wall %6.2f s cpu %5.0f MiB exit %d", $1, $2+$3, $4/1024, $5}' "$tmp/time"
}

printf '%-6s  %-42s  %-42s\n' files "berth validate" "cue vet -d '#Doc'"
for n in "${sizes[@]}"; do
  dir="$tmp/repo-$n"
  BERTH_GEN_DIR="$dir" BERTH_GEN_FILES="$n" go test -count=1 -run '^TestGeneratedRepo$' ./load >/dev/null
  (cd "$dir" && find . -name '*.yaml' | sort > "$tmp/files-$n")
  "$tmp/berth" validate "$dir" >/dev/null   # warm the page cache
  b=$(measure "$tmp/berth" validate "$dir")
  mapfile -t files < "$tmp/files-$n"
  c=$(cd "$dir" && measure "$tmp/cue" vet -c -d '#Doc' "$tmp/schema.cue" "$tmp/doc.cue" "${files[@]}")
  printf '%-6s  %-42s  %-42s\n' "$n" "$b" "$c"
done
