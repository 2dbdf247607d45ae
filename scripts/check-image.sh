#!/usr/bin/env bash
# Builds the container image's run stage as docker/Dockerfile writes it, on a Debian base made
# here from Debian's own packages (public registries need not resolve): mmdebstrap's minimal
# bookworm with the runtime: packages of scripts/debian-packages.txt and curl, loaded with
# `docker import` and kept between runs (made again when that list changes). The run stage is
# docker/Dockerfile's from its "---- run" line on, with two substitutions: its FROM names that
# base, and its binary is BINARY (make test's .build/image/pushgw, from docker/build-pushgw.sh,
# the image's own build step) instead of the build stage's. Prints the image's name.
# Exit 77 (the test says why and skips) when no container engine answers.
# Usage: scripts/check-image.sh BINARY
set -euo pipefail
binary=${1:?usage: scripts/check-image.sh BINARY}
cd "$(dirname "$0")/.."
if ! out=$(docker info --format '{{.ServerVersion}}' 2>&1); then
  echo "no container engine answers (docker info: $(echo "$out" | tail -1))" >&2
  exit 77
fi
packages="$(sed -n 's/^runtime:[[:space:]]*//p' scripts/debian-packages.txt) curl"
stamp=$(echo "$packages" | sha256sum | cut -c1-12)
base=pushgw-run-base:bookworm-$stamp
if ! docker image inspect "$base" >/dev/null 2>&1; then
  mmdebstrap --quiet --variant=minbase --include="$(echo "$packages" | tr -s ' ' ',')" bookworm - \
    | docker import - "$base" >/dev/null
fi
context=$(mktemp -d /tmp/pushgw-image.XXXXXX)
trap 'rm -rf "$context"' EXIT
mkdir -p "$context/scripts" "$context/docker"
cp scripts/debian-packages.txt "$context/scripts/"
cp docker/pushgw.json "$context/docker/"
cp "$binary" "$context/pushgw"
sed -n '/^# ---- run/,$p' docker/Dockerfile \
  | sed -e "s|^FROM debian:.*|FROM $base|" -e 's|^COPY --from=build /out/pushgw |COPY pushgw |' > "$context/Dockerfile"
grep -q "^FROM $base" "$context/Dockerfile" && grep -q '^COPY pushgw ' "$context/Dockerfile" \
  || { echo "docker/Dockerfile's run stage no longer has the FROM and COPY lines this script replaces" >&2; exit 1; }
image=pushgw-test:$(git rev-parse --short=12 HEAD 2>/dev/null || echo local)
docker build --quiet --network none -t "$image" "$context" >/dev/null
echo "$image"
