#!/usr/bin/env bash
# make run: until the simulated cluster lands, validate the examples.
set -euo pipefail
bin=${1:-bin/berth}
echo "berth: the simulated cluster is not built yet; validating the examples instead."
"$bin" validate examples/walkthrough examples/multi-team
