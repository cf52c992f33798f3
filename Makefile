# Homing. `make help` lists the targets.
SHELL := /bin/bash

# The tests use the PostgreSQL at 127.0.0.1:5432, where they create and drop
# only homing_tmpl_* and homing_t_* databases, and each test binary starts a
# redis-server of its own on a private port (internal/testing/testenv). To use other
# servers: make test HOMING_TEST_DATABASE_URL=postgres://... (a role that may
# create databases) or HOMING_TEST_REDIS_URL=redis://... (whose database
# indexes the tests may empty).

# make test builds the commands once, with -race, for every package's tests
# (testenv.Binaries), and once without it into bin/test/plain: the
# end-to-end tests run their long-running processes race-built, and their
# one-shot command lines and the resource-limit tests' processes plain
# (tests/e2e_test.go, plainDir). go vet -race compiles the dependencies as the race
# build and the tests will, so they are compiled once: on an empty build
# cache vet and the race build took 868 s of CPU with a plain vet, 505 s with
# vet -race (the files it then leaves out, //go:build !race, are one const).
TESTBIN := $(CURDIR)/bin/test
# go test's flags for make test. -parallel 6: the end-to-end tests under
# tests/ mostly wait on real processes, each test on a database and Redis
# index of its own. -p 4: go test builds and runs four packages at a time,
# not one per core, so that while tests/ and sweeper wait on processes and
# the database the other packages are compiled and run beside them (8 min
# at -p 2, 5 at -p 4 on 2 cores). The timeout has five times the headroom
# of the slowest package (README, "Testing").
# -ldflags=-w: the test binaries and commands are linked without DWARF,
# which only a debugger reads (race reports and panics symbolize from the
# binary's own tables): 5.4 s of CPU a link instead of 6.9, over 58 test
# binaries relinked after a change.
# -trimpath: what is compiled does not name the directory it was compiled
# in, so a clean clone in a new directory reuses the build cache of the
# last one instead of compiling the module's packages again (vet, both
# builds and the test binaries: 260 s of CPU in a new clone, 84 with
# -trimpath). go test runs each package's tests in its directory, so no
# test needs its source's path.
TEST_BUILDFLAGS := -trimpath -ldflags=-w
TEST_FLAGS ?= -race -count=1 -p 4 -parallel 6 -timeout 20m $(TEST_BUILDFLAGS)
# A race-built binary (every test binary, and the commands the end-to-end
# tests run) otherwise sleeps a second at exit so that late races can still be
# reported; races are reported either way.
export GORACE ?= atexit_sleep_ms=0
# The longest packages start first (go test runs them in the order named), so
# that the end-to-end tests overlap the rest instead of running last.
#
# The template engine's fork carries gonja's own suite (internal/gonja,
# FORK.md): upstream's specs of single-threaded Jinja semantics, 1,051 of
# them, which take 4 minutes of CPU with -race and 18 s without. They run
# without -race, after the rest: with it, they took a core from the
# end-to-end tests for minutes. Homing's concurrent use of the engine is
# race-checked by internal/engine/delivery/template's and condition's tests.
GONJA_PKGS := ./internal/gonja/...
TEST_PKGS = $(if $(filter ./...,$(PKG)),./tests ./internal/engine/sweeper ./internal/engine/delivery/... $(shell go list ./... | grep -v '/internal/gonja'),$(PKG))
# The hot path whose coverage make cover reports (scripts/cover.sh). Not in
# make test: -coverpkg instruments these four packages in every test binary,
# about 150 s of CPU on an empty build cache, for a figure nobody gates on.
COVERPKG := ./internal/engine/dispatch,./internal/engine/dispatch/storage,./internal/intake/event,./internal/intake/outbox

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

test: ## start (or install) PostgreSQL, redis-server, redis-sentinel and chromium, then go vet and go test -race
	scripts/services.sh
	@command -v python3 >/dev/null || { echo "make: python3 is needed to test the Frappe app (integrations/frappe/homing_frappe); install Python 3.10+"; exit 1; }
	python3 -m unittest discover -s integrations/frappe/homing_frappe -t integrations/frappe/homing_frappe
	go vet -race $(TEST_BUILDFLAGS) $(PKG)
	go build -race $(TEST_BUILDFLAGS) -o $(TESTBIN)/ ./cmd/...
	go build $(TEST_BUILDFLAGS) -o $(TESTBIN)/plain/ ./cmd/...
	HOMING_TEST_BIN=$(TESTBIN) go test $(TEST_FLAGS) $(TEST_PKGS)
	$(if $(filter ./...,$(PKG)),go test -count=1 $(TEST_BUILDFLAGS) $(GONJA_PKGS))

cover: ## the hot path's coverage (dispatch, event, outbox) and every function of it no test reaches
	scripts/services.sh
	go test -count=1 -coverpkg=$(COVERPKG) -coverprofile=bin/hotpath.cover ./internal/engine/dispatch/... ./internal/intake/event ./internal/intake/outbox ./tasks ./internal/ops/metrics
	scripts/cover.sh bin/hotpath.cover

screenshots: ## drive the console in headless Chromium and save its pages into docs/console/
	scripts/services.sh
	HOMING_SCREENSHOTS=$(CURDIR)/docs/console go test -count=1 -run 'TestConsoleInABrowser|TestPortalInABrowser|TestPortalCustomerInABrowser|TestPortalEmbeddedInAnotherSite|TestThemedPortalInABrowser' ./tests/

test-short: ## go test -short: the same without the end-to-end tests of real processes (never in CI)
	scripts/services.sh
	go vet -race $(TEST_BUILDFLAGS) $(PKG)
	go test -race -count=1 -short -timeout 10m $(TEST_BUILDFLAGS) $(PKG)

# Flags for the benchmark harness: make bench BENCH_FLAGS='-quick' or
# BENCH_FLAGS='-n 5000 -runs 5 -scenarios baseline,throughput'.
BENCH_FLAGS ?=

bench: ## the harness on real PostgreSQL and Redis (table + bench/results.json; BENCH_FLAGS=-quick), then go test -bench
	scripts/services.sh
	go run ./internal/testing/bench $(BENCH_FLAGS)
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
