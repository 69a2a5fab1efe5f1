# lockd — make targets. `make test` is the test command CI runs.
GO ?= go

.PHONY: test vet lint unit python-test race bench fuzz build docker doc-docker jepsen-smoke jepsen-full

test: vet lint unit python-test

vet:
	$(GO) vet ./...

# staticcheck (honnef.co/go/tools), pinned as a tool in go.mod.
lint:
	$(GO) tool staticcheck ./...

# Packages whose tests build and run lockd binaries themselves
# (lockdtest.Main): go test's cache cannot see those binaries change, so
# their results are never taken from it.
SPAWNING = ./api/client ./cmd/lockctl ./cmd/lockd/e2e ./jepsen/workload
unit:
	@command -v chromium >/dev/null || echo "note: chromium is not installed: the dashboard's browser tests (api TestUI*) will be skipped; as root: apt-get install -y chromium (.ci/run does), then make test"
	$(GO) test $$($(GO) list ./... | grep -v -e '/api/client$$' -e '/cmd/lockctl$$' -e '/cmd/lockd/e2e$$' -e '/jepsen/workload$$')
	$(GO) test -count=1 $(SPAWNING)

# The Python client's tests (api/python/tests): pytest against lockd
# processes the tests build with $(GO) and start on free loopback ports.
# They need pytest, venv and setuptools for $(PYTHON): as root with apt,
# installed from Debian's packages when missing (as .ci/run does).
PYTHON ?= /usr/bin/python3
PYTHON_DEBS = python3-pytest python3-venv python3-setuptools
python-test:
	@$(PYTHON) -m pytest --version >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
		echo "python-test: installing $(PYTHON_DEBS)" && apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(PYTHON_DEBS) >/dev/null; } || { \
		echo "python-test: '$(PYTHON) -m pytest' is not available. Install it (as root) with:"; \
		echo "    apt-get install -y $(PYTHON_DEBS)"; \
		echo "or run make with PYTHON=<a python that has pytest>."; exit 1; }
	cd api/python && LOCKD_GO="$(GO)" PYTHONDONTWRITEBYTECODE=1 $(PYTHON) -m pytest -q -p no:cacheprovider tests

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
	$(GO) test -run '^$$' -fuzz '^FuzzAPI$$' -fuzztime $(FUZZTIME) ./api/
	$(GO) test -run '^$$' -fuzz '^FuzzAPIDecode$$' -fuzztime $(FUZZTIME) ./api/

# Static binaries in bin/ (no cgo: they run in a FROM scratch image).
build:
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/ ./cmd/...

# The lockd:dev image (see Dockerfile and docs/operations.md); then
# `docker-compose up -d` (or `docker compose up -d`) starts 3 nodes.
IMAGE ?= lockd:dev
docker:
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/lockd ./cmd/lockd
	docker build -t $(IMAGE) .

# The pages whose command blocks run in the tests (docs/operations.md,
# docs/security.md), their Docker blocks included: `make docker`, then
# the compose file's own cluster (project lockd, 10.77.0.0/24, host
# ports 7001-7005; the jepsen runs use other projects, subnets and ports),
# taken down with its volumes at the end. Needs Docker and docker-compose;
# refuses to run while project lockd has containers or volumes. About a
# minute.
doc-docker:
	LOCKD_DOC_DOCKER=1 $(GO) test -count=1 -timeout 30m -run '^(TestDocOperations|TestDocSecurity)$$' ./cmd/lockd/e2e

# Jepsen-style fault injection against the docker compose cluster
# (docs/jepsen.md). The smoke run (jepsen/smoke.sh, under 5 minutes): 3
# nodes, mutex, 90 s of partitions, kill -9, pauses, clock steps and
# membership changes (ACLs on, with the intruder), checked to include a
# clock and a membership fault; then four short negative controls side by
# side that must be flagged: no-consensus, wall-clock, intruder-admin and
# lone-replacement. Each run brings its cluster up, tears it down and
# exits non-zero unless judged as expected.
jepsen-smoke:
	jepsen/smoke.sh

# The partition/kill/pause/mixed matrix of docs/jepsen.md and every
# negative control (about an hour, 3 clusters side by side); the clock,
# membership, disk and upgrade rows need FAULTS and EXTRA (see
# jepsen/matrix.sh).
jepsen-full:
	jepsen/matrix.sh
