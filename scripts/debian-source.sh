#!/usr/bin/env bash
# Fetch and unpack the upstream source of a Debian bookworm source package
# (its orig tarball) into the toolchain cache, once, and print the
# directory. The tests that build a real project (scripts/rel-acceptance.sh,
# testdata/scripts/lua-s390x.sh) take their sources from here.
#
#   scripts/debian-source.sh PACKAGE      (needs network the first time)
#
# apt runs with a private configuration (deb-src of bookworm) under the
# cache: nothing on the system changes and nothing needs root. The source
# is unpacked beside its place and renamed into it, so a directory that is
# there is complete.
set -euo pipefail
[ $# = 1 ] || { echo "usage: scripts/debian-source.sh PACKAGE" >&2; exit 2; }
pkg=$1
cache="${CFI2SFRAME_TOOLCHAIN:-$HOME/.cache/cfi2sframe/toolchain}/src"
dest="$cache/$pkg"
if [ ! -d "$dest" ]; then
	st="$cache/apt"
	mkdir -p "$st/lists/partial" "$st/cache/archives/partial" "$st/state" "$cache/dl-$pkg"
	echo "deb-src http://deb.debian.org/debian bookworm main" >"$st/sources.list"
	APT=(-o "Dir::Etc::SourceList=$st/sources.list" -o Dir::Etc::SourceParts=/dev/null
		-o "Dir::State=$st/state" -o "Dir::State::Lists=$st/lists"
		-o Dir::State::Status=/dev/null -o "Dir::Cache=$st/cache"
		-o Debug::NoLocking=1 -o APT::Sandbox::User="$(id -un)")
	apt-get "${APT[@]}" -q update >/dev/null
	(cd "$cache/dl-$pkg" && apt-get "${APT[@]}" -q source --download-only "$pkg" >/dev/null)
	rm -rf "$dest.new"
	mkdir -p "$dest.new"
	tar -xf "$cache/dl-$pkg/${pkg}"_*.orig.tar.* -C "$dest.new" --strip-components=1
	mv "$dest.new" "$dest"
fi
echo "$dest"
