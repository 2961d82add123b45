# nodewright build entry points. `make help` lists them.
SHELL := /bin/bash
GO ?= go
FUNCTIONS := $(patsubst functions/%/main.go,%,$(wildcard functions/*/main.go))
# The version and commit of every binary (forwarder, Lambdas, CLI), set in
# one place, internal/buildinfo, and logged on each process's first line;
# the image's labels carry the same two values.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
BUILDINFO_LDFLAGS := -X github.com/nodewright/nodewright/internal/buildinfo.version=$(VERSION) -X github.com/nodewright/nodewright/internal/buildinfo.commit=$(COMMIT)
LAMBDA_FLAGS := -tags lambda.norpc -trimpath -ldflags='-s -w $(BUILDINFO_LDFLAGS)'
# PROGRESS runs a long build step and prints, at least every 30 s, what it
# builds and the elapsed time, after saying how long a cold build usually
# takes (local/buildprogress; standard library only, so it builds in seconds).
PROGRESS = $(GO) run ./local/buildprogress

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
	$(GO) build -ldflags='$(BUILDINFO_LDFLAGS)' -o bin/nodewright ./cmd/nodewright

# The end-to-end tests run the forwarder binary extracted from the image.
HOST_ARCH := $(shell $(GO) env GOARCH)
IMAGE_FORWARDER := dist/image/forwarder-linux-$(HOST_ARCH)

test: controlplane sfn-deps cdk-tools image ## everything CI runs: lint (gofmt, vet, golangci-lint), unit and end-to-end tests (local control plane, local Step Functions; the forwarder from the image), the image's and the Helm chart's tests, the CDK app's tests and synth
	$(MAKE) --no-print-directory lint
	cd image && $(GO) run . extract -layout ../dist/image/oci -platform linux/$(HOST_ARCH) -o ../$(IMAGE_FORWARDER)
	NODEWRIGHT_FORWARDER_BIN=$(CURDIR)/$(IMAGE_FORWARDER) $(GO) test -count=1 -timeout 60m ./...
	cd image && $(GO) vet ./... && $(GO) test -count=1 ./...
	cd charts && $(GO) vet ./... && $(GO) test -count=1 ./...
	$(MAKE) --no-print-directory synth
	cd infra && $(CDK_ENV) $(GO) vet ./... && $(CDK_ENV) $(GO) test -count=1 ./...

unit: ## the fast loop: vet and unit tests of the root module; -short skips the end-to-end tests (never compiles awscdk or k8s.io/kubernetes)
	$(GO) vet ./...
	$(GO) test -short ./...

bench: ## solver benchmarks (see shared/scheduling/BENCHMARKS.md)
	$(GO) test -run '^$$' -bench . -benchtime 1x -benchmem ./shared/scheduling/

# golangci-lint, pinned, built from the Go module proxy into the ignored
# .cache/ (one folder per version, so changing the pin reinstalls).
GOLANGCI_LINT_VERSION := v2.15.0
GOLANGCI_LINT := .cache/golangci-lint-$(GOLANGCI_LINT_VERSION)/golangci-lint

$(GOLANGCI_LINT):
	GOBIN=$(CURDIR)/$(dir $(GOLANGCI_LINT)) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

lint: vet $(GOLANGCI_LINT) ## gofmt check, go vet and golangci-lint (.golangci.yaml) of the root module
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GOLANGCI_LINT) run ./...

vet: ## go vet of the root module
	$(GO) vet ./...

fmt: ## gofmt every tracked Go file
	gofmt -w $$(git ls-files '*.go')

.PHONY: image image-push image-login

# The forwarder's container image (image/, a Go module of its own: go-containerregistry).
# The version and commit go into the binary (-X) and the image's labels; the
# commit time is the files' mtime and the created date, so a rebuild of one
# commit gives the same digest.
IMAGE_PLATFORMS := linux/amd64 linux/arm64
COMMIT_TIME ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
FORWARDER_LDFLAGS := -s -w $(BUILDINFO_LDFLAGS)
IMAGE ?=
REGISTRY ?=

image: ## the forwarder image for linux/amd64 and linux/arm64 as an OCI layout in dist/image/oci (no Docker engine, no base image); prints its digest, also in dist/image/digest
	@set -e; for p in $(IMAGE_PLATFORMS); do \
		echo "build dist/forwarder/$${p/\//-}/nodewright-forwarder"; \
		$(PROGRESS) -label "build forwarder $$p" -- \
			env GOOS=$${p%/*} GOARCH=$${p#*/} CGO_ENABLED=0 $(GO) build -v -trimpath -ldflags='$(FORWARDER_LDFLAGS)' \
			-o dist/forwarder/$${p/\//-}/nodewright-forwarder ./forwarder; \
	done
	cd image && $(GO) run . build -o ../dist/image -version $(VERSION) -commit $(COMMIT) -created $(COMMIT_TIME) \
		$(foreach p,$(IMAGE_PLATFORMS),$(p)=../dist/forwarder/$(subst /,-,$(p))/nodewright-forwarder)

image-push: image ## push the image to IMAGE=<repository> (the stack's ForwarderImageRepositoryUri output) as :<version>, with the Docker config's credentials; prints <repository>@<digest>, also in dist/image/pushed
	@if [ -z "$(IMAGE)" ]; then echo "image-push: set IMAGE=<repository>, e.g. the ForwarderImageRepositoryUri output of cdk deploy"; exit 2; fi
	cd image && $(GO) run . push -layout ../dist/image/oci -o ../dist/image/pushed $(IMAGE)

image-login: ## store the password read from stdin for REGISTRY=<host> in the Docker config, as docker login does (aws ecr get-login-password --region <region> | make image-login REGISTRY=<account>.dkr.ecr.<region>.amazonaws.com)
	@if [ -z "$(REGISTRY)" ]; then echo "image-login: set REGISTRY=<host>, e.g. 111122223333.dkr.ecr.us-east-1.amazonaws.com"; exit 2; fi
	cd image && $(GO) run . login -u AWS $(REGISTRY)

.PHONY: controlplane integration

controlplane: ## etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok into .cache/bin (built from local/tools; skipped when up to date)
	@GO=$(GO) $(PROGRESS) -label controlplane -- ./local/tools/build.sh .cache/bin

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
	@$(PROGRESS) -label "build the CLI" -- $(GO) build -v -ldflags='$(BUILDINFO_LDFLAGS)' -o bin/nodewright ./cmd/nodewright
	$(GO) run -ldflags='$(BUILDINFO_LDFLAGS)' ./cmd/nodewright demo

synth: build cdk-tools ## synthesize the CDK app (infra/) into cdk.out/ for SYNTH_CLUSTER (default "example"), with cdk-nag's AwsSolutions checks
	cd infra && $(GO) build -o ../bin/nodewright-infra .
	$(CDK_ENV) $(NODE_DIR)/node_modules/.bin/cdk synth --app bin/nodewright-infra --no-notices --quiet \
		-o cdk.out -c clusterName=$(SYNTH_CLUSTER) $(SYNTH_CONTEXT)
	@echo "synth: cdk.out/nodewright-$(SYNTH_CLUSTER).template.json"

clean: ## remove build outputs (dist/, bin/, cdk.out/); .cache/ keeps the control plane and the Node tools
	rm -rf dist bin cdk.out
