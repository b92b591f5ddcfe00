# The two commands the README starts with. Each does its own setup.
MAKEFLAGS += --no-print-directory
BUILD ?= build/release
JOBS ?= $(shell nproc)

.PHONY: all deps configure build test demo screenshots asan package clean

all: build

deps:
	@scripts/setup-deps.sh

configure: deps
	@test -f $(BUILD)/CMakeCache.txt || cmake --preset release >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

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

asan: deps
	@test -f build/asan/CMakeCache.txt || cmake --preset asan >/dev/null
	@cmake --build build/asan -j $(JOBS)
	@cd build/asan && ctest --output-on-failure -j $(JOBS)

clean:
	rm -rf build
