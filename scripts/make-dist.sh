#!/usr/bin/env bash
# `make dist`: the release artifacts of pushgw, for hosts without a Swift toolchain or a
# container engine (deploy/README.md, "From the release"):
#   .build/dist/pushgw-VERSION-linux-ARCH.tar.gz   the binary, the systemd unit and sysusers
#                                                  file, the example config, the docs
#   .build/dist/pushgw_VERSION_ARCH.deb            the same as a Debian package: /usr/bin/pushgw,
#                                                  the unit, a `pushgw` system user, the config
#                                                  in /etc/pushgw (a conffile), Depends: the
#                                                  runtime: line of scripts/debian-packages.txt
# The binary is the one docker/build-pushgw.sh makes: the Swift runtime and Foundation linked
# in statically, only Debian's runtime libraries linked dynamically.
# Usage: scripts/make-dist.sh [release|debug] [--binary FILE]
#   --binary FILE packages an already built binary (make test packages its debug build)
set -euo pipefail
cd "$(dirname "$0")/.."
configuration=release
binary=
while [ $# -gt 0 ]; do
  case "$1" in
    release|debug) configuration=$1 ;;
    --binary) binary=${2:?--binary needs a file}; shift ;;
    *) echo "usage: scripts/make-dist.sh [release|debug] [--binary FILE]" >&2; exit 2 ;;
  esac
  shift
done
out=.build/dist
mkdir -p "$out"
if [ -z "$binary" ]; then
  binary=$out/pushgw
  docker/build-pushgw.sh "$binary" "$configuration" >/dev/null
fi
[ -x "$binary" ] || { echo "make-dist: $binary is not an executable" >&2; exit 1; }

version=$(head -n 1 VERSION | tr -cd 'A-Za-z0-9.+~_-')
arch=$(dpkg --print-architecture)
runtime=$(sed -n 's/^runtime:[[:space:]]*//p' scripts/debian-packages.txt)

# The tarball: a directory a person unpacks anywhere.
name=pushgw-$version-linux-$arch
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
install -D -m 755 "$binary" "$stage/$name/bin/pushgw"
install -D -m 644 deploy/systemd/pushgw.service "$stage/$name/share/systemd/pushgw.service"
install -D -m 644 deploy/systemd/pushgw.sysusers "$stage/$name/share/systemd/pushgw.sysusers"
install -D -m 644 config/pushgw.example.json "$stage/$name/share/config/pushgw.example.json"
install -D -m 644 config/README.md "$stage/$name/share/config/README.md"
install -D -m 644 README.md "$stage/$name/README.md"
install -D -m 644 deploy/README.md "$stage/$name/share/deploy-README.md"
cp -r docs "$stage/$name/share/docs"
echo "$runtime" > "$stage/$name/share/runtime-packages.txt"
tar -C "$stage" -czf "$out/$name.tar.gz" "$name"

# The .deb: the unit runs /usr/bin/pushgw; the config is a conffile an upgrade keeps.
deb=$stage/deb
install -D -m 755 "$binary" "$deb/usr/bin/pushgw"
install -d "$deb/lib/systemd/system" "$deb/usr/lib/sysusers.d" "$deb/etc/pushgw" "$deb/usr/share/doc/pushgw" "$deb/DEBIAN"
sed 's|/usr/local/bin/pushgw|/usr/bin/pushgw|g' deploy/systemd/pushgw.service > "$deb/lib/systemd/system/pushgw.service"
chmod 644 "$deb/lib/systemd/system/pushgw.service"
install -m 644 deploy/systemd/pushgw.sysusers "$deb/usr/lib/sysusers.d/pushgw.conf"
install -m 644 config/pushgw.example.json "$deb/etc/pushgw/pushgw.json"
install -m 644 README.md "$deb/usr/share/doc/pushgw/README.md"
install -m 644 config/README.md "$deb/usr/share/doc/pushgw/config-README.md"
depends=$(tr -s ' ' '\n' <<<"$runtime" | sed '/^$/d' | paste -sd, - | sed 's/,/, /g')
cat > "$deb/DEBIAN/control" <<EOF
Package: pushgw
Version: $version
Architecture: $arch
Maintainer: pushgw <pushgw@localhost>
Depends: $depends
Section: net
Priority: optional
Description: VoIP-first push gateway for calling apps
 Rings phones for incoming calls: reads call events from Redis streams, sends the PushKit
 VoIP push through APNs and falls back to a missed-call alert. See /usr/share/doc/pushgw.
EOF
echo "/etc/pushgw/pushgw.json" > "$deb/DEBIAN/conffiles"
# The service's user, made as systemd-sysusers would make it from the package's sysusers
# file (or with useradd where systemd is absent). The service is not started: its config
# needs the app's credentials first (deploy/README.md).
cat > "$deb/DEBIAN/postinst" <<'EOF'
#!/bin/sh
set -e
if [ "$1" = configure ]; then
  if ! getent passwd pushgw >/dev/null; then
    if command -v systemd-sysusers >/dev/null 2>&1; then
      systemd-sysusers /usr/lib/sysusers.d/pushgw.conf
    else
      useradd --system --user-group --home-dir /nonexistent --no-create-home --shell /usr/sbin/nologin pushgw
    fi
  fi
  install -d -o pushgw -g pushgw -m 700 /etc/pushgw/secrets
  if [ -d /run/systemd/system ]; then systemctl daemon-reload || true; fi
fi
EOF
chmod 755 "$deb/DEBIAN/postinst"
dpkg-deb --root-owner-group --build "$deb" "$out/pushgw_${version}_$arch.deb" >/dev/null
echo "dist: $out/$name.tar.gz and $out/pushgw_${version}_$arch.deb ($(du -h "$out/pushgw_${version}_$arch.deb" | cut -f1))"
