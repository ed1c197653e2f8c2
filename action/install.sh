#!/usr/bin/env bash
# The action's first step: install berth at BERTH_VERSION (a release tag,
# a branch or a commit; the action passes its own ref, so berth-dev/berth@v1.4.0
# installs berth v1.4.0), "latest" when none is given.
set -euo pipefail
ver=${BERTH_VERSION:-latest}
go install "github.com/berth-dev/berth/cmd/berth@$ver"
"$(go env GOPATH)/bin/berth" version
