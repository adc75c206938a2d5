#!/usr/bin/env bash
# reference-toolchain.sh — install the GNU binutils that cfi2sframe is checked
# against, without changing the system.
#
# Debian's packaged binutils emit SFrame with `as --gsframe`:
#   sid     binutils 2.47.x   SFrame V3 (x86-64, aarch64, s390x)
#   trixie  binutils 2.44     SFrame V2 without SFRAME_F_FDE_FUNC_START_PCREL
#                             (x86-64, aarch64; 2.44 has no s390x SFrame)
#   bookworm binutils 2.40    SFrame V1 (x86-64, aarch64); its objdump is
#                             the only one that decodes V1 (2.44 prints the
#                             header only, 2.47 refuses the section)
# Binutils 2.45/2.46 (V2 with the PCREL flag) are in no Debian suite any
# more, so V2+PCREL sections are produced by cfi2sframe's own encoder.
#
# For each suite the script keeps a private apt configuration (its own
# sources.list, lists and package cache), downloads the binutils packages and
# the libraries they need with `apt-get download`, unpacks them with
# `dpkg -x`, and writes wrapper scripts that run the unpacked programs with
# the unpacked dynamic loader and libraries. The host's binutils, apt sources
# and dpkg database are never touched; nothing needs root (except --cross).
#
# Layout under the toolchain directory DIR:
#   DIR/SUITE/bin/ARCH-TOOL      wrappers, e.g. DIR/sid/bin/x86_64-objdump
#                                (TOOL: as ld objdump readelf objcopy nm strip)
#   DIR/SUITE/gcc-ARCH/{as,ld}   for `gcc -BDIR/SUITE/gcc-ARCH/ -Wa,--gsframe`
#   DIR/SUITE/root/              the unpacked packages
#   DIR/SUITE/packages.txt       name and version of every unpacked package
#   DIR/SUITE/apt/sources.list   the suite's private apt source (the lists and
#                                package cache are deleted after installing)
#   DIR/SUITE/libsframe/         sid: libsframe-dev and the libsframe
#                                it needs, unpacked apart from binutils' own copy
#                                (headers in usr/include, libsframe.so in
#                                usr/lib/x86_64-linux-gnu), for tests that build
#                                C programs against GNU's SFrame reader;
#                                libsframe/packages.txt lists them
# The tree is relocatable: wrappers find their files relative to themselves.
#
# Usage: scripts/reference-toolchain.sh [--print | --check] [--cross] [--force]
#   (none)    install whatever suite is missing; a quick no-op when present
#   --print   print DIR if every suite is installed, else fail with a message
#   --check   run every wrapper and assemble a probe with --gsframe per
#             suite and target, checking the SFrame version objdump reports
#   --cross   also `apt-get install` the AArch64 and s390x cross compilers
#             (gcc, g++ and libc of aarch64-linux-gnu and s390x-linux-gnu)
#             and qemu-user-static into the system (needs root)
#   --force   reinstall the suites even if present
# DIR is $CFI2SFRAME_TOOLCHAIN, or ${XDG_CACHE_HOME:-$HOME/.cache}/cfi2sframe/toolchain.
# The archive is $CFI2SFRAME_DEBIAN_MIRROR (default http://deb.debian.org/debian).
#
# Debian's archive keeps only the current version of each package, so the
# versions cannot be pinned: sid in particular moves. DIR/SUITE/packages.txt
# records what was installed; `--force` reinstalls today's versions, and
# scripts/check-fixtures.sh shows whether the committed goldens still match.
set -euo pipefail

prog=reference-toolchain.sh
die() { printf '%s: %s\n' "$prog" "$*" >&2; exit 1; }
note() { printf '%s: %s\n' "$prog" "$*" >&2; }

DIR=${CFI2SFRAME_TOOLCHAIN:-${XDG_CACHE_HOME:-$HOME/.cache}/cfi2sframe/toolchain}
MIRROR=${CFI2SFRAME_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SUITES="sid trixie bookworm"
TOOLS="as ld objdump readelf objcopy nm strip"

# targets SUITE: the GNU triplet prefixes (ARCH of ARCH-linux-gnu) to install.
targets() {
	case $1 in
	sid) echo "x86_64 aarch64 s390x" ;;
	trixie | bookworm) echo "x86_64 aarch64" ;;
	*) die "unknown suite $1" ;;
	esac
}
# expected_version SUITE: the SFrame version `as --gsframe` of SUITE emits.
expected_version() {
	case $1 in
	sid) echo SFRAME_VERSION_3 ;;
	trixie) echo SFRAME_VERSION_2 ;;
	bookworm) echo SFRAME_VERSION_1 ;;
	esac
}
# pkgname ARCH: Debian's binutils package for target ARCH.
pkgname() { echo "binutils-${1//_/-}-linux-gnu"; }

# The unpacked programs are amd64 Debian binaries run with their own loader.
host_check() {
	local a
	a=$(dpkg --print-architecture 2>/dev/null) || die "dpkg not found: this script needs a Debian-based amd64 host"
	[ "$a" = amd64 ] || die "host architecture is $a; only amd64 hosts are supported"
	command -v apt-get >/dev/null || die "apt-get not found"
}

installed() { [ -f "$DIR/$1/packages.txt" ] && [ -x "$DIR/$1/bin/x86_64-as" ]; }

# Suites whose libsframe-dev is unpacked too (bookworm's libsframe reads V1
# only, which nothing converts to). trixie has no libsframe-dev package
# (apt-cache depends libsframe-dev: "No packages found", 2026-11-23); its
# libsframe1 2.44 is in DIR/trixie/root already, without headers.
LIBSFRAME_SUITES="sid"
libsframe_installed() { [ -f "$DIR/$1/libsframe/packages.txt" ] && [ -f "$DIR/$1/libsframe/usr/include/sframe-api.h" ]; }

# install_libsframe SUITE: libsframe-dev and its libsframeN into
# DIR/SUITE/libsframe, with a private apt state like install_suite's. Kept
# apart from DIR/SUITE/root so that binutils keeps the libsframe it was
# unpacked with even when the suite has moved on since.
install_libsframe() {
	local suite=$1 tmp st closure p deb
	tmp="$DIR/.$suite-libsframe.new"
	rm -rf "$tmp"
	st="$tmp/.apt"
	mkdir -p "$st/lists/partial" "$st/cache/archives/partial" "$st/state" "$tmp/.debs"
	printf 'deb %s %s main\n' "$MIRROR" "$suite" >"$st/sources.list"
	apt_opts "$st"
	note "$suite: apt-get update for libsframe-dev"
	apt-get "${APT[@]}" -q update >"$tmp/.log" 2>&1 ||
		{ cat "$tmp/.log" >&2; die "$suite: apt-get update of $MIRROR $suite failed"; }
	# libsframe-dev depends on the libsframeN of the same version; take
	# only the libsframe packages (libc6 and the rest come from the suite's
	# root, whose loader runs the test programs).
	closure=$(apt-cache "${APT[@]}" depends --recurse --no-recommends --no-suggests \
		--no-conflicts --no-breaks --no-replaces --no-enhances libsframe-dev 2>"$tmp/.log" |
		grep -v '^ ' | grep -v '^<' | grep '^libsframe' | sort -u) ||
		{ cat "$tmp/.log" >&2; die "$suite: cannot resolve libsframe-dev"; }
	grep -qx libsframe-dev <<<"$closure" || die "$suite: libsframe-dev not found in $MIRROR $suite"
	note "$suite: downloading $(paste -sd' ' <<<"$closure")"
	for p in $closure; do
		(cd "$tmp/.debs" && apt-get "${APT[@]}" -q download "$p" >"$tmp/.log" 2>&1) ||
			{ cat "$tmp/.log" >&2; die "$suite: cannot download package $p"; }
	done
	: >"$tmp/packages.txt"
	for deb in "$tmp"/.debs/*.deb; do
		# shellcheck disable=SC2016 # dpkg-deb expands these fields itself
		dpkg-deb --showformat='${Package} ${Version}\n' -W "$deb" >>"$tmp/packages.txt"
		dpkg -x "$deb" "$tmp" || die "$suite: cannot unpack $(basename "$deb")"
	done
	rm -rf "$tmp/.debs" "$st" "$tmp/.log"
	[ -f "$tmp/usr/include/sframe-api.h" ] || die "$suite: libsframe-dev has no usr/include/sframe-api.h"
	rm -rf "${DIR:?}/$suite/libsframe"
	mv "$tmp" "$DIR/$suite/libsframe"
	note "$suite: installed $(paste -sd' ' "$DIR/$suite/libsframe/packages.txt") in $DIR/$suite/libsframe"
}

# apt_opts SUITE_STATE_DIR: apt options that use only the private state.
apt_opts() {
	local st=$1
	APT=(-o "Dir::Etc::SourceList=$st/sources.list" -o Dir::Etc::SourceParts=/dev/null
		-o "Dir::State=$st/state" -o "Dir::State::Lists=$st/lists"
		-o Dir::State::Status=/dev/null -o "Dir::Cache=$st/cache"
		-o Dir::Etc::Preferences=/dev/null -o Dir::Etc::PreferencesParts=/dev/null
		-o APT::Architecture=amd64 -o APT::Architectures::=amd64
		-o Debug::NoLocking=1 -o APT::Sandbox::User="$(id -un)")
}

write_wrapper() { # FILE PROGRAM(relative to root/usr/bin) LOADER(relative to root)
	cat >"$1" <<EOF
#!/bin/sh
# Written by scripts/reference-toolchain.sh: runs the unpacked Debian program
# usr/bin/$2 with the dynamic loader and libraries unpacked beside it.
here=\$(dirname "\$(readlink -f "\$0")")
root=\$here/../root
exec "\$root/$3" --library-path "\$root/usr/lib/x86_64-linux-gnu:\$root/lib/x86_64-linux-gnu" "\$root/usr/bin/$2" "\$@"
EOF
	chmod +x "$1"
}

install_suite() {
	local suite=$1 tmp st pkgs p a t deb
	tmp="$DIR/.$suite.new"
	rm -rf "$tmp"
	st="$tmp/apt"
	mkdir -p "$st/lists/partial" "$st/cache/archives/partial" "$st/state" "$tmp/debs" "$tmp/root" "$tmp/bin"
	printf 'deb %s %s main\n' "$MIRROR" "$suite" >"$st/sources.list"
	apt_opts "$st"
	note "$suite: apt-get update ($MIRROR $suite)"
	apt-get "${APT[@]}" -q update >"$tmp/apt-update.log" 2>&1 ||
		{ cat "$tmp/apt-update.log" >&2; die "$suite: apt-get update of $MIRROR $suite failed"; }

	pkgs=()
	for a in $(targets "$suite"); do pkgs+=("$(pkgname "$a")"); done
	# The binutils packages and everything they depend on (libbfd, libsframe,
	# libc6, ...): a dozen packages, resolved against the suite itself.
	local closure
	closure=$(apt-cache "${APT[@]}" depends --recurse --no-recommends --no-suggests \
		--no-conflicts --no-breaks --no-replaces --no-enhances "${pkgs[@]}" 2>"$tmp/depends.log" |
		grep -v '^ ' | grep -v '^<' | sort -u) ||
		{ cat "$tmp/depends.log" >&2; die "$suite: cannot resolve the dependencies of ${pkgs[*]}"; }
	for p in "${pkgs[@]}"; do
		grep -qx "$p" <<<"$closure" || die "$suite: package $p not found in $MIRROR $suite"
	done
	note "$suite: downloading $(wc -w <<<"$closure") packages: $(paste -sd' ' <<<"$closure")"
	for p in $closure; do
		(cd "$tmp/debs" && apt-get "${APT[@]}" -q download "$p" >"$tmp/download.log" 2>&1) ||
			{ cat "$tmp/download.log" >&2; die "$suite: cannot download package $p"; }
	done
	: >"$tmp/packages.txt"
	for deb in "$tmp"/debs/*.deb; do
		# shellcheck disable=SC2016 # dpkg-deb expands these fields itself
		dpkg-deb --showformat='${Package} ${Version}\n' -W "$deb" >>"$tmp/packages.txt"
		dpkg -x "$deb" "$tmp/root" || die "$suite: cannot unpack $(basename "$deb")"
	done
	# Merged-/usr suites (trixie, sid) keep the loader in usr/lib, bookworm's
	# libc6 in lib.
	local loader=
	for p in usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 lib/x86_64-linux-gnu/ld-linux-x86-64.so.2; do
		if [ -e "$tmp/root/$p" ]; then loader=$p; break; fi
	done
	[ -n "$loader" ] || die "$suite: the unpacked libc6 has no ld-linux-x86-64.so.2"
	rm -rf "$tmp/debs" "$st/lists" "$st/cache" "$st/state" "$tmp"/*.log

	for a in $(targets "$suite"); do
		for t in $TOOLS; do
			[ -e "$tmp/root/usr/bin/$a-linux-gnu-$t" ] ||
				die "$suite: package $(pkgname "$a") has no usr/bin/$a-linux-gnu-$t"
			write_wrapper "$tmp/bin/$a-$t" "$a-linux-gnu-$t" "$loader"
		done
		mkdir -p "$tmp/gcc-$a"
		ln -s "../bin/$a-as" "$tmp/gcc-$a/as"
		ln -s "../bin/$a-ld" "$tmp/gcc-$a/ld"
	done
	"$tmp/bin/x86_64-as" --version >/dev/null 2>&1 || die "$suite: the unpacked x86_64-as does not run"
	rm -rf "${DIR:?}/$suite"
	mv "$tmp" "$DIR/$suite"
	note "$suite: installed $(grep '^binutils-common ' "$DIR/$suite/packages.txt") in $DIR/$suite"
}

# check_suite SUITE: every wrapper runs; each target assembles a probe with
# --gsframe and objdump --sframe shows the suite's SFrame version.
check_suite() {
	local suite=$1 a t w out probe want
	installed "$suite" || die "$suite: not installed in $DIR (run $prog)"
	want=$(expected_version "$suite")
	probe=$(mktemp -d)
	trap 'rm -rf "$probe"' RETURN
	for a in $(targets "$suite"); do
		for t in $TOOLS; do
			w="$DIR/$suite/bin/$a-$t"
			"$w" --version >/dev/null 2>&1 || die "$suite: $w --version failed"
		done
		printf '\t.text\n\t.globl f\n\t.type f, @function\nf:\n\t.cfi_startproc\n\tnop\n\t.cfi_endproc\n\t.size f, .-f\n' >"$probe/p.s"
		"$DIR/$suite/bin/$a-as" --gsframe -o "$probe/p.o" "$probe/p.s" 2>"$probe/err" ||
			{ cat "$probe/err" >&2; die "$suite: $a-as --gsframe failed on a probe"; }
		out=$("$DIR/$suite/bin/$a-objdump" --sframe "$probe/p.o" 2>&1) ||
			{ echo "$out" >&2; die "$suite: $a-objdump --sframe failed on the probe"; }
		grep -q "Version: $want" <<<"$out" ||
			{ echo "$out" >&2; die "$suite: $a-as --gsframe did not emit $want"; }
		if ! [ -x "$DIR/$suite/gcc-$a/as" ] || ! [ -x "$DIR/$suite/gcc-$a/ld" ]; then
			die "$suite: $DIR/$suite/gcc-$a/{as,ld} missing"
		fi
		printf '%s: %-8s %-8s %s ok (%s)\n' "$prog" "$suite" "$a" "$want" \
			"$("$DIR/$suite/bin/$a-as" --version | head -1)"
	done
}

# The cross compilers the end-to-end tests build with (sid's binutils above
# assemble and link for them: gcc -B DIR/sid/gcc-ARCH/), and qemu-user to
# run what they build.
CROSS="gcc-aarch64-linux-gnu g++-aarch64-linux-gnu libc6-dev-arm64-cross
gcc-s390x-linux-gnu g++-s390x-linux-gnu libc6-dev-s390x-cross qemu-user-static"

install_cross() {
	[ "$(id -u)" = 0 ] || die "--cross installs system packages and needs root"
	note "installing $(echo $CROSS) (system packages)"
	# shellcheck disable=SC2086 # one word per package
	apt-get install -y -q $CROSS >/dev/null ||
		die "apt-get install $(echo $CROSS) failed"
}

mode=install cross=0 force=0
for arg in "$@"; do
	case $arg in
	--print) mode=print ;;
	--check) mode=check ;;
	--cross) cross=1 ;;
	--force) force=1 ;;
	-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown argument $arg (see --help)" ;;
	esac
done

case $mode in
print)
	for s in $SUITES; do
		installed "$s" || die "$s: not installed in $DIR (run scripts/$prog)"
	done
	echo "$DIR"
	;;
check)
	for s in $SUITES; do check_suite "$s"; done
	;;
install)
	host_check
	mkdir -p "$DIR"
	for s in $SUITES; do
		if [ "$force" = 1 ] || ! installed "$s"; then install_suite "$s"; fi
	done
	for s in $LIBSFRAME_SUITES; do
		if [ "$force" = 1 ] || ! libsframe_installed "$s"; then install_libsframe "$s"; fi
	done
	[ "$cross" = 1 ] && install_cross
	;;
esac
exit 0
