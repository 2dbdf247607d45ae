#!/usr/bin/env bash
# The image's build step (docker/Dockerfile runs it), also run by `make test` on the host so
# that what the image ships is checked without a container engine (scripts/check-deploy.sh
# image): builds the pushgw executable with the Swift runtime and Foundation linked in
# statically, so the run stage needs only the Debian libraries of the `runtime:` line of
# scripts/debian-packages.txt.
# Usage: docker/build-pushgw.sh OUT_FILE [release|debug]   (default release; `make test`
# takes a debug build, quicker to compile and linking the same libraries)
# It builds in .build/static, apart from `swift build`'s own folder: objects compiled for a
# static link name Foundation's static libraries, and a later ordinary build that reused
# them would fail to link (`cannot find -lCoreFoundation`).
set -euo pipefail
out=${1:?usage: docker/build-pushgw.sh OUT_FILE [release|debug]}
configuration=${2:-release}
cd "$(dirname "$0")/.."
# Swift 6.3's static-stdlib-args.lnk does not name Foundation's own static libraries
# (_FoundationICU, _FoundationCollections, CoreFoundation, …): without them the link ends in
# undefined references. They are named here in one group, so their order does not matter.
link=(-Xlinker --start-group)
for lib in Foundation FoundationEssentials FoundationInternationalization _FoundationICU _FoundationCShims \
           _FoundationCollections CoreFoundation swiftSynchronization swiftCore swift_Concurrency \
           swift_StringProcessing swift_RegexParser swiftDispatch dispatch BlocksRuntime swiftGlibc; do
  link+=(-Xlinker "-l$lib")
done
link+=(-Xlinker --end-group)
build=(swift build -c "$configuration" --static-swift-stdlib --scratch-path .build/static)
"${build[@]}" --product pushgw "${link[@]}"
install -D -m 755 "$("${build[@]}" --show-bin-path)/pushgw" "$out"
