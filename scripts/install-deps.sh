#!/usr/bin/env bash
# Installs what pushgw needs and is missing: the Debian packages of the given groups
# (scripts/debian-packages.txt); for the group `deploy-tools`, single files taken out of a
# Debian package into .build/tools/. Python packages come from Debian too (group `python`):
# Debian 12 refuses a system-wide `pip install`.
# Runs as root or as a user with sudo (apt-get goes through sudo then). Idempotent: installs
# nothing when everything is there.
# Usage: scripts/install-deps.sh [GROUP…]   (default: build test browser python)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
groups=("$@")
[ ${#groups[@]} -gt 0 ] || groups=(build test browser python)

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: not root and no sudo: install sudo or run as root" >&2; exit 1; }
  sudo_cmd=(sudo)
fi
packages() { sed -n "s/^$1: *//p" "$here/debian-packages.txt"; }
updated=no
apt_update() {
  [ "$updated" = yes ] && return
  "${sudo_cmd[@]}" apt-get update -qq
  updated=yes
}

missing=()
for g in "${groups[@]}"; do
  [ "$g" = deploy-tools ] && continue
  grep -q "^$g:" "$here/debian-packages.txt" || { echo "install-deps: no group '$g' in scripts/debian-packages.txt" >&2; exit 2; }
  for p in $(packages "$g"); do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing Debian packages: ${missing[*]}"
  apt_update
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

for g in "${groups[@]}"; do
  case "$g" in
    python)
      # The tests run `python3` from PATH: it must be one that sees Debian's packages (the
      # Makefile puts /usr/bin first; this catches a run that goes around it).
      if ! python3 -c 'import redis, cryptography, prometheus_client, yaml' 2>/dev/null; then
        echo "install-deps: $(command -v python3) cannot import redis, cryptography, prometheus_client and yaml;" \
             "Debian's /usr/bin/python3 has them (python group of scripts/debian-packages.txt): put /usr/bin first in PATH" >&2
        exit 1
      fi
      ;;
    deploy-tools)
      mkdir -p "$root/.build/tools"
      for spec in $(packages deploy-tools); do
        package=${spec%%:*} file=${spec#*:}
        [ -x "$root/.build/tools/$(basename "$file")" ] && continue
        echo "taking $file out of Debian package $package into .build/tools/"
        work=$(mktemp -d)
        (cd "$work" && { apt-get download -qq "$package" 2>/dev/null || { apt_update; apt-get download -qq "$package"; }; }) 2>&1 \
          | grep -v 'unsandboxed' || true
        dpkg-deb --fsys-tarfile "$work"/"$package"_*.deb | tar -x -C "$work" "./$file"
        install -m 755 "$work/$file" "$root/.build/tools/$(basename "$file")"
        rm -rf "$work"
      done
      ;;
  esac
done
