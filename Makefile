# berth — every target installs what it needs through the Go toolchain.
GO      ?= go
PKGS    := ./...
BIN     := bin/berth
STATIC  ?= bin/berth-static
IMAGE   ?= berth:dev
FUZZTIME ?= 3m
# go-nvml's C header marks NVML calls berth never makes as deprecated; keep
# those third-party warnings out of every build's output.
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations

.PHONY: help run run-nomad test e2e e2e-v2 bench bench-quick lint build static image dist golden fuzz clean screenshot

help: ## Show the targets
	@awk 'BEGIN{FS=":.*## "} /^[a-z0-9-]+:.*## /{printf "  make %-11s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

run: build ## The preemption walk-through on the embedded simulated cluster
	@./scripts/run-walkthrough.sh $(BIN)

run-nomad: build ## The same walk-through on a real Nomad from ../shared/nomad-dev (raw_exec tasks, a fake GPU)
	@./scripts/run-walkthrough-nomad.sh $(BIN)

test: ## Everything CI runs: vet, tests with -race (FuzzLoad on its seeds only), stale goldens
	$(GO) vet $(PKGS)
	$(GO) test -race -count=1 $(PKGS)
	@./scripts/check-goldens.sh

e2e: ## berth against a real Nomad v1.6.5 with fake GPUs (../shared/nomad-dev): every TestReal… test, in 2 lanes of a cluster each (E2E_LANES)
	@./scripts/e2e.sh

e2e-v2: ## On Nomad v2.0.5 with ACLs on: the driver's conformance suite, the walk-through, workload identity (the reconciler's and the agent's) and the quickstart (TestRealConformance, TestRealWalkthrough, TestRealPackWorkloadIdentity, TestRealPackAgent, TestRealQuickstart)
	@NOMAD_DEV_VERSION=2.0.5 E2E_ACL=1 E2E_PORT=$${E2E_PORT:-4846} E2E_DIR=$${E2E_DIR:-/tmp/berth-e2e-v2-$$(id -u)} \
		E2E_PKGS='./drivers/nomad ./internal/e2e' E2E_RUN='^(TestRealConformance|TestRealWalkthrough|TestRealPackWorkloadIdentity|TestRealPackAgent|TestRealQuickstart)$$' ./scripts/e2e.sh

fuzz: ## Fuzz the spec loader for FUZZTIME (default 3m; the first run also builds an instrumented CUE, minutes)
	$(GO) test -run '^$$' -fuzz '^FuzzLoad$$' -fuzztime $(FUZZTIME) ./load

bench: ## The benchmarks the issues name, with their figures (about 40 min on 2 cores; the fleet benchmark 15–25 of them)
	@./scripts/bench.sh

bench-quick: ## The Go benchmarks only, once each (about 2 minutes)
	@BENCH=quick ./scripts/bench.sh

lint: ## gofmt, go vet, staticcheck and the dependency check (govulncheck offline; SKIP_DEPCHECK=1 skips it)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) tool staticcheck $(PKGS)
	@if [ -n "$(SKIP_DEPCHECK)" ]; then echo "dependency check SKIPPED (SKIP_DEPCHECK is set)"; else $(GO) run ./scripts/depcheck; fi

build: ## Build bin/berth
	@[ -x $(BIN) ] || echo "building $(BIN): the first build compiles CUE, go-git and Nomad's API client (about a minute on 2 cores, more while Go downloads the modules)"
	$(GO) build -o $(BIN) ./cmd/berth

static: ## Build bin/berth-static (STATIC=…): no cgo, no NVML (not for berth agent); what the container image runs
	CGO_ENABLED=0 $(GO) build -trimpath -o $(STATIC) ./cmd/berth

dist: build ## Release artifacts in dist/ without docker: static binaries (linux amd64/arm64, darwin arm64), image tarballs, SHA256SUMS; and bin/berth (cgo, for berth agent's NVML) as bin/berth_linux_amd64.tar.gz, the agent job's artifact
	tar -czf bin/berth_$$($(GO) env GOOS)_$$($(GO) env GOARCH).tar.gz -C bin berth
	$(GO) run ./internal/dist/cmd/dist -out dist

image: ## Build the container image berth:dev (IMAGE=…) from the Dockerfile (needs a docker daemon)
	@docker info >/dev/null 2>&1 || { echo "make image needs a running docker daemon (docker info fails here); make static builds the binary the image runs"; exit 1; }
	docker build -t $(IMAGE) .

golden: ## Rewrite every golden file and txtar expectation from the code (a failing test's output is shown)
	@echo "BERTH_UPDATE=1 $(GO) test -count=1 $(PKGS)"
	@out=$$(BERTH_UPDATE=1 $(GO) test -count=1 $(PKGS) 2>&1) || { echo "$$out" | grep -v -e '^ok ' -e '^?  .*\[no test files\]'; exit 1; }

screenshot: ## Screenshot the dashboard during the walk-through (docs/dashboard.png; needs chromium)
	@command -v chromium >/dev/null || { echo "make screenshot needs chromium (apt-get install -y chromium)"; exit 1; }
	BERTH_SCREENSHOT_DIR=$(CURDIR)/docs $(GO) test -count=1 -run '^TestBrowser' ./api/ui

clean:
	rm -rf bin
