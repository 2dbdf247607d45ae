# pushgw: the two commands are `make demo` and `make test`; `make bench` measures.
# Each target installs the Debian (and Python) packages it needs first.
SWIFT ?= swift
SWIFT_BUILD_FLAGS ?=

.PHONY: deps build release test demo bench soak screenshots clean

deps:
	@scripts/install-deps.sh build test browser python

build: deps
	$(SWIFT) build $(SWIFT_BUILD_FLAGS)

release: deps
	$(SWIFT) build -c release $(SWIFT_BUILD_FLAGS)

# Tests start what they need themselves (redis-server, the APNs simulator, nghttpd)
# on free loopback ports; see Tests/TestSupport. The tests that read hostile input run
# first under AddressSanitizer (scripts/test-asan.sh, its own build in .build/asan).
test: deps
	$(SWIFT) build --build-tests $(SWIFT_BUILD_FLAGS)
	scripts/test-asan.sh
	scripts/test.sh

# The README's console screenshots (docs/images/console-*.png), taken in headless Chromium by
# the console's browser test against a live gateway.
screenshots: deps
	$(SWIFT) build --build-tests $(SWIFT_BUILD_FLAGS)
	PUSHGW_SCREENSHOTS=$(CURDIR)/docs/images scripts/test.sh --filter ConsoleBrowserTests

demo: release
	scripts/demo.sh

bench: release
	bench/run.sh

# Not in CI: 10 minutes at 1,000 events/s with mixed outcomes, one line of figures a minute
# (SOAK_SECONDS and SOAK_RATE change them); docs/operations.md has a run's figures.
soak: release
	bench/soak.sh

clean:
	rm -rf .build
