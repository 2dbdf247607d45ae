#!/usr/bin/env bash
# A clean Debian 12 root holding only what the release needs to run: the runtime: packages of
# scripts/debian-packages.txt on Debian's minimal base (mmdebstrap, from Debian's own
# mirror). `make test` installs the .deb of scripts/make-dist.sh into it and runs the
# installed binary there (Tests/PushgwProcessTests/DistInstallTests.swift). Needs root (as
# `make test` runs on CI); kept between runs, made again when the runtime line changes.
# Usage: scripts/make-clean-root.sh ROOT
set -euo pipefail
root=${1:?usage: scripts/make-clean-root.sh ROOT}
cd "$(dirname "$0")/.."
packages=$(sed -n 's/^runtime:[[:space:]]*//p' scripts/debian-packages.txt | tr -s ' ' ',' | sed 's/^,//; s/,$//')
if [ "$(id -u)" != 0 ]; then
  echo "clean root: not made (needs root for mmdebstrap and chroot); DistInstallTests will say so" >&2
  exit 0
fi
if [ -f "$root/.runtime-packages" ] && [ "$(cat "$root/.runtime-packages")" = "$packages" ]; then
  echo "clean root: $root (kept: the same runtime packages)"
  exit 0
fi
rm -rf "$root"
mmdebstrap --quiet --variant=minbase --include="$packages" bookworm "$root" >/dev/null
echo "$packages" > "$root/.runtime-packages"
echo "clean root: $root, Debian bookworm minbase with $packages"
