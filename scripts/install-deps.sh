#!/usr/bin/env bash
# Installs what pushgw needs and is missing: Debian packages of the given groups
# (scripts/debian-packages.txt) and, with "python", the Python packages the tests use.
# Uses sudo when not root. Idempotent: installs nothing when everything is there.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
groups=("$@")
[ ${#groups[@]} -gt 0 ] || groups=(build test browser python)

sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)

missing=()
for g in "${groups[@]}"; do
  [ "$g" = python ] && continue
  for p in $(sed -n "s/^$g: *//p" "$here/debian-packages.txt"); do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing Debian packages: ${missing[*]}"
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

for g in "${groups[@]}"; do
  if [ "$g" = python ]; then
    python3 -c 'import redis, cryptography, prometheus_client' 2>/dev/null || {
      echo "installing Python packages: redis cryptography prometheus-client"
      python3 -m pip install -q redis cryptography prometheus-client 2>&1 | grep -v 'Running pip as' || true
    }
  fi
done
