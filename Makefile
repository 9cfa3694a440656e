# wizq — build, test and benchmark entry points. See README.md.
#
# `make` installs any missing Debian package the build needs, then builds
# (Release) into build/. `make test` builds and runs every test via ctest.

BUILD ?= build
JOBS ?= 2
CMAKE_FLAGS ?=

# Debian packages the build, tests and benchmarks need (see docs/DEPENDENCIES.md).
DEB_PACKAGES = cmake make g++ pkg-config git \
  libsimdjson-dev nlohmann-json3-dev libvalijson-dev libcli11-dev \
  zlib1g-dev libxxhash-dev libgtest-dev libgmock-dev libsqlite3-dev \
  parallel jq clang libclang-rt-14-dev

.PHONY: all build deps test asan tsan bench demo fuzz torture format clean

all: build

deps:
	@missing=""; for p in $(DEB_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing missing packages:$$missing"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y --no-install-recommends $$missing; \
	fi

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DWIZQ_WERROR=ON $(CMAKE_FLAGS) >/dev/null
	cmake --build $(BUILD) -j$(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS) --timeout 600

asan: deps
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWIZQ_SANITIZE=address,undefined >/dev/null
	cmake --build build-asan -j$(JOBS)
	cd build-asan && UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ctest --output-on-failure -j$(JOBS) --timeout 900

tsan: deps
	cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWIZQ_SANITIZE=thread >/dev/null
	cmake --build build-tsan -j$(JOBS)
	cd build-tsan && ctest --output-on-failure -j$(JOBS) --timeout 900

bench: build
	$(BUILD)/queue_bench

# Runs the installer example into a fresh temporary install directory.
demo: build
	@dir=$$(mktemp -d /tmp/wizq-demo-XXXXXX); \
	echo "== wizq run examples/installer/workflow.jsonc --dir $$dir"; \
	$(BUILD)/wizq run examples/installer/workflow.jsonc --dir $$dir && \
	echo "== wizq status --dir $$dir" && $(BUILD)/wizq status --dir $$dir && \
	echo "== $$dir/SUMMARY.txt" && cat $$dir/SUMMARY.txt && \
	echo "== kill it halfway and resume: see README.md"

format:
	clang-format -i $$(git ls-files '*.cc' '*.h')

clean:
	rm -rf build build-asan build-tsan
