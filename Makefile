# Homing. `make help` lists the targets.
SHELL := /bin/bash

# Where the tests find PostgreSQL and Redis (read by internal/testenv). Values
# from the environment or the command line win: make test HOMING_TEST_REDIS_URL=...
export HOMING_TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/homing_test?sslmode=disable
export HOMING_TEST_REDIS_URL ?= redis://127.0.0.1:6379

# Packages to vet and test: make test PKG=./config/
PKG ?= ./...
# staticcheck 2025.1.1; the module proxy knows it by its module version.
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.6.1

.DEFAULT_GOAL := help
.PHONY: help build run test test-short cover screenshots bench lint fmt release clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

build: ## build every command into bin/
	go build -o bin/ ./cmd/...

run: ## worker, scheduler, API and console on 127.0.0.1 on a local Redis (SQLite by default); prints the console URL and an admin token
	scripts/run.sh

test: ## start (or install) PostgreSQL and Redis, then go vet and go test -race
	scripts/services.sh
	@command -v python3 >/dev/null || { echo "make: python3 is needed to test the Frappe app (integrations/frappe/homing_frappe); install Python 3.10+"; exit 1; }
	python3 -m unittest discover -s integrations/frappe/homing_frappe -t integrations/frappe/homing_frappe
	go vet $(PKG)
	go test -race -count=1 -timeout 20m $(PKG)
	scripts/cover.sh

cover: ## the hot path's coverage (dispatch, event, outbox) and every function of it no test reaches
	scripts/services.sh
	scripts/cover.sh

screenshots: ## drive the console in headless Chromium and save its pages into docs/console/
	scripts/services.sh
	HOMING_SCREENSHOTS=$(CURDIR)/docs/console go test -count=1 -run 'TestConsoleInABrowser|TestPortalInABrowser' ./tests/

test-short: ## the same with -short (skips the slow end-to-end tests)
	scripts/services.sh
	@command -v python3 >/dev/null || { echo "make: python3 is needed to test the Frappe app (integrations/frappe/homing_frappe); install Python 3.10+"; exit 1; }
	python3 -m unittest discover -s integrations/frappe/homing_frappe -t integrations/frappe/homing_frappe
	go vet $(PKG)
	go test -race -count=1 -short -timeout 20m $(PKG)

# Flags for the benchmark harness: make bench BENCH_FLAGS='-quick' or
# BENCH_FLAGS='-n 5000 -runs 5 -scenarios baseline,throughput'.
BENCH_FLAGS ?=

bench: ## the harness on real PostgreSQL and Redis (table + bench/results.json; BENCH_FLAGS=-quick), then go test -bench
	scripts/services.sh
	go run ./tests/bench $(BENCH_FLAGS)
	HOMING_BENCH_CONSOLE_ROWS=1000000 go test -run '^$$' -bench . -benchmem $(PKG)

lint: ## go vet, gofmt and staticcheck (vet and gofmt only when staticcheck cannot be fetched)
	go vet $(PKG)
	@test -z "$$(gofmt -l .)" || { gofmt -l .; echo "gofmt: the files above need make fmt"; exit 1; }
	@if go run $(STATICCHECK) -version >/dev/null 2>&1; then go run $(STATICCHECK) $(PKG); \
	else echo "lint: staticcheck ($(STATICCHECK)) is unavailable; ran go vet and gofmt only"; fi

fmt: ## format the code
	gofmt -w .

release: ## static builds of every command into bin/release/
	CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o bin/release/ ./cmd/...

clean: ## remove build output
	rm -rf bin
