#!/bin/sh
# Writes OUT_DIR/BuildVersionValues.swift: the version and commit `pushgw --version`,
# `pushgw_build_info`, `/status` and the start line show. Run by the BuildVersion plugin before
# every build (Plugins/BuildVersion), so a plain `swift build` of a clean clone, `make` and
# docker/build-pushgw.sh all get it; the file is rewritten only when a value changed, so an
# unchanged tree rebuilds nothing.
#
#   version: the first line of VERSION.
#   commit:  `git rev-parse --short=12 HEAD`, with `-dirty` when tracked files differ from it;
#            without git or a repository: $PUSHGW_BUILD_COMMIT, else BUILD-COMMIT as
#            `git archive` fills it (export-subst), else `unknown`.
#
# Usage: scripts/build-version.sh PACKAGE_DIR OUT_DIR
set -eu
root=${1:?usage: build-version.sh PACKAGE_DIR OUT_DIR}
out=${2:?usage: build-version.sh PACKAGE_DIR OUT_DIR}
version=$(head -n 1 "$root/VERSION" 2>/dev/null | tr -cd 'A-Za-z0-9.+~_-' || true)
[ -n "$version" ] || version=unknown
commit=
if command -v git >/dev/null 2>&1 && git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  commit=$(git -C "$root" rev-parse --short=12 HEAD 2>/dev/null || true)
  if [ -n "$commit" ] && ! git -C "$root" diff --quiet HEAD -- 2>/dev/null; then commit="$commit-dirty"; fi
fi
if [ -z "$commit" ] && [ -n "${PUSHGW_BUILD_COMMIT:-}" ]; then commit=$PUSHGW_BUILD_COMMIT; fi
if [ -z "$commit" ] && [ -f "$root/BUILD-COMMIT" ]; then
  archived=$(head -n 1 "$root/BUILD-COMMIT")
  case "$archived" in *'$'*|'') ;; *) commit=$(printf '%s' "$archived" | cut -c1-12) ;; esac
fi
commit=$(printf '%s' "${commit:-unknown}" | tr -cd 'A-Za-z0-9._-')
[ -n "$commit" ] || commit=unknown
mkdir -p "$out"
file="$out/BuildVersionValues.swift"
text="// Written by scripts/build-version.sh before each build; not in the repository.
let builtVersion = \"$version\"
let builtCommit = \"$commit\""
if [ ! -f "$file" ] || [ "$(cat "$file")" != "$text" ]; then
  printf '%s\n' "$text" > "$file.tmp"
  mv "$file.tmp" "$file"
fi
