# zerohop build. Every target installs what it needs, idempotently.
SHELL := /bin/bash
GO    ?= go
BIN   := bin

.PHONY: all build test vet fmt-check demo bench bench-pool deps

all: build

deps:
	@true

build: deps
	$(GO) build -o $(BIN)/ ./cmd/...

vet:
	$(GO) vet ./...

fmt-check:
	@out="$$(gofmt -l $$(git ls-files -co --exclude-standard '*.go'))"; \
	if [ -n "$$out" ]; then echo "gofmt: these files need formatting:"; echo "$$out"; exit 1; fi

test: deps vet fmt-check
	$(GO) test -race ./...

bench-pool:
	$(GO) test -run '^$$' -bench . -benchmem -count 5 ./pinned/
