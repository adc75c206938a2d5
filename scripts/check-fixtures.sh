#!/usr/bin/env bash
# check-fixtures.sh — check that the committed SFrame goldens
# (testdata/sframe/*.objdump) still match what the reference objdump prints
# for the committed fixtures: each fixture is decoded again by the reference
# `objdump --sframe` (sid's for the file's architecture; bookworm's for V1)
# into a temporary directory and diffed against its golden.
# Takes about a second. Needs the reference toolchain
# (bash scripts/reference-toolchain.sh).
#
# Usage: scripts/check-fixtures.sh [--rebuild]
#   --rebuild  also rebuild every fixture from source with
#              testdata/sframe/build.sh into the temporary directory and
#              compare the bytes. This needs the same compilers as the
#              committed files (host gcc 12 and gcc-aarch64-linux-gnu 12, as
#              on Debian 12); a different gcc changes the code, not the tools.
# Exit status: 0 when everything matches, 1 on a difference or error.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
dir=$repo/testdata/sframe
die() { printf 'check-fixtures.sh: %s\n' "$*" >&2; exit 1; }

rebuild=0
case ${1:-} in
"") ;;
--rebuild) rebuild=1 ;;
*) die "unknown argument $1 (usage: check-fixtures.sh [--rebuild])" ;;
esac

bash "$repo/scripts/reference-toolchain.sh" --print >/dev/null ||
	die "reference toolchain not installed: run bash scripts/reference-toolchain.sh"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# list DIR [all]: the fixture file names in DIR (with "all", goldens too).
list() {
	local f
	for f in "$1"/v[123]-*; do
		[ -e "$f" ] || continue
		case $f in *.objdump) [ "${2:-}" = all ] || continue ;; esac
		echo "${f##*/}"
	done
}

fixtures=$(list "$dir")
[ -n "$fixtures" ] || die "no fixtures in $dir"
status=0

# Every fixture has a golden and every golden a fixture.
for f in $fixtures; do
	[ -f "$dir/$f.objdump" ] || { echo "missing golden: testdata/sframe/$f.objdump"; status=1; }
done
for g in "$dir"/*.objdump; do
	[ -e "${g%.objdump}" ] || { echo "golden without fixture: testdata/sframe/${g##*/}"; status=1; }
done

# The goldens, regenerated from the committed fixtures.
for f in $fixtures; do cp "$dir/$f" "$tmp/$f"; done
bash "$dir/build.sh" --goldens-only "$tmp"
n=0
for f in $fixtures; do
	n=$((n + 1))
	if ! diff -u "$dir/$f.objdump" "$tmp/$f.objdump"; then
		echo "golden differs: testdata/sframe/$f.objdump"
		status=1
	fi
done

if [ "$rebuild" = 1 ]; then
	mkdir "$tmp/rebuilt"
	bash "$dir/build.sh" "$tmp/rebuilt" >/dev/null 2>"$tmp/rebuild.log" ||
		{ cat "$tmp/rebuild.log" >&2; die "build.sh failed"; }
	rebuilt=$(list "$tmp/rebuilt" all)
	if [ "$rebuilt" != "$(list "$dir" all)" ]; then
		echo "build.sh produces a different set of files than is committed:"
		diff <(list "$dir" all) <(echo "$rebuilt") || true
		status=1
	fi
	for f in $rebuilt; do
		[ -e "$dir/$f" ] || continue
		cmp -s "$dir/$f" "$tmp/rebuilt/$f" || { echo "rebuilt file differs: testdata/sframe/$f"; status=1; }
	done
fi

if [ "$status" = 0 ]; then
	echo "check-fixtures.sh: $n goldens match$([ "$rebuild" = 1 ] && echo ", rebuilt fixtures identical")"
fi
exit "$status"
