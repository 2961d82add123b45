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

vet: ## go vet of the root module
	$(GO) vet ./...

fmt: ## gofmt every tracked Go file
	gofmt -w $$(git ls-files '*.go')

.PHONY: controlplane integration

controlplane: ## etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok into .cache/bin (built from local/tools; skipped when up to date)
	@GO=$(GO) ./local/tools/build.sh .cache/bin

integration: controlplane ## end-to-end tests on the local control plane (integration/, local/controlplane)
	$(GO) test -count=1 -timeout 15m ./integration/... ./local/controlplane/

.PHONY: sfn-deps cdk-tools node-tools

# The Node tools, from npm into one ignored folder, .cache/npm: Node 22 (the
# local Step Functions engine runs on it, and the jsii runtime of the Go CDK
# needs node on PATH), aws-local-stepfunctions and asl-validator (the local
# Step Functions engine, local/stepfunctions) and the CDK CLI. One install
# serves both sfn-deps and cdk-tools; the stamp names every pinned version,
# so changing one reinstalls. Synth runs offline: CLI telemetry and notices
# are off, and CDK_HOME stays in the repo.
NODE_DIR := .cache/npm
empty :=
space := $(empty) $(empty)
NODE_VERSION := 22.23.5
NODE_PKG := node-$(shell uname -s | tr A-Z a-z)-$(if $(filter aarch64 arm64,$(shell uname -m)),arm64,x64)
NPM_PACKAGES := $(NODE_PKG)@$(NODE_VERSION) aws-local-stepfunctions@3.0.0 asl-validator@4.0.0 aws-cdk@2.1148.1
NODE_STAMP := $(NODE_DIR)/.installed-$(subst @,-,$(subst $(space),_,$(NPM_PACKAGES)))
CDK_ENV := PATH="$(CURDIR)/$(NODE_DIR)/node_modules/$(NODE_PKG)/bin:$$PATH" CDK_HOME="$(CURDIR)/$(NODE_DIR)/cdk-home" CDK_DISABLE_CLI_TELEMETRY=true
# make synth SYNTH_CLUSTER=<name> SYNTH_CONTEXT='-c key=value ...' (infra/config.go lists the keys).
SYNTH_CLUSTER ?= example
SYNTH_CONTEXT ?=

$(NODE_STAMP):
	rm -rf $(NODE_DIR)/node_modules $(NODE_DIR)/package-lock.json $(NODE_DIR)/.installed-*
	mkdir -p $(NODE_DIR)/cdk-home
	echo '{"name":"nodewright-node-tools","private":true}' > $(NODE_DIR)/package.json
	npm install --prefix $(NODE_DIR) --no-audit --no-fund --loglevel=error $(NPM_PACKAGES)
	touch $@

node-tools: $(NODE_STAMP) ## Node 22, aws-local-stepfunctions, asl-validator and the CDK CLI into .cache/npm (skipped when present)

sfn-deps: node-tools ## the local Step Functions engine (part of node-tools)

cdk-tools: node-tools ## the CDK toolchain (part of node-tools)

demo: controlplane sfn-deps ## the README's demo: local stack up, guide-complete applied, inflate scaled to 10, every node drifted to a new AMI, a Spot node interrupted, everything scaled to 0 and consolidated away, with a timeline; exits 0 on success, leaves nothing running
	$(GO) run ./cmd/nodewright demo

synth: build cdk-tools ## synthesize the CDK app (infra/) into cdk.out/ for SYNTH_CLUSTER (default "example"), with cdk-nag's AwsSolutions checks
	cd infra && $(GO) build -o ../bin/nodewright-infra .
	$(CDK_ENV) $(NODE_DIR)/node_modules/.bin/cdk synth --app bin/nodewright-infra --no-notices --quiet \
		-o cdk.out -c clusterName=$(SYNTH_CLUSTER) $(SYNTH_CONTEXT)
	@echo "synth: cdk.out/nodewright-$(SYNTH_CLUSTER).template.json"

clean: ## remove build outputs (dist/, bin/, cdk.out/); .cache/ keeps the control plane and the Node tools
	rm -rf dist bin cdk.out
