# lockd — make targets. `make test` is the test command CI runs.
GO ?= go

.PHONY: test vet unit race bench fuzz build

test: vet unit

vet:
	$(GO) vet ./...

unit:
	$(GO) test ./...

race:
	$(GO) test -race ./...

# Benchmarks of the engine (see docs/performance.md for the numbers).
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./lockstate/ ./fsm/

# A short fuzzing pass over every fuzz target (seed corpora run in `make test`).
FUZZTIME ?= 30s
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) ./fsm/
	$(GO) test -run '^$$' -fuzz '^FuzzApplySequence$$' -fuzztime $(FUZZTIME) ./fsm/
	$(GO) test -run '^$$' -fuzz '^FuzzOps$$' -fuzztime $(FUZZTIME) ./lockstate/

build:
	CGO_ENABLED=0 $(GO) build -o bin/ ./cmd/...
