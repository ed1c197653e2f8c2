#!/usr/bin/env bash
# The action's validate step: berth validate over BERTH_SPECS (default .)
# with GitHub annotations, --strict when BERTH_STRICT is true. Exit 0:
# valid (warnings allowed), 1: invalid, 2: usage error. BERTH names the
# binary (default: berth on PATH).
set -euo pipefail
berth=${BERTH:-berth}
args=(validate --format github)
if [ "${BERTH_STRICT:-false}" = true ]; then args+=(--strict); fi
exec "$berth" "${args[@]}" "${BERTH_SPECS:-.}"
