# lockd — make targets. `make test` is the test command CI runs: vet,
# staticcheck, every Go test with the race detector, the Python tests.
GO ?= go

.PHONY: test test-elections vet lint unit python-test bench fuzz build docker jepsen-image doc-docker jepsen-smoke jepsen-full

# The Go tests and the Python tests run side by side: both spend most of
# their time waiting on the clusters they start, not computing. Each
# one's output is shown when it ends (--output-sync), the Python tests'
# first; a failure of either fails make test after both ended.
test: vet lint
	@echo "make test: unit and python-test side by side; each one's output appears when it ends"
	@$(MAKE) --no-print-directory -j2 --output-sync=target unit python-test

# The jepsen suite's build of lockd: the build tag that adds the suite's
# flags, --unsafe (its negative controls, which break a guarantee on
# purpose) and --test-clock-hook (its clock nemesis). A production lockd
# is built without it and has neither (docs/jepsen.md, "Negative
# controls"). Vet, staticcheck and the tests run both builds.
FAULTS_TAG = lockd_faults
# The packages with files of their own in the suite's build (a build line
# naming $(FAULTS_TAG)): the only ones whose checked code differs in it,
# so the only ones vet and staticcheck look at again with the tag.
FAULTS_SRC_PKGS = $(sort $(addprefix ./,$(dir $(patsubst ./%,%,$(shell grep -rlE --include='*.go' '^//go:build .*$(FAULTS_TAG)' .)))))

vet:
	@! git grep -nE '^(<<<<<<<|>>>>>>>) ' -- . 2>/dev/null || { echo "vet: a merge's conflict markers are committed (above)"; exit 1; }
	$(GO) vet ./...
	$(GO) vet -tags $(FAULTS_TAG) $(FAULTS_SRC_PKGS)

# staticcheck (honnef.co/go/tools), pinned as a tool in go.mod.
lint:
	$(GO) tool staticcheck ./...
	$(GO) tool staticcheck -tags $(FAULTS_TAG) $(FAULTS_SRC_PKGS)

# The Go tests, once, with the race detector on. -timeout is per test
# binary (per package): a hang is cut there, and its panic names the
# package and the tests that were running, well inside CI's budget.
# gotestsum (pinned as a tool in go.mod) prints a line a package and the
# output of each failed test, and keeps go test's JSON events in
# $(TESTOUT) for .ci/failures. Packages that start lockd binaries they
# build themselves (lockdtest) are cached only while those binaries'
# sources are unchanged.
#
# Then the tests of the suite's build: those in test files built only
# with $(FAULTS_TAG) (FAULTS_TESTS, found in FAULTS_FILES), in their
# packages only, each run once: the rest ran above.
# -p 3: three packages' tests at once on two cores, since most of their
# time is spent waiting (elections, expiries, paused nodes), not computing.
GOTESTFLAGS ?= -race -timeout 6m -p 3
# The packages whose tests take longest (minutes: clusters, end-to-end
# runs), named first so that go test starts them first (it runs
# packages in the order named, -p at a time): last, raftnode's alone
# was the run's tail.
SLOW_PKGS = ./api ./raftnode ./cmd/lockd/e2e ./jepsen/workload ./lockstate ./fsm ./cmd/lockctl ./api/client
TESTOUT ?= .ci/out
GOTESTSUM = $(GO) tool gotestsum --format pkgname-and-test-fails --format-hide-empty-pkg
FAULTS_FILES = $(shell grep -rlE --include='*_test.go' '^//go:build (.* )?$(FAULTS_TAG)' .)
FAULTS_PKGS = $(sort $(dir $(FAULTS_FILES)))
FAULTS_TESTS = ^($(shell sed -n 's/^func \(Test[A-Za-z0-9_]*\)(t \*testing\.T).*/\1/p' $(FAULTS_FILES) | paste -sd'|'))$$
unit:
	@command -v chromium >/dev/null || echo "note: chromium is not installed: the dashboard's browser tests (api TestUI*) will be skipped; as root: apt-get install -y chromium (.ci/run does), then make test"
	@mkdir -p $(TESTOUT)
	$(GOTESTSUM) --jsonfile $(TESTOUT)/go-test.json -- $(GOTESTFLAGS) $(SLOW_PKGS) ./...
	$(GOTESTSUM) --jsonfile $(TESTOUT)/go-test-faults.json -- $(GOTESTFLAGS) -tags $(FAULTS_TAG) -run '$(FAULTS_TESTS)' $(FAULTS_PKGS)

# The Python client's tests (api/python/tests): pytest against lockd
# processes the tests build with $(GO) and start on free loopback ports.
# They need pytest, venv and setuptools for $(PYTHON): as root with apt,
# installed from Debian's packages when missing (as .ci/run does).
PYTHON ?= /usr/bin/python3
PYTHON_DEBS = python3-pytest python3-venv python3-setuptools
# The whole pytest run's deadline: a hang is cut here, named, not by CI.
PYTEST_TIMEOUT ?= 6m
python-test:
	@$(PYTHON) -m pytest --version >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
		echo "python-test: installing $(PYTHON_DEBS)" && apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(PYTHON_DEBS) >/dev/null; } || { \
		echo "python-test: '$(PYTHON) -m pytest' is not available. Install it (as root) with:"; \
		echo "    apt-get install -y $(PYTHON_DEBS)"; \
		echo "or run make with PYTHON=<a python that has pytest>."; exit 1; }
	cd api/python && LOCKD_GO="$(GO)" PYTHONDONTWRITEBYTECODE=1 timeout -k 10s $(PYTEST_TIMEOUT) \
		$(PYTHON) -m pytest -q -rfE -p no:cacheprovider tests || { rc=$$?; \
		[ $$rc = 124 ] && echo "python-test: pytest ran past $(PYTEST_TIMEOUT) and was stopped"; exit $$rc; }

# Every test under provoked elections: raft's timing of every test
# cluster cut to LOCKD_TEST_TIMING (lockdtest.Timing; 0.05: heartbeats and
# elections of 50 ms) and one P per test binary, so that leaders change
# mid-test. A test that cannot hold while leaders change says why and
# skips (lockdtest.ProvokedElections). Not cached: elections differ from
# run to run.
ELECTION_TIMING ?= 0.05
test-elections:
	@mkdir -p $(TESTOUT)
	LOCKD_TEST_TIMING=$(ELECTION_TIMING) $(GOTESTSUM) --jsonfile $(TESTOUT)/go-test-elections.json -- \
		-race -timeout 8m -count=1 -cpu 1 ./...
	LOCKD_TEST_TIMING=$(ELECTION_TIMING) $(GOTESTSUM) --jsonfile $(TESTOUT)/go-test-elections-faults.json -- \
		-race -timeout 8m -count=1 -cpu 1 -tags $(FAULTS_TAG) -run '$(FAULTS_TESTS)' $(FAULTS_PKGS)
	LOCKD_TEST_TIMING=$(ELECTION_TIMING) $(MAKE) python-test

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

# The jepsen suite's image, lockd:faults: lockd built with $(FAULTS_TAG)
# (bin/faults/lockd), which the suite's runs use (jepsen/compose/jepsen.yml;
# lockjepsen builds it too, unless --build=false). Test-only: never deploy it.
JEPSEN_IMAGE = lockd:faults
jepsen-image:
	CGO_ENABLED=0 $(GO) build -trimpath -tags $(FAULTS_TAG) -o bin/faults/lockd ./cmd/lockd
	docker build --build-arg LOCKD_BIN=bin/faults/lockd -t $(JEPSEN_IMAGE) .

# The pages whose command blocks run in the tests (docs/operations.md,
# docs/security.md), their Docker blocks included: `make docker`, then
# the compose file's own cluster (project lockd, 10.77.0.0/24, host
# ports 7001-7005; the jepsen runs use other projects, subnets and ports),
# taken down with its volumes at the end. Needs Docker and docker-compose;
# refuses to run while project lockd has containers or volumes. About a
# minute.
doc-docker:
	@mkdir -p $(TESTOUT)
	LOCKD_DOC_DOCKER=1 $(GOTESTSUM) --jsonfile $(TESTOUT)/go-test-doc-docker.json -- \
		-count=1 -timeout 10m -run '^(TestDocOperations|TestDocSecurity)$$' ./cmd/lockd/e2e

# Jepsen-style fault injection against the docker compose cluster, on
# the suite's image (docs/jepsen.md). The smoke run (jepsen/smoke.sh, under 5 minutes): 3
# nodes, mutex, 90 s of partitions, kill -9, pauses, clock steps and
# membership changes (ACLs on, with the intruder), checked to include a
# clock and a membership fault; then four short negative controls side by
# side that must be flagged: no-consensus, wall-clock, intruder-admin and
# lone-replacement, and beside them a 40 s election run under faults and
# its control, stale-proclaim. Each run brings its cluster up, tears it
# down and exits non-zero unless judged as expected.
jepsen-smoke:
	jepsen/smoke.sh

# The partition/kill/pause/mixed matrix of docs/jepsen.md and every
# negative control (about an hour, 3 clusters side by side); the clock,
# membership, disk and upgrade rows need FAULTS and EXTRA (see
# jepsen/matrix.sh).
jepsen-full:
	jepsen/matrix.sh
