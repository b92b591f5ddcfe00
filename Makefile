# The two commands the README starts with. Each does its own setup.
MAKEFLAGS += --no-print-directory
BUILD ?= build/release
JOBS ?= $(shell nproc)

.PHONY: all deps test-deps configure build test demo screenshots asan package clean

all: build

deps:
	@scripts/setup-deps.sh

# The test suite also needs a browser (the report's render check).
test-deps:
	@scripts/setup-deps.sh --tests

configure: deps
	@test -f $(BUILD)/CMakeCache.txt || cmake --preset release >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

# A test function that skips itself (data or a tool missing here) leaves its
# program passed; the skipped ones are listed after ctest's summary.
test: test-deps build
	@cd $(BUILD) && status=0; ctest --output-on-failure -j $(JOBS) || status=$$?; \
	  $(CURDIR)/scripts/skipped-tests.sh Testing/Temporary/LastTest.log; exit $$status

# The demo needs only the CLI and the app, not the test suite.
demo: configure
	@cmake --build $(BUILD) -j $(JOBS) --target pipescope pipescope-gui
	@scripts/demo.sh $(BUILD)

# Regenerates the README's pictures under docs/images/ from the demo job.
screenshots: configure
	@cmake --build $(BUILD) -j $(JOBS) --target pipescope pipescope-gui
	@PIPESCOPE_DEMO_SCREENSHOTS=docs/images scripts/demo.sh $(BUILD) --screenshots-only

# Debian package in $(BUILD): pipescope_<version>-1_<arch>.deb (docs/packaging.md)
package: build
	@cd $(BUILD) && cpack -G DEB

asan: test-deps
	@test -f build/asan/CMakeCache.txt || cmake --preset asan >/dev/null
	@cmake --build build/asan -j $(JOBS)
	@cd build/asan && status=0; ctest --output-on-failure -j $(JOBS) || status=$$?; \
	  $(CURDIR)/scripts/skipped-tests.sh Testing/Temporary/LastTest.log; exit $$status

# libFuzzer targets (clang) in build/fuzz, each run FUZZ_SECONDS from its
# seeds (comma-separated folders); new inputs go to build/fuzz/corpus/<target>,
# crashes to build/fuzz/findings.
FUZZ_SECONDS ?= 60
comma := ,
FUZZ_EXTERNAL = $(wildcard ../shared/data/external/kineto)
# tests/fuzz/seeds/<target>: the minimized corpus of earlier runs (libFuzzer -merge=1), kept in the repository.
FUZZ_TARGETS = kineto:tests/fuzz/seeds/kineto,tests/data/kineto,resources/examples/simulated-1f1b$(if $(FUZZ_EXTERNAL),$(comma)$(FUZZ_EXTERNAL)) \
               nsys:tests/data/nsys/fuzz store:tests/fuzz/seeds/store \
               model:tests/fuzz/seeds/model,resources/models schedule:tests/fuzz/seeds/schedule \
               jobindex:tests/fuzz/seeds/jobindex megatron:tests/fuzz/seeds/megatron \
               prediction:tests/fuzz/seeds/prediction
fuzz: deps
	@test -f build/fuzz/CMakeCache.txt || cmake --preset fuzz >/dev/null
	@cmake --build build/fuzz -j $(JOBS) --target $(foreach t,$(FUZZ_TARGETS),fuzz_$(firstword $(subst :, ,$(t))))
	@mkdir -p build/fuzz/findings
	@set -e; for t in $(FUZZ_TARGETS); do \
	  name=$${t%%:*}; seeds=$$(echo $${t#*:} | tr , ' '); mkdir -p build/fuzz/corpus/$$name; \
	  echo "fuzz_$$name: $(FUZZ_SECONDS) s from $$seeds"; \
	  build/fuzz/tests/fuzz/fuzz_$$name build/fuzz/corpus/$$name $$seeds -max_total_time=$(FUZZ_SECONDS) \
	    -timeout=30 -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix=build/fuzz/findings/$$name- 2>&1 | \
	    grep -E '^(#[0-9]+ *DONE|stat::number_of_executed_units|stat::peak_rss_mb|==[0-9]+==ERROR|SUMMARY|artifact_prefix|Test unit written)' || true; \
	  if ls build/fuzz/findings/$$name-* >/dev/null 2>&1; then echo "fuzz_$$name: findings in build/fuzz/findings"; exit 1; fi; \
	done

clean:
	rm -rf build
