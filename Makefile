# pushgw: the two commands are `make demo` and `make test`; `make bench` measures.
# Each target installs the Debian packages it needs first (scripts/install-deps.sh, groups of
# scripts/debian-packages.txt; Python packages come from Debian too), as root or through sudo.
SWIFT ?= swift
SWIFT_BUILD_FLAGS ?=
# Debian's /usr/bin comes first: the tests, the demo and the benchmarks run `python3` and need
# the one that sees Debian's Python packages, not a pyenv or virtualenv shim earlier in PATH.
# Debian installs some of the servers they start in /usr/sbin (nghttpd), which a non-root
# user's PATH leaves out.
export PATH := /usr/bin:/bin:$(PATH):/usr/sbin:/sbin
DEMO_DEPS = build test python
TEST_DEPS = $(DEMO_DEPS) browser producers deploy deploy-tools dist

.PHONY: deps deps-test build release dist test demo bench bench-ab soak screenshots clean

deps:
	@scripts/install-deps.sh $(DEMO_DEPS)

deps-test:
	@scripts/install-deps.sh $(TEST_DEPS)

build: deps
	$(SWIFT) build $(SWIFT_BUILD_FLAGS)

release: deps
	$(SWIFT) build -c release $(SWIFT_BUILD_FLAGS)

# The release artifacts, for hosts without a Swift toolchain: a static binary (only Debian's
# runtime libraries linked dynamically) in a tarball and a .deb, in .build/dist
# (scripts/make-dist.sh; deploy/README.md, "From the release").
dist: deps
	@dpkg-deb --version >/dev/null
	scripts/make-dist.sh release

# Tests start what they need themselves (redis-server, the APNs simulator, nghttpd)
# on free loopback ports; see Tests/TestSupport. The container image's build step builds
# pushgw in debug (in .build/static) into .build/image/pushgw for the deployment checks
# (DeploymentTests), which scripts/make-dist.sh packages as the release's .deb, installed by
# DistInstallTests into a clean Debian root (scripts/make-clean-root.sh), and which
# ContainerImageTests runs in the image's run stage where a container engine answers
# (scripts/start-container-engine.sh starts Debian's dockerd when installed). The tests
# that read hostile input run first under AddressSanitizer (scripts/test-asan.sh, its own
# build in .build/asan).
test: deps-test
	$(SWIFT) build --build-tests $(SWIFT_BUILD_FLAGS)
	docker/build-pushgw.sh .build/image/pushgw debug >/dev/null
	scripts/make-dist.sh debug --binary .build/image/pushgw
	scripts/make-clean-root.sh .build/clean-root
	scripts/start-container-engine.sh
	scripts/test-asan.sh
	PUSHGW_DIST_REQUIRED=$$([ "$$(id -u)" = 0 ] && echo 1 || echo 0) scripts/test.sh

# The README's console screenshots (docs/images/console-*.png), taken in headless Chromium by
# the console's browser test against a live gateway.
screenshots: deps-test
	$(SWIFT) build --build-tests $(SWIFT_BUILD_FLAGS)
	PUSHGW_SCREENSHOTS=$(CURDIR)/docs/images scripts/test.sh --filter ConsoleBrowserTests

demo: release
	scripts/demo.sh

bench: release
	bench/run.sh

# Not in CI: this checkout's router against an older build (REF, default 570948c, built once
# into .build/reference/), alternated in one run: events/s, CPU per event, peak RSS, Redis CPU per
# event and ratios. THIS=binary holds another build (a trial) against REF in this checkout's place.
bench-ab: release
	REF=$(REF) bench/ab.sh

# Not in CI: 10 minutes at 1,000 events/s with mixed outcomes, one line of figures a minute
# (SOAK_SECONDS and SOAK_RATE change them); docs/operations.md has a run's figures.
soak: release
	bench/soak.sh

clean:
	rm -rf .build
