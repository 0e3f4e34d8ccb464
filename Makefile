# gnomon: the two set-up commands are `make run` and `make test` (see README.md).
PRESET ?= dev
BUILD := build/$(PRESET)
GNOMON := $(BUILD)/apps/gnomon/gnomon
JOBS ?= $(shell nproc)

.PHONY: all deps configure build test test-asan test-tsan run bench bench-scale fuzz format format-check check-thread-safety clean chaos screenshots

all: build

deps:
	@scripts/install-deps.sh

configure: deps
	@cmake --preset $(PRESET) >/dev/null

build: configure
	@cmake --build --preset $(PRESET) -j $(JOBS)

# Every test: unit tests, conformance, integration (real servers started by the tests).
test: build
	@ctest --preset $(PRESET) -j $(JOBS) --timeout 600 $(CTEST_ARGS)

test-asan:
	@$(MAKE) --no-print-directory test PRESET=asan-ubsan

# TSan: the unit and conformance tests (the multi-process integration tests run in test/test-asan).
test-tsan:
	@$(MAKE) --no-print-directory test PRESET=tsan CTEST_ARGS='-LE "integration|e2e|lint"' 

run: build
	@scripts/run.sh $(GNOMON)

bench:
	@$(MAKE) --no-print-directory build PRESET=release
	@scripts/bench.sh build/release

fuzz: deps
	@cmake --preset fuzz >/dev/null
	@cmake --build --preset fuzz -j $(JOBS)
	@scripts/fuzz.sh build/fuzz

format:
	@git ls-files '*.cc' '*.h' | xargs clang-format -i

format-check:
	@git ls-files '*.cc' '*.h' | xargs clang-format --dry-run -Werror

# clang's thread-safety analysis over the library and the binary (tests not built): every
# GNOMON_GUARDED_BY field and GNOMON_REQUIRES call is checked against the locks held.
CCACHE := $(shell command -v ccache 2>/dev/null)
check-thread-safety: deps
	@cmake --preset clang-tsa $(if $(CCACHE),-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache) >/dev/null
	@cmake --build --preset clang-tsa -j $(JOBS)

clean:
	@rm -rf build

# Chaos suite (docs/chaos.md): every fault scenario three times against the dev build. Needs root
# for the network-namespace scenarios (skipped with the reason otherwise).
chaos:
	@$(MAKE) --no-print-directory build PRESET=dev
	@GNOMON_BIN=build/dev/apps/gnomon/gnomon python3 tests/integration/chaos/chaos.py --repeat 3
	@GNOMON_BIN=build/dev/apps/gnomon/gnomon python3 tests/integration/chaos/chaos.py --repeat 3 --backend etcd
	@GNOMON_BIN=build/dev/apps/gnomon/gnomon python3 tests/integration/chaos/chaos.py --repeat 3 --backend redis-cluster

bench-scale:
	@$(MAKE) --no-print-directory build PRESET=release
	@SCALE_SETUPS=$${SCALE_SETUPS:-single,single-pinned,cluster} python3 bench/scale_bench.py build/release

screenshots:
	@$(MAKE) --no-print-directory build PRESET=dev
	@cd tests/e2e && npm ci --no-audit --no-fund --loglevel=error && \
	  GNOMON_BIN=$(CURDIR)/build/dev/apps/gnomon/gnomon node screenshots.mjs $(CURDIR)/docs/img
