# wizq — build, test and benchmark entry points. See README.md.
#
# `make` installs any missing Debian package the build needs, then builds
# (Release) into build/. `make test` builds and runs every test via ctest.

BUILD ?= build
JOBS ?= 2
# ctest's jobs. Most tests wait on leases, timeouts and child processes,
# not on a core: -j4 took 0.71 of -j2's time on 2 cores
# (docs/RELIABILITY.md, "How long the suite takes").
TEST_JOBS ?= 4
CMAKE_FLAGS ?=

# Debian packages the build and `make demo` need, and those only the tests,
# sanitizers and benchmarks need (see docs/DEPENDENCIES.md). `make demo`
# installs the first list only, so a newcomer's first command stays quick;
# `make test` installs both.
DEB_PACKAGES = cmake make g++ pkg-config git \
  libsimdjson-dev nlohmann-json3-dev libvalijson-dev libcli11-dev \
  zlib1g-dev libxxhash-dev libjemalloc-dev libgtest-dev libgmock-dev \
  libsqlite3-dev libpq-dev
DEB_TEST_PACKAGES = parallel jq tmux clang libclang-rt-14-dev \
  nodejs npm chromium postgresql openssl faketime iproute2 procps \
  debhelper dpkg-dev lintian debootstrap man-db bash-completion zsh fish

.PHONY: all build bin deps test-deps configure test deb-test asan tsan bench demo fuzz torture torture-machines torture-mutants format clean deb

all: build

# Installs the missing packages of $(1) (apt-get, as root or with sudo);
# node and npm count as present when they are on PATH.
define install_missing
	@missing=""; for p in $(1); do \
	  case $$p in nodejs) command -v node >/dev/null && continue;; \
	    npm) command -v npm >/dev/null && continue;; esac; \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing missing packages:$$missing"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y --no-install-recommends $$missing; \
	fi
endef

deps:
	$(call install_missing,$(DEB_PACKAGES))

test-deps: deps
	$(call install_missing,$(DEB_TEST_PACKAGES))

configure: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DWIZQ_WERROR=ON $(CMAKE_FLAGS) >/dev/null

# Everything: the library, the wizq binary, tests, benchmarks, fuzz replays.
build: configure
	cmake --build $(BUILD) -j$(JOBS)

# Just the wizq binary (build/wizq), what `make demo` needs.
bin: configure
	cmake --build $(BUILD) -j$(JOBS) --target wizq_cli

test: test-deps build
	cd $(BUILD) && ctest --output-on-failure -j$(TEST_JOBS) --timeout 600 -LE deb

# The Debian packages built, checked by lintian, installed into a fresh
# debootstrap'ed Debian 12, used and purged (tests/packaging/deb_test.sh;
# ~20 minutes on 2 cores). .ci/run runs it after `make test`.
deb-test: test-deps configure
	cd $(BUILD) && ctest --output-on-failure -L deb --timeout 1800

asan: test-deps
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWIZQ_SANITIZE=address,undefined >/dev/null
	cmake --build build-asan -j$(JOBS)
	cd build-asan && UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ctest --output-on-failure -j$(JOBS) --timeout 900 -LE deb

tsan: test-deps
	cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWIZQ_SANITIZE=thread >/dev/null
	cmake --build build-tsan -j$(JOBS)
	cd build-tsan && ctest --output-on-failure -j$(JOBS) --timeout 900 -LE deb

bench: test-deps build
	$(BUILD)/queue_bench
	bash bench/process_bench.sh $(BUILD)/wizq
	bash bench/reuse_bench.sh $(BUILD)/wizq
	$(BUILD)/mcp_bench --wizq $(BUILD)/wizq --tasks 2000 --agents 1,4

# Builds only the binary and runs the installer example into a fresh
# temporary install directory (stdin is /dev/null, so its confirm gate
# takes its default and the demo runs unattended).
demo: bin
	@dir=$$(mktemp -d /tmp/wizq-demo-XXXXXX); \
	echo "== wizq run examples/installer/workflow.jsonc --dir $$dir"; \
	$(BUILD)/wizq run examples/installer/workflow.jsonc --dir $$dir </dev/null && \
	echo "== wizq status --dir $$dir" && $(BUILD)/wizq status --dir $$dir && \
	echo "== $$dir/SUMMARY.txt" && cat $$dir/SUMMARY.txt && \
	echo "== kill it halfway and resume: see README.md"

format:
	clang-format -i $$(git ls-files '*.cc' '*.h')

clean:
	rm -rf build build-asan build-tsan

# Fuzzing (fuzz/, docs/RELIABILITY.md "Fuzzing"): builds the libFuzzer
# targets with clang, ASan and UBSan in $(FUZZ_BUILD), then fuzzes each for
# FUZZ_SECONDS on a copy of its seed corpus ($(FUZZ_BUILD)/corpus/<target>,
# which keeps growing across runs). Crashes go to
# $(FUZZ_BUILD)/artifacts/<target>/; the target fails if any target crashed.
# Dictionaries: fuzz/queue.dict (state files), fuzz/json.dict (the rest).
# `make fuzz FUZZ_SECONDS=300 FUZZ_TARGETS=queue_open_fuzzer` fuzzes one.
FUZZ_SECONDS ?= 60
FUZZ_BUILD ?= build-fuzz
FUZZ_TARGETS ?= snapshot_fuzzer audit_log_fuzzer queue_open_fuzzer \
  workflow_fuzzer response_fuzzer canonical_json_fuzzer barnum_log_fuzzer
FUZZ_FLAGS ?=
# -max_len per target: room for real files of a small run.
FUZZ_MAX_LEN_snapshot_fuzzer = 20000
FUZZ_MAX_LEN_audit_log_fuzzer = 30000
FUZZ_MAX_LEN_queue_open_fuzzer = 30000
FUZZ_MAX_LEN_workflow_fuzzer = 8192
FUZZ_MAX_LEN_response_fuzzer = 4096
FUZZ_MAX_LEN_canonical_json_fuzzer = 4096
FUZZ_MAX_LEN_barnum_log_fuzzer = 8192

fuzz: test-deps
	CC=clang CXX=clang++ cmake -S . -B $(FUZZ_BUILD) \
	  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWIZQ_FUZZ=ON >/dev/null
	cmake --build $(FUZZ_BUILD) -j$(JOBS) --target $(FUZZ_TARGETS)
	@failed=""; for t in $(FUZZ_TARGETS); do \
	  dict=fuzz/queue.dict; case $$t in \
	    snapshot_fuzzer) len=$(FUZZ_MAX_LEN_snapshot_fuzzer) ;; \
	    audit_log_fuzzer) len=$(FUZZ_MAX_LEN_audit_log_fuzzer) ;; \
	    queue_open_fuzzer) len=$(FUZZ_MAX_LEN_queue_open_fuzzer) ;; \
	    workflow_fuzzer) len=$(FUZZ_MAX_LEN_workflow_fuzzer); dict=fuzz/json.dict ;; \
	    response_fuzzer) len=$(FUZZ_MAX_LEN_response_fuzzer); dict=fuzz/json.dict ;; \
	    barnum_log_fuzzer) len=$(FUZZ_MAX_LEN_barnum_log_fuzzer); dict=fuzz/json.dict ;; \
	    *) len=$(FUZZ_MAX_LEN_canonical_json_fuzzer); dict=fuzz/json.dict ;; \
	  esac; \
	  mkdir -p $(FUZZ_BUILD)/corpus/$$t $(FUZZ_BUILD)/artifacts/$$t; \
	  cp -n fuzz/corpus/$$t/* $(FUZZ_BUILD)/corpus/$$t/ 2>/dev/null || true; \
	  echo "== $$t: $(FUZZ_SECONDS)s, -max_len=$$len"; \
	  $(FUZZ_BUILD)/fuzz/$$t $(FUZZ_BUILD)/corpus/$$t \
	    -dict=$$dict -max_total_time=$(FUZZ_SECONDS) -max_len=$$len -timeout=30 \
	    -rss_limit_mb=4096 -print_final_stats=1 \
	    -artifact_prefix=$(FUZZ_BUILD)/artifacts/$$t/ $(FUZZ_FLAGS) \
	    2>$(FUZZ_BUILD)/$$t.log; \
	  rc=$$?; grep -E "^(stat::number_of_executed_units|stat::new_units_added)|^#[0-9]+[[:space:]]+DONE" $(FUZZ_BUILD)/$$t.log; \
	  if [ $$rc -ne 0 ]; then failed="$$failed $$t"; \
	    grep -A30 -E "^==[0-9]+==ERROR|FUZZ_CHECK|runtime error" $(FUZZ_BUILD)/$$t.log | head -40; fi; \
	done; \
	if [ -n "$$failed" ]; then \
	  echo "fuzz: crashes in:$$failed (see $(FUZZ_BUILD)/<target>.log and $(FUZZ_BUILD)/artifacts/)"; exit 1; \
	fi; echo "fuzz: no crash"

# Kill -9 torture (tests/torture/, docs/RELIABILITY.md "Kill -9 torture"):
# wizq_torture SIGKILLs the real binary at random moments on the fan-out
# workflow and checks every completed run (lost, duplicated, overlapped,
# extra runs matched to kills, queue.json parsed at every kill): one process
# (TORTURE_SINGLE cycles), its whole process group, half the time with its
# task trees (TORTURE_GROUP), one of three processes sharing the directory
# (TORTURE_MULTI). About 7 minutes on 2 CPUs; the summary lines are printed
# at the end (and kept in $(BUILD)/torture-<mode>.out). TORTURE_FLAGS is
# passed on, e.g. TORTURE_FLAGS="--seed 42 --fanout 40".
TORTURE_SINGLE ?= 1000
TORTURE_GROUP ?= 300
TORTURE_MULTI ?= 300
TORTURE_FLAGS ?=
# Pool mode (tests/torture/pool_torture.cc): kills of `wizq run` and of
# `wizq agent serve` (with or without its agent COMMAND) on one directory.
TORTURE_POOL ?= 300

torture: test-deps configure
	cmake --build $(BUILD) -j$(JOBS) --target wizq_cli wizq_torture wizq_pool_torture
	@failed=""; for spec in single:$(TORTURE_SINGLE) group:$(TORTURE_GROUP) \
	    multi:$(TORTURE_MULTI); do \
	  mode=$${spec%%:*}; cycles=$${spec#*:}; start=$$(date +%s); \
	  echo "== wizq_torture --mode $$mode --cycles $$cycles $(TORTURE_FLAGS)"; \
	  $(BUILD)/wizq_torture --wizq $(BUILD)/wizq --mode $$mode \
	    --cycles $$cycles $(TORTURE_FLAGS) >$(BUILD)/torture-$$mode.out \
	    || failed="$$failed $$mode"; \
	  echo "   $$(($$(date +%s) - start)) s"; \
	done; \
	echo "== wizq_pool_torture --cycles $(TORTURE_POOL)"; \
	$(BUILD)/wizq_pool_torture --wizq $(BUILD)/wizq --cycles $(TORTURE_POOL) \
	  >$(BUILD)/torture-pool.out || failed="$$failed pool"; \
	echo "== wizq_machines_torture --faults $(TORTURE_MACHINES_FAULTS)"; \
	$(MAKE) --no-print-directory torture-machines >/dev/null || failed="$$failed machines"; \
	echo "== summary"; \
	cat $(BUILD)/torture-single.out $(BUILD)/torture-group.out \
	  $(BUILD)/torture-multi.out $(BUILD)/torture-pool.out; \
	tail -n 16 $(BUILD)/torture-machines.out; \
	if [ -n "$$failed" ]; then echo "torture: FAILED:$$failed"; exit 1; fi; \
	echo "torture: passed"

# Machines mode (tests/machines/torture/, docs/RELIABILITY.md "Many
# machines under faults"; needs root): 4 machines as network namespaces,
# two `wizq run` (one of them `run --agent` on every other machine), one
# `wizq agent serve` and one MCP or CLI agent each, sharing runs on one
# PostgreSQL store through a fault proxy, under TORTURE_MACHINES_FAULTS
# faults (partitions, machine deaths, freezes, stopped workers, database
# crashes, terminated sessions, stalled, dropped and half-open
# connections, dropped COMMITs and COMMIT replies), at least
# TORTURE_MACHINES_MIN of each kind with an attempt in flight. About 18
# minutes; `make test` runs 33 faults on 3 machines.
TORTURE_MACHINES_FAULTS ?= 500
TORTURE_MACHINES_MIN ?= 20
TORTURE_MACHINES_FLAGS ?=
torture-machines: test-deps configure
	cmake --build $(BUILD) -j$(JOBS) --target wizq_machines_torture
	sh tests/mcp/npm_setup.sh tests/mcp $(BUILD)/node >/dev/null
	$(BUILD)/wizq_machines_torture --build $(abspath $(BUILD)) --source $(CURDIR) \
	  --machines 4 --faults $(TORTURE_MACHINES_FAULTS) \
	  --min-per-kind $(TORTURE_MACHINES_MIN) --lease 5 --max-seconds 2700 \
	  $(TORTURE_MACHINES_FLAGS) >$(BUILD)/torture-machines.out; rc=$$?; \
	  cat $(BUILD)/torture-machines.out; exit $$rc

# Mutants (cmake/mutants.cmake): for each guard of the PostgreSQL path, a
# build of its own with that guard compiled out (-DWIZQ_MUTANT=NAME; never
# a switch of the shipped binary), tortured at TORTURE_MUTANT_FAULTS
# faults on 4 machines. Fails unless the checker catches every mutant
# (the torture exits 1); prints what caught each. About 8 minutes a mutant.
TORTURE_MUTANTS ?= fence local_deadline guarded_rescue keepalives outcome_reread
TORTURE_MUTANT_FAULTS ?= 110
torture-mutants: test-deps
	@missed=""; for m in $(TORTURE_MUTANTS); do \
	  dir=$(BUILD)-mutant-$$m; \
	  cmake -S . -B $$dir -DCMAKE_BUILD_TYPE=Release -DWIZQ_WERROR=ON -DWIZQ_MUTANT=$$m \
	    $(CMAKE_FLAGS) >/dev/null && \
	  cmake --build $$dir -j$(JOBS) --target wizq_machines_torture >/dev/null && \
	  sh tests/mcp/npm_setup.sh tests/mcp $$dir/node >/dev/null || exit 2; \
	  echo "== mutant $$m"; \
	  if $$dir/wizq_machines_torture --build $(abspath $$dir) --source $(CURDIR) \
	      --machines 4 --faults $(TORTURE_MUTANT_FAULTS) --min-per-kind 0 \
	      --lease 5 --max-seconds 1500 --run-seconds 180 $(TORTURE_MACHINES_FLAGS) \
	      >$$dir/torture-mutant.out 2>&1; then \
	    echo "   NOT caught"; missed="$$missed $$m"; \
	  else \
	    grep -E '^MACHINES-TORTURE|^ERROR' $$dir/torture-mutant.out | cut -c1-200 | head -4; \
	  fi; \
	done; \
	if [ -n "$$missed" ]; then echo "torture-mutants: not caught:$$missed"; exit 1; fi; \
	echo "torture-mutants: every mutant caught"

# `wizq crashtest` of the installer example at every kill point (power cut):
# a few minutes; `make test` runs 3 of them (tests/crashtest_test.cc).
.PHONY: crashtest-example
crashtest-example: bin
	$(BUILD)/wizq crashtest examples/installer/workflow.jsonc

# Debian packages (docs/INSTALL.md, "Debian packages"): wizq, libwizq0 and
# libwizq-dev, built the Debian way (debian/, debhelper and the CMake build)
# by dpkg-buildpackage on a copy of the tree in $(DEB_BUILD), then copied
# into DEB_OUT (default: here), so that `sudo apt install ./wizq_*.deb`
# works. The version is project(wizq VERSION) of CMakeLists.txt, which
# debian/changelog must repeat (configuring checks it).
DEB_BUILD ?= $(BUILD)/deb
DEB_OUT ?= .
DEB_BUILD_TOOLS = debhelper dpkg-dev
VERSION := $(shell sed -n 's/^project.wizq VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)

deb: deps
	$(call install_missing,$(DEB_BUILD_TOOLS))
	rm -rf $(DEB_BUILD) && mkdir -p $(DEB_BUILD)/wizq-$(VERSION)
	tar -c --exclude=./.git --exclude='./build*' --exclude=./$(BUILD) \
	  --exclude='./*.deb' --exclude='./*.ddeb' --exclude=./fuzz-out -f - . | \
	  tar -x -C $(DEB_BUILD)/wizq-$(VERSION) -f -
	cd $(DEB_BUILD)/wizq-$(VERSION) && DEB_BUILD_OPTIONS="parallel=$(JOBS) $$DEB_BUILD_OPTIONS" \
	  dpkg-buildpackage -b --no-sign >../dpkg-buildpackage.log 2>&1 || \
	  { tail -n 40 ../dpkg-buildpackage.log; \
	    echo "make deb: dpkg-buildpackage failed; see $(DEB_BUILD)/dpkg-buildpackage.log"; exit 1; }
	mkdir -p $(DEB_OUT) && cp $(DEB_BUILD)/*.deb $(DEB_OUT)/
	@ls $(DEB_BUILD)/*.deb | sed 's|.*/|make deb: $(DEB_OUT)/|'

# Install (docs/INSTALL.md): the library (libwizq.a, libwizq.so.X.Y.Z), the
# public headers, the wizq binary, the CMake package (find_package(wizq))
# and wizq.pc under PREFIX; DESTDIR stages them for a package. Configures
# $(BUILD) with CMAKE_INSTALL_PREFIX=$(PREFIX) (PREFIX=/usr installs the
# library into Debian's lib/x86_64-linux-gnu) and builds only what is
# installed. `make install PREFIX=$$HOME/.local`.
PREFIX ?= /usr/local
WIZQ_INSTALL_TARGETS = wizq_cli wizq_shared wizq_static wizq_docs
.PHONY: install demo-embed

install: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DWIZQ_WERROR=ON \
	  -DCMAKE_INSTALL_PREFIX=$(PREFIX) $(CMAKE_FLAGS) >/dev/null
	cmake --build $(BUILD) -j$(JOBS) --target $(WIZQ_INSTALL_TARGETS)
	DESTDIR=$(DESTDIR) cmake --install $(BUILD)

# Installs wizq into a temporary prefix, builds EMBED_EXAMPLE there as an
# outside project (find_package(wizq)) and runs EMBED_PROGRAM --dir on a
# fresh temporary install directory (then EMBED_ARGS), stdin from /dev/null
# (tests/packaging/outside_build.sh; EMBED_MODE=pc builds with pkg-config
# instead). examples/embed when it exists, else tests/packaging/consumer.
EMBED_EXAMPLE ?= $(if $(wildcard examples/embed/CMakeLists.txt),examples/embed,tests/packaging/consumer)
EMBED_PROGRAM ?= $(if $(findstring tests/packaging/consumer,$(EMBED_EXAMPLE)),wizq-consumer,embed-wizard)
EMBED_MODE ?= cmake
EMBED_ARGS ?= $(if $(findstring tests/packaging/consumer,$(EMBED_EXAMPLE)),,--mirror $(CURDIR)/examples/installer/mirror)

demo-embed: configure
	cmake --build $(BUILD) -j$(JOBS) --target $(WIZQ_INSTALL_TARGETS)
	@tmp=$$(mktemp -d /tmp/wizq-demo-embed-XXXXXX); \
	echo "== cmake --install $(BUILD) --prefix $$tmp/prefix"; \
	cmake --install $(BUILD) --prefix $$tmp/prefix >/dev/null && \
	echo "== build $(EMBED_EXAMPLE) against it ($(EMBED_MODE)) in $$tmp/build," \
	  "run $(EMBED_PROGRAM) --dir $$tmp/install" && \
	WIZQ_JOBS=$(JOBS) sh tests/packaging/outside_build.sh $(EMBED_MODE) \
	  $$tmp/prefix $(abspath $(EMBED_EXAMPLE)) $$tmp/build -- \
	  $(EMBED_PROGRAM) --dir $$tmp/install $(EMBED_ARGS)
