# weir's developer entry points. `make test` installs what the tests need
# (redis-server from Debian, the pinned MinIO and staticcheck through the Go
# module proxy, cached in the Go bin directory), then runs vet, staticcheck
# and every test under -race, the integration tests against real Redis and
# MinIO included.

SHELL := /bin/bash
GO ?= go
GOBIN := $(shell $(GO) env GOPATH)/bin
MINIO_VERSION := v0.0.0-20260212201848-7aac2a2c5b7c
STATICCHECK_VERSION := v0.8.2
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
PKGS := ./...
TEST_TIMEOUT ?= 25m

export PATH := $(GOBIN):$(PATH)

.PHONY: chaos wasm-examples bench-wasm all build test deps deps-debian vet staticcheck unit bench bench-exchange bench-rows bench-e2e bench-checkpoints bench-requests bench-state bench-state-distributed bench-pebble-large bench-nexmark fuzz dev-up dev-down demo clean

all: build

build:
	$(GO) build -ldflags "-X github.com/weirstream/weir/cli.Commit=$$(git rev-parse --short HEAD 2>/dev/null)$$(git diff --quiet 2>/dev/null || echo -dirty) -X github.com/weirstream/weir/cli.BuildDate=$$(date -u +%Y-%m-%dT%H:%M:%SZ)" -o bin/weir ./cli/weir

# The Debian packages install while MinIO and staticcheck build: on a
# fresh machine the one waits on the network and the disk, the others on
# the processors.
deps:
	@$(MAKE) --no-print-directory -j3 deps-debian $(GOBIN)/minio $(GOBIN)/staticcheck

deps-debian:
	@{ command -v redis-server && command -v redis-cli; } >/dev/null || { \
		echo "installing redis-server and redis-tools (Debian; redis-cli creates the test Redis Clusters)"; \
		$(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq redis-server redis-tools >/dev/null; }
	@redis-server --version
	@command -v ip >/dev/null || { \
		echo "installing iproute2 (Debian; the partition tests make network namespaces)"; \
		$(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq iproute2 >/dev/null; }
	@command -v tmux >/dev/null || { \
		echo "installing tmux (Debian; a test reads weir jobs status --watch off its screen)"; \
		$(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq tmux >/dev/null; }
	@command -v chromium >/dev/null || { \
		echo "installing chromium (Debian; the web console is tested in a headless browser)"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq chromium >/dev/null; }
	@missing=""; command -v clang >/dev/null || missing="$$missing clang"; \
	command -v wasm-ld >/dev/null || missing="$$missing lld"; \
	[ -f /usr/lib/wasm32-wasi/libc.a ] || missing="$$missing wasi-libc"; \
	[ -n "$$(ls /usr/lib/llvm-*/lib/clang/*/lib/wasi/libclang_rt.builtins-wasm32.a 2>/dev/null)" ] || missing="$$missing libclang-rt-dev-wasm32"; \
	if [ -n "$$missing" ]; then echo "installing$$missing (Debian; the C Wasm guests)"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing >/dev/null; fi
	@clang --version | head -1

# MinIO takes ~5 minutes to build on 2 cores; the binary is cached in the
# Go bin directory (never committed). The stamp records the version.
$(GOBIN)/minio: Makefile
	@if [ -x $(GOBIN)/minio ] && [ "$$(cat $(GOBIN)/.minio-version 2>/dev/null)" = "$(MINIO_VERSION)" ]; then \
		touch $(GOBIN)/minio; \
	else \
		echo "building MinIO $(MINIO_VERSION) (about 5 minutes on 2 cores, once)"; \
		GOFLAGS=-buildvcs=false $(GO) install github.com/minio/minio@$(MINIO_VERSION) && \
		echo $(MINIO_VERSION) > $(GOBIN)/.minio-version; \
	fi

$(GOBIN)/staticcheck: Makefile
	@if ! $(GOBIN)/staticcheck -version 2>/dev/null | grep -q "$(STATICCHECK_VERSION)"; then \
		$(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION); \
	else touch $(GOBIN)/staticcheck; fi

# vet and staticcheck compile every dependency for their type information.
# They do so with -race, as the tests do, so that `make test` compiles each
# dependency once: on an empty build cache (CI's), vet, staticcheck and the
# tests' build took 375 + 102 + 598 s without it and 400 + 116 + 163 s with
# it (2 vCPU). The race build only adds the race tag, which only picks the
# race detector's side of a few test constants.
vet:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$unformatted" ]; then echo "gofmt would change: $$unformatted"; exit 1; fi
	$(GO) vet -race $(PKGS)

staticcheck: $(GOBIN)/staticcheck
	GOFLAGS="$(GOFLAGS) -race" $(GOBIN)/staticcheck $(PKGS)

# The longest exactness-only tests run in `make chaos`, each with a
# shorter test of the same contract left in `make test`:
#   TestWorkerCrashDetection (ten kills)   - TestChaosWorkerKills
#   TestRescaleUnderLoad                   - TestRescaleFilesAndRedis,
#                                            TestRescaleInPlace (coordinator)
#   TestAutoscaleLoadStep                  - TestAutoscalerScalesUnderLoad
#                                            (coordinator)
#   TestCalmUnderLoad (distributed)        - TestCalmUnderLoadEmbedded
#   TestClustersShareARedis                - TestRunBesideACluster
#   TestAutoscalerSteadyLoadStays          - the autoscale policy traces
#   TestRedisClusterWorkerKills,           - TestRedisClusterFailover, the
#   TestRedisClusterMasterCrash,             exchange and control contract
#   TestRedisClusterControlMasterCrash       suites on a Redis Cluster
#   TestChaosRedisRestart                  - TestRedisClusterFailover (lost
#                                            entries found, rolled back
#                                            exactly), the exchange's
#                                            Redis restart tests
#   TestChaosCoordinatorRestart            - TestCoordinatorFailover (three
#                                            kill -9 of the leader)
#   TestCoordinatorSplitBrain (SIGSTOP)    - TestPartitionedLeader (a leader
#                                            cut off from Redis)
#   TestPartitionedWorker (a worker cut    - TestChaosWorkerKills (workers
#   off from Redis, healed, rejoining)       lost, exact output),
#                                            TestPartitionedLeader (the cut)
# `go test ./...` by hand runs them all.
CHAOS_ONLY := TestWorkerCrashDetection|TestChaosRedisRestart|TestChaosCoordinatorRestart|TestCoordinatorSplitBrain|TestRescaleUnderLoad|TestAutoscaleLoadStep|TestCalmUnderLoad|TestClustersShareARedis|TestAutoscalerSteadyLoadStays|TestRedisClusterWorkerKills|TestRedisClusterMasterCrash|TestRedisClusterControlMasterCrash|TestPartitionedWorker

# The longest packages are listed first so that go test builds and starts
# them first: integration takes about as long as every other package
# together, and runs beside them rather than after most of them; builtin
# and pebblestate, left in ./...'s order, started only after integration
# ended and ran on alone. coordinator, whose tests wait on deadlines,
# starts first beside integration's own timed tests, before builtin's
# parallel ones take both cores. Two packages run at once (go test's
# default here): with three, timing tests failed (a close, a replica
# pause, a spec write under a deadline).
LONGEST_PKGS := ./integration/ ./coordinator/ ./functions/builtin/ ./statestore/pebblestate/ ./cli/ ./exchange/ ./examples/nexmark/
TEST_PARALLEL ?= 2

# -vet=off: `make test` runs the whole of go vet first; go test's own vet
# pass would analyze every package again.
unit:
	$(GO) test -race -vet=off -count=1 -p $(TEST_PARALLEL) -timeout $(TEST_TIMEOUT) -skip '^($(CHAOS_ONLY))$$' $(LONGEST_PKGS) $(PKGS)

test: deps vet staticcheck unit

# The fault and load tests at length: worker kills, coordinator and Redis
# restarts, a leader paused past its lease, MinIO outages, crash detection over ten kills, rescales under
# load, a load step under the autoscaler, two clusters on one Redis, worker
# kills and master failovers and crashes on a Redis Cluster, 8 jobs
# beside CPU burners for 3 minutes, and the autoscaler under a steady load
# for 3 minutes. make test runs the embedded calm test for 20 s and leaves
# the rest of these to this target (CHAOS_ONLY above).
chaos: deps
	set -o pipefail; WEIR_SOAK_SECONDS=180 $(GO) test -race -count=1 -timeout 60m -run 'TestChaos|TestCoordinatorSplitBrain|TestPartitionedWorker|TestWorkerCrashDetection|TestCalmUnderLoad|TestWasmZoneStatsUnderKills|TestRescaleUnderLoad|TestAutoscaleLoadStep|TestClustersShareARedis|TestRedisCluster' -v ./integration/ | tee .chaos.txt | grep -E '^(=== RUN|--- |ok|FAIL)|: (kill|detected|[0-9]+ kills|8 jobs|recovery|jobs scale|rescale)'
	set -o pipefail; WEIR_SOAK_SECONDS=180 $(GO) test -race -count=1 -timeout 10m -run 'TestAutoscalerSteadyLoadStays' -v ./coordinator/ | tee -a .chaos.txt | grep -E '^(=== RUN|--- |ok|FAIL)|utilization'

# Benchmarks write their results to docs/benchmarks.md by hand; see there.
bench: deps bench-exchange bench-rows bench-e2e bench-checkpoints bench-wasm

# The exchange alone (one channel), then the shuffle-heavy jobs (narrow and
# wide rows, parallelism 2, every event across the keyBy edge) embedded and
# on Redis side by side: events per CPU-second with Redis counted, and
# distributed / embedded. SHUFFLE_COMPRESSION=lz4 or zstd compresses the
# distributed run's entries.
bench-exchange: deps
	set -o pipefail; $(GO) test -run '^$$' -bench 'Throughput' -benchtime 2s -count 1 ./exchange/ | tee .bench-exchange.txt
	set -o pipefail; $(GO) test -run '^$$' -bench 'Shuffle' -benchtime 1x -count 3 -timeout 30m ./integration/ | tee -a .bench-exchange.txt

bench-rows:
	$(GO) test -run '^$$' -bench 'ExchangeRows' -benchtime 2s -count 1 ./integration/ | tee .bench-rows.txt

bench-e2e:
	$(GO) test -run '^$$' -bench 'EndToEnd' -benchtime 1x -count 2 -timeout 30m ./integration/ | tee .bench-e2e.txt

# A keyed function as a Go SDK function, Go-on-Wasm and C-on-Wasm (with
# and without deadline checks), 10M events each, and a module's first and
# cached start.
bench-wasm:
	$(GO) test -run '^$$' -bench 'WasmFunction' -benchtime 1x -count 1 -timeout 30m ./integration/ | tee .bench-wasm.txt

# Checkpoint overhead (off / 10s / 1s, state in MinIO) and recovery time
# after kill -9 of a worker.
bench-checkpoints:
	$(GO) test -run '^$$' -bench 'CheckpointOverhead' -benchtime 1x -count 1 -timeout 30m ./integration/ | tee .bench-checkpoints.txt
	$(GO) test -run '^$$' -bench 'Recovery' -benchtime 3x -count 1 -timeout 30m ./integration/ | tee -a .bench-checkpoints.txt

# Keyed state at scale: issue 14's job (a uniform int64 key into a 1-day
# tumbling count, parallelism 2, embedded) at 100K, 1M, 5M and 10M keys,
# checkpoints off and every 2 s: events per CPU-second, RSS and bytes per
# key, the longest snapshot stall and checkpoint, bytes uploaded; and the
# time a restore from a savepoint of that state takes; then the same
# window with its state in pebble stores of 64 MiB (STATE_PEBBLE_EVENTS,
# 10M: about 100K events a CPU-second, 20 minutes in all); then the
# process-function state on the heap and in pebble; then the memory a
# join's kept rows take per key (JOIN_MEM_KEYS, 4M). STATE_KEYS overrides
# the key counts, STATE_EVENTS the events (20M; 60M shows what
# checkpoints cost once the state is whole). The 10M-key runs need about
# 10 GiB of memory.
STATE_KEYS ?= 100000,1000000,5000000,10000000
STATE_EVENTS ?= 20000000
STATE_PEBBLE_EVENTS ?= 10000000
JOIN_MEM_KEYS ?= 4000000
bench-state:
	set -o pipefail; STATE_BENCH_KEYS='$(STATE_KEYS)' STATE_BENCH_EVENTS='$(STATE_EVENTS)' $(GO) test -run '^$$' -bench 'WindowState' -benchtime 1x -count 1 -timeout 60m ./integration/ | tee .bench-state.txt
	set -o pipefail; STATE_BENCH_STATE='{backend: pebble, memory: 64MiB}' STATE_BENCH_KEYS='$(STATE_KEYS)' STATE_BENCH_EVENTS='$(STATE_PEBBLE_EVENTS)' $(GO) test -run '^$$' -bench 'WindowState' -benchtime 1x -count 1 -timeout 60m ./integration/ | tee -a .bench-state.txt
	set -o pipefail; $(GO) test -run '^$$' -bench 'ProcessState' -benchtime 1x -count 1 -timeout 30m ./integration/ | tee -a .bench-state.txt
	set -o pipefail; JOIN_MEM_KEYS=$(JOIN_MEM_KEYS) $(GO) test -run '^$$' -bench 'JoinStateMemory' -benchtime 1x -count 1 ./functions/builtin/ | tee -a .bench-state.txt
	set -o pipefail; $(GO) test -run '^$$' -bench 'PeriodEnd' -benchtime 1x -count 1 ./functions/builtin/ | tee -a .bench-state.txt

# The same window-state job as bench-state, distributed as the issue
# measured it: a `weir coordinator` and a `weir worker` process on Redis
# (every event crosses the keyBy edge through it) and MinIO, with the CPU
# of all four counted; and, for the restore, a worker killed with SIGKILL
# and the restarted job's restore time. 60M events (STATE_DIST_EVENTS):
# with 20M, the job at 100K keys ends before its first checkpoint, and
# before the kill.
STATE_DIST_EVENTS ?= 60000000
bench-state-distributed: deps
	set -o pipefail; STATE_BENCH_MODE=distributed STATE_BENCH_KEYS='$(STATE_KEYS)' STATE_BENCH_EVENTS='$(STATE_DIST_EVENTS)' $(GO) test -run '^$$' -bench 'WindowState' -benchtime 1x -count 1 -timeout 60m ./integration/ | tee .bench-state-distributed.txt

# Pebble state several times the memory it is given (10M keys in stores
# of 32 MiB; PEBBLE_LARGE_KEYS, PEBBLE_LARGE_MEMORY) on a real cluster,
# under kill -9 and a rescale 2 -> 3, checked exactly. About 10 minutes.
# PEBBLE_LARGE_S3_DELAY=10ms delays what passes to and from MinIO, as S3.
bench-pebble-large: deps
	set -o pipefail; $(GO) test -run '^$$' -bench 'PebbleLargeState' -benchtime 1x -count 1 -timeout 60m -v ./integration/ | tee .bench-pebble-large.txt | grep -E '^(Benchmark|ok|FAIL|---)|pebble_test'

# Object-store requests per checkpoint (per job and per subtask, by op)
# of a keyed job at parallelism 2 and 4 on a real cluster, checkpoints
# every second, minus the same job's requests with checkpoints off.
bench-requests: deps
	set -o pipefail; $(GO) test -run '^$$' -bench 'CheckpointRequests' -benchtime 1x -count 1 -timeout 30m -v ./integration/ | tee .bench-requests.txt

# Nexmark q0..q11 (examples/nexmark), embedded and distributed: max-rate
# throughput per CPU-second, latency at 50% and 80% of it, hand-written
# baselines and q5's checkpoint overhead. Writes .bench-nexmark.md (for
# docs/benchmarks.md) and .bench-nexmark.txt. Options: QUERIES=q0,q5
# (default all), EVENTS=N (0: each query's default, >= 20 s at full
# speed), PARALLELISM=2, MODES=embedded,distributed. All queries take
# ~40 minutes (twice that if another process takes a core).
QUERIES ?=
EVENTS ?= 0
PARALLELISM ?= 2
MODES ?= embedded,distributed
bench-nexmark: deps
	set -o pipefail; NEXMARK_QUERIES='$(QUERIES)' NEXMARK_EVENTS='$(EVENTS)' NEXMARK_PARALLELISM='$(PARALLELISM)' NEXMARK_MODES='$(MODES)' \
		$(GO) test -run '^$$' -bench Nexmark -benchtime 1x -count 1 -timeout 120m ./integration/ | tee .bench-nexmark.txt

fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime 30s ./arrowfmt/
	$(GO) test -run '^$$' -fuzz FuzzJSONDecoder -fuzztime 30s ./arrowfmt/
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime 30s ./functions/spec/
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime 30s ./statestore/manifest/
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime 30s ./statestore/statefile/

dev-up: deps build
	deploy/dev-up.sh

dev-down:
	deploy/dev-down.sh

demo:
	$(GO) run ./cli/weir demo

# The Wasm example functions (examples/wasm), in Go (GOOS=wasip1) and C
# (clang, wasi-libc), into examples/wasm/build/.
WASM_OUT := examples/wasm/build
wasm-examples: deps
	bash examples/wasm/build-go.sh $(WASM_OUT)
	bash examples/wasm/build-c.sh $(WASM_OUT)
	@ls -l $(WASM_OUT)/*.wasm

clean:
	rm -rf bin weir-data weir-demo-output .bench-*.txt .chaos.txt examples/wasm/build
