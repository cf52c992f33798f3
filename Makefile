# Homing. `make help` lists the targets.
SHELL := /bin/bash
export HOMING_TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable
export HOMING_TEST_REDIS_URL ?= redis://127.0.0.1:6379

.DEFAULT_GOAL := help
.PHONY: help build run test test-short bench lint fmt release clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

build: ## build every command into bin/
	go build -o bin/ ./cmd/...

run: ## run worker + scheduler in the foreground (starts Redis if it can; SQLite by default)
	scripts/run.sh

test: ## start PostgreSQL and Redis if needed, then go vet and go test -race
	scripts/services.sh
	go vet ./...
	go test -race -count=1 -timeout 25m ./...

test-short: ## the same without the end-to-end tests
	scripts/services.sh
	go test -race -count=1 -short ./...

bench: ## run the benchmarks
	scripts/services.sh
	go test -run '^$$' -bench . -benchmem ./...

lint: ## go vet and gofmt
	go vet ./...
	@test -z "$$(gofmt -l .)" || (gofmt -l .; echo "gofmt: files above need formatting"; exit 1)

fmt: ## format the code
	gofmt -w .

release: ## static builds of every command into bin/release/
	CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o bin/release/ ./cmd/...

clean: ## remove build output
	rm -rf bin
