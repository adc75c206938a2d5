#!/usr/bin/env bash
# glibc-acceptance.sh — build glibc with --enable-sframe into a private cache
# and check that its SFrame backtrace() walks cfi2sframe's output as it walks
# GNU as's, with libgcc's DWARF unwinder out of reach.
#
# glibc's backtrace() (2.42-2.44, only when configured with --enable-sframe)
# first walks the stack with the SFrame sections it finds through
# PT_GNU_SFRAME; if any frame fails it throws that walk away and falls back to
# libgcc_s's DWARF unwinder (dlopen "libgcc_s.so.1"). No Debian glibc enables
# it, so this script builds one:
#
#   source   Debian's glibc source package (.dsc, .orig.tar.xz, .debian.tar.xz)
#            from $CFI2SFRAME_DEBIAN_MIRROR's pool, found through the suites'
#            Sources indexes: the highest version 2.42-2.44 in experimental,
#            sid, forky or trixie whose files the pool still serves (the
#            indexes name versions the mirror no longer has; 2.43-6 on
#            2026-11-23), sha256 checked against the index, unpacked with
#            dpkg-source -x (Debian's patches applied)
#   binutils trixie's 2.44 from scripts/reference-toolchain.sh, which writes
#            SFrame V2 (what glibc reads); gcc -B points at a directory of
#            plain as/ld/... names linking to its wrappers (readelf: sid's,
#            as configure wants 2.45 or later)
#   tools    gawk and bison, which glibc's configure needs, from the host or
#            else downloaded with apt-get download and unpacked (dpkg -x)
#            into the cache; nothing is installed into the system
#   build    configure --enable-sframe --prefix=<a directory that does not
#            exist>, so that the built ld.so has no system library
#            directories and no ld.so.cache: libgcc_s.so.1 is out of reach
#            unless a run puts it on --library-path. "make lib
#            object-suffixes=.os" (libc.so and ld.so from shared objects
#            only) runs under nice -n 19; an interrupted build resumes.
#   check    builds the test program (e2e/testdata/glibc) with the host's
#            gcc and with as 2.44 --gsframe, converts it with cfi2sframe
#            (--for glibc; --sframe-version 2; --sframe-version 2 --pcrel)
#            and the built libc.so.6 (--for glibc --force), runs it under
#            the built ld.so and writes every run's output into a directory
#            (see run_checks). The Go test judges them (internal/testing/judge;
#            `go test ./e2e -run Glibc` runs check, CFI2SFRAME_GLIBC_RUN=OUT
#            judges the outputs of an earlier one) and reports one
#            "ok"/"FAIL" line per check: SFrame-only traces equal to the
#            DWARF traces at full depth, and the controls (no .sframe: 0
#            frames; GNU as 2.44: full; a damaged FRE: verify fails and
#            glibc discards the walk).
#
# Layout under the cache directory DIR:
#   DIR/src/               the downloaded source package and its unpacked tree
#   DIR/tools/             gawk, bison, m4 when the host lacks them
#   DIR/binutils/          as ld nm objcopy objdump strip -> trixie, readelf -> sid
#   DIR/build/             the glibc build tree (elf/ld.so, libc.so.6, ...)
#   DIR/build.log          configure and make output
#   DIR/complete           written last: version, configure flags, build time
# The build is skipped (without network access) when DIR/complete names the
# same configure flags (and the same patch). DIR is $CFI2SFRAME_GLIBC_CACHE,
# or ${XDG_CACHE_HOME:-$HOME/.cache}/cfi2sframe/glibc-sframe, or with a patch
# .../glibc-sframe-patched-SUM (SUM: the patch's sha256, first 12 digits).
#
# A patched glibc (--patch FILE, or CFI2SFRAME_GLIBC_PATCH=FILE): FILE is a
# patch the user gives, e.g. glibc's SFrame V3 reader as posted to libc-alpha
# (2026-04-14, not merged; not shipped here: this script neither contains nor
# downloads it). It is applied with patch -p1 --fuzz=0 (a hunk that does not
# apply exactly stops the build) to a tree unpacked for it alone
# in its own DIR (the unpatched build stays), and recorded in DIR/complete.
# check then also converts to V3 and records the V3 runs (see run_checks),
# which the judge requires too (OUT/reader names the patch).
#
# Usage: scripts/glibc-acceptance.sh [build | check | all | --print] [--force]
#                                    [--out OUT] [--patch FILE]
#   build    fetch and build glibc into DIR (a quick no-op when complete)
#   check    build and run the test programs against the built glibc (needs
#            build), their outputs into OUT (OUT/runs/*, OUT/verify/*)
#   all      build, then check (the default)
#   --print  print DIR if the build is complete, else fail with a message
#   --force  rebuild from scratch even if DIR/complete is there
#   --out    the directory for check's outputs (created; must be empty);
#            default: a new temporary directory, printed and kept
#   --patch  apply FILE to glibc's source before building (see above)
# Environment: CFI2SFRAME (the cfi2sframe binary; default: go build of
# ./cmd/cfi2sframe into a temporary directory), CFI2SFRAME_TOOLCHAIN (as for
# reference-toolchain.sh), GLIBC_JOBS (make -j, default nproc),
# CFI2SFRAME_GLIBC_PATCH (as --patch).
set -euo pipefail

prog=glibc-acceptance.sh
die() { printf '%s: %s\n' "$prog" "$*" >&2; exit 1; }
note() { printf '%s: %s\n' "$prog" "$*" >&2; }

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
# DIR, PATCH_FILE and PATCH_SUM are set after the arguments (set_dir).
PATCH_FILE=${CFI2SFRAME_GLIBC_PATCH:-} PATCH_SUM=
MIRROR=${CFI2SFRAME_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SUITES="experimental sid forky trixie"
# glibc's SFrame unwinder reads V2; 2.42 is the first release with it and
# 2.44 the last one checked here.
GLIBC_MIN=2.42 GLIBC_MAX=2.44.99
# The prefix compiled into ld.so: it must not exist, so that the loader
# finds no system library directory and no etc/ld.so.cache.
PREFIX=/nonexistent/cfi2sframe-glibc-sframe
CONFIG_FLAGS="--prefix=$PREFIX --enable-sframe --disable-werror --disable-profile --disable-nscd --disable-timezone-tools --without-selinux --disable-mathvec"
# "lib" builds libc.so and ld.so (every subdirectory's libc objects and the
# loader), not the programs, add-on libraries (libm.so, NSS and gconv
# modules) or tests that "all" adds: the test programs load nothing else.
# object-suffixes=.os compiles only the shared objects (libc.so is linked
# from them), not the static libc.a's: half the compilations.
MAKE_ARGS="lib object-suffixes=.os"
JOBS=${GLIBC_JOBS:-$(nproc)}

toolchain_dir() {
	bash "$here/reference-toolchain.sh" --print 2>/dev/null ||
		die "the reference toolchain is not installed (run scripts/reference-toolchain.sh)"
}

# list_sources: writes DIR/src/candidates, one glibc source stanza per line
# (fields joined by \037, prefixed with "SUITE\037"), for every version in
# [GLIBC_MIN, GLIBC_MAX] among SUITES' Sources indexes, highest first.
list_sources() {
	local s idx stanza v
	idx=$(mktemp -d)
	# shellcheck disable=SC2064 # expand $idx now; the trap removes itself
	trap "rm -rf '$idx'; trap - RETURN" RETURN
	mkdir -p "$DIR/src"
	: >"$idx/all"
	for s in $SUITES; do
		curl -fsS -m 300 "$MIRROR/dists/$s/main/source/Sources.xz" -o "$idx/$s.xz" ||
			{ note "$s: cannot fetch $MIRROR/dists/$s/main/source/Sources.xz; skipped"; continue; }
		xz -dc "$idx/$s.xz" >"$idx/$s" || die "$s: Sources.xz does not decompress"
		# glibc only; Extra-Source-Only stanzas (older versions kept for
		# Built-Using) count too: they are complete source packages.
		awk -v RS= -v ORS='\n' '/^Package: glibc\n/ { gsub(/\n/, "\037"); print }' \
			"$idx/$s" >"$idx/$s.glibc"
		while IFS= read -r stanza; do
			v=$(tr '\037' '\n' <<<"$stanza" | sed -n 's/^Version: //p')
			[ -n "$v" ] || continue
			if dpkg --compare-versions "$v" ge "$GLIBC_MIN" && dpkg --compare-versions "$v" le "$GLIBC_MAX"; then
				printf '%s\037%s\037%s\n' "$v" "$s" "$stanza" >>"$idx/all"
			fi
		done <"$idx/$s.glibc"
	done
	[ -s "$idx/all" ] || die "no glibc between $GLIBC_MIN and $GLIBC_MAX in $MIRROR ($SUITES)"
	# Highest version first (sort -V orders glibc's epoch-less Debian
	# versions as dpkg does); the same version from two suites is the same
	# package.
	: >"$DIR/src/candidates"
	local seen=" "
	while IFS= read -r v; do
		case $seen in *" $v "*) continue ;; esac
		seen="$seen$v "
		grep -m1 -F "$v"$'\037' "$idx/all" | cut -d$'\037' -f2- >>"$DIR/src/candidates"
	done < <(cut -d$'\037' -f1 "$idx/all" | sort -u -V -r)
}

# use_candidate LINE: sets SRC_SUITE SRC_VERSION SRC_DIRECTORY SRC_FILES
# ("sha256 size name" lines) from one line of DIR/src/candidates.
use_candidate() {
	local st
	SRC_SUITE=${1%%$'\037'*}
	st=$(cut -d$'\037' -f2- <<<"$1" | tr '\037' '\n')
	SRC_VERSION=$(sed -n 's/^Version: //p' <<<"$st")
	SRC_DIRECTORY=$(sed -n 's/^Directory: //p' <<<"$st")
	SRC_FILES=$(sed -n '/^Checksums-Sha256:/,/^[^ ]/{/^ /s/^ //p}' <<<"$st")
	[ -n "$SRC_DIRECTORY" ] && [ -n "$SRC_FILES" ] || die "$SRC_SUITE: glibc $SRC_VERSION has no Directory or Checksums-Sha256"
}

# fetch_source: the source package of the first candidate whose files the
# pool still has (the index can name versions the mirror no longer serves),
# into DIR/src, sha256 checked against the index, unpacked into
# DIR/src/glibc-VERSION; sets SRC_* and SRC_TREE.
fetch_source() {
	local line sum size name got dsc ok
	while IFS= read -r line; do
		use_candidate "$line"
		ok=1 dsc=
		while read -r sum size name; do
			case $name in */* | .* | '') die "unexpected file name '$name' in the Sources index" ;; esac
			case $name in *.dsc) dsc=$name ;; esac
			if [ -f "$DIR/src/$name" ] && [ "$(sha256sum <"$DIR/src/$name" | cut -d' ' -f1)" = "$sum" ]; then continue; fi
			note "downloading $MIRROR/$SRC_DIRECTORY/$name ($size bytes)"
			if ! curl -fs -m 1800 "$MIRROR/$SRC_DIRECTORY/$name" -o "$DIR/src/$name.part"; then
				note "glibc $SRC_VERSION ($SRC_SUITE): $name is not in the pool; trying the next version"
				rm -f "$DIR/src/$name.part"
				ok=0
				break
			fi
			got=$(sha256sum <"$DIR/src/$name.part" | cut -d' ' -f1)
			[ "$got" = "$sum" ] || die "$name: sha256 $got, the $SRC_SUITE Sources index says $sum"
			mv "$DIR/src/$name.part" "$DIR/src/$name"
		done <<<"$SRC_FILES"
		[ "$ok" = 1 ] && break
	done <"$DIR/src/candidates"
	[ "$ok" = 1 ] || die "no candidate glibc source package could be downloaded from $MIRROR"
	[ -n "$dsc" ] || die "glibc $SRC_VERSION: no .dsc in the Sources index"
	note "glibc $SRC_VERSION from $SRC_SUITE"
	SRC_TREE=$DIR/src/glibc-${SRC_VERSION#*:}
	# A tree is patched by PATCH_FILE or by none: one whose .patched does
	# not say so (or an interrupted patching) is unpacked again.
	if [ -f "$SRC_TREE/.unpacked" ] && [ "$(cat "$SRC_TREE/.patched" 2>/dev/null)" != "$PATCH_SUM" ]; then
		note "$SRC_TREE is not patched as asked (${PATCH_SUM:-no patch}); unpacking it again"
		rm -f "$SRC_TREE/.unpacked"
	fi
	if ! [ -f "$SRC_TREE/.unpacked" ]; then
		rm -rf "$SRC_TREE"
		note "unpacking $dsc (Debian's patches applied)"
		(cd "$DIR/src" && dpkg-source --no-check -x "$dsc" "$(basename "$SRC_TREE")") >"$DIR/src/unpack.log" 2>&1 ||
			{ tail -20 "$DIR/src/unpack.log" >&2; die "dpkg-source -x $dsc failed"; }
		if [ -n "$PATCH_SUM" ]; then
			note "applying $PATCH_FILE (sha256 $PATCH_SUM) with patch -p1"
			{ patch -d "$SRC_TREE" -p1 --batch --forward --fuzz=0 --dry-run <"$PATCH_FILE" &&
				patch -d "$SRC_TREE" -p1 --batch --forward --fuzz=0 <"$PATCH_FILE"; } >"$DIR/src/patch.log" 2>&1 ||
				{ tail -20 "$DIR/src/patch.log" >&2; rm -rf "$SRC_TREE"; die "$PATCH_FILE does not apply to glibc $SRC_VERSION (log $DIR/src/patch.log)"; }
			grep -E '^(Hunk|patching)' "$DIR/src/patch.log" >&2 || true
			echo "$PATCH_SUM" >"$SRC_TREE/.patched"
		fi
		: >"$SRC_TREE/.unpacked"
	fi
}

# host_tools: gawk and bison on PATH, from the host or unpacked into DIR/tools.
host_tools() {
	local missing=() p st deb
	command -v gawk >/dev/null || missing+=(gawk)
	command -v bison >/dev/null || missing+=(bison)
	command -v m4 >/dev/null || missing+=(m4)
	if [ ${#missing[@]} -gt 0 ] && ! [ -f "$DIR/tools/.complete" ]; then
		note "host lacks ${missing[*]}: apt-get download into $DIR/tools"
		rm -rf "$DIR/tools"
		mkdir -p "$DIR/tools/.debs"
		for p in gawk bison m4 libsigsegv2; do
			(cd "$DIR/tools/.debs" && apt-get -q download "$p" >/dev/null 2>&1) || note "apt-get download $p failed"
		done
		for deb in "$DIR"/tools/.debs/*.deb; do dpkg -x "$deb" "$DIR/tools" || die "cannot unpack $deb"; done
		rm -rf "$DIR/tools/.debs"
		: >"$DIR/tools/.complete"
	fi
	if [ -d "$DIR/tools/usr/bin" ]; then
		# Wrappers give the unpacked programs their unpacked libraries
		# (gawk needs libsigsegv) without exporting LD_LIBRARY_PATH into
		# the glibc build.
		mkdir -p "$DIR/tools/bin"
		for p in gawk bison m4; do
			[ -x "$DIR/tools/usr/bin/$p" ] || continue
			printf '#!/bin/sh\nt=%s\nBISON_PKGDATADIR=$t/usr/share/bison M4=$t/usr/bin/m4 LD_LIBRARY_PATH=$t/usr/lib/x86_64-linux-gnu exec $t/usr/bin/%s "$@"\n' \
				"$DIR/tools" "$p" >"$DIR/tools/bin/$p"
			chmod +x "$DIR/tools/bin/$p"
		done
		PATH=$DIR/tools/bin:$PATH
	fi
	command -v gawk >/dev/null && gawk --version >/dev/null || die "gawk does not run"
	command -v bison >/dev/null && bison --version >/dev/null || die "bison does not run"
}

# binutils_dir: DIR/binutils with plain names for trixie's wrappers (as and
# ld 2.44 write SFrame V2 without PCREL, which glibc reads), except readelf:
# glibc's configure asks for readelf 2.45 or later before it enables SFrame
# (binutils 2.45 writes V2 with PCREL) and only uses it to see that as
# --gsframe wrote V2 or later, so sid's readelf stands in.
binutils_dir() {
	local tc t
	tc=$(toolchain_dir)
	mkdir -p "$DIR/binutils"
	for t in as ld nm objcopy objdump strip; do
		[ -x "$tc/trixie/bin/x86_64-$t" ] || die "$tc/trixie/bin/x86_64-$t missing"
		ln -sfn "$tc/trixie/bin/x86_64-$t" "$DIR/binutils/$t"
	done
	[ -x "$tc/sid/bin/x86_64-readelf" ] || die "$tc/sid/bin/x86_64-readelf missing"
	ln -sfn "$tc/sid/bin/x86_64-readelf" "$DIR/binutils/readelf"
	"$DIR/binutils/as" --version | grep -q 'GNU assembler.* 2\.44' ||
		die "$DIR/binutils/as is not binutils 2.44: $("$DIR/binutils/as" --version | head -1)"
}

# build_key: DIR/complete's first lines; a patched build adds a line
# "patch SUM FILE" (an unpatched one has none, as before patches).
build_key() {
	printf 'glibc %s (%s)\nflags %s\nmake %s\n' "$SRC_VERSION" "$SRC_SUITE" "$CONFIG_FLAGS" "$MAKE_ARGS"
	[ -z "$PATCH_SUM" ] || printf 'patch %s %s\n' "$PATCH_SUM" "$PATCH_FILE"
}

# built_patch: the sha256 of the patch DIR/complete names ("" for none).
built_patch() { sed -n 's/^patch \([0-9a-f]*\) .*/\1/p' "$DIR/complete"; }

build_complete() {
	[ -f "$DIR/complete" ] && [ -x "$DIR/build/elf/ld.so" ] && [ -f "$DIR/build/libc.so.6" ] &&
		[ "$(built_patch)" = "$PATCH_SUM" ]
}

build_glibc() {
	local t0 t1 b=$DIR/build
	if [ "$force" = 0 ] && build_complete && [ "$(sed -n 2p "$DIR/complete")" = "flags $CONFIG_FLAGS" ]; then
		note "build complete: $(head -1 "$DIR/complete") in $DIR"
		return
	fi
	list_sources
	fetch_source
	host_tools
	binutils_dir
	rm -f "$DIR/complete"
	# A tree configured with the same flags is resumed (make picks up
	# where an interrupted build stopped); anything else starts afresh.
	if [ "$force" = 1 ] || ! { [ -f "$b/config.status" ] && [ "$(cat "$b/.flags" 2>/dev/null)" = "$SRC_TREE $CONFIG_FLAGS" ]; }; then
		rm -rf "$b"
	fi
	mkdir -p "$b"
	t0=$(date +%s)
	note "configure and make -j$JOBS under nice -n 19 (30-60 min on 2 cores); log $DIR/build.log"
	(
		cd "$b"
		# shellcheck disable=SC2086 # CONFIG_FLAGS is a word list
		[ -f config.status ] || CC="gcc -B$DIR/binutils/" CXX="g++ -B$DIR/binutils/" \
			AS=$DIR/binutils/as LD=$DIR/binutils/ld NM=$DIR/binutils/nm \
			OBJCOPY=$DIR/binutils/objcopy OBJDUMP=$DIR/binutils/objdump READELF=$DIR/binutils/readelf \
			nice -n 19 "$SRC_TREE/configure" $CONFIG_FLAGS
		printf '%s %s\n' "$SRC_TREE" "$CONFIG_FLAGS" >.flags
		# shellcheck disable=SC2086 # MAKE_ARGS is a word list
		nice -n 19 make -j"$JOBS" $MAKE_ARGS
	) >"$DIR/build.log" 2>&1 || { tail -30 "$DIR/build.log" >&2; die "glibc build failed; log $DIR/build.log"; }
	[ -e "$b/libc.so.6" ] || ln -s libc.so "$b/libc.so.6"
	t1=$(date +%s)
	[ -x "$b/elf/ld.so" ] && [ -f "$b/libc.so.6" ] || die "the build left no elf/ld.so or libc.so.6 in $b"
	"$DIR/binutils/readelf" -lW "$b/libc.so.6" | grep -q GNU_SFRAME || die "$b/libc.so.6 has no PT_GNU_SFRAME"
	{ build_key; printf 'build seconds %d\njobs %d\nbuilt %s\n' $((t1 - t0)) "$JOBS" "$(date -u +%FT%TZ)"; } >"$DIR/complete"
	note "built glibc $SRC_VERSION in $((t1 - t0)) s"
}

# ---------------------------------------------------------------------------
# The checks' runs. This script builds and runs; internal/testing/judge compares the
# outputs (go test ./e2e -run Glibc).
#
# One test program (e2e/testdata/glibc: main.c, fp.c, nofp.c and lib.c, the
# call chain and the trace it takes described in main.c), built twice from
# the same sources: with the host's gcc and as (no .sframe, the input
# cfi2sframe converts), and with trixie's as 2.44 --gsframe and ld 2.44
# (GNU's V2, the control). Each run's output goes to
# OUT/runs/VARIANT.MODE.SCENARIO.SIZE: VARIANT the directory of the program
# and its libdeep.so, MODE sframe (glibc's backtrace(), libgcc_s.so.1 out of
# the loader's reach, so a failed SFrame walk returns 0 frames) or dwarf
# (the program's copy of backtrace()'s DWARF fallback over libgcc_s),
# SCENARIO chain or signal, SIZE full (an array of 256) or dwarflen (as
# long as the glibc variant's DWARF trace).
# build_programs SRC OUT CC...: libdeep.so and prog into OUT.
build_programs() {
	local src=$1 out=$2
	shift 2
	mkdir -p "$out"
	"$@" -O2 -fPIC -shared -fomit-frame-pointer -o "$out/libdeep.so" "$src/lib.c"
	"$@" -O2 -c -fno-omit-frame-pointer -o "$out/fp.o" "$src/fp.c"
	"$@" -O2 -c -fomit-frame-pointer -o "$out/nofp.o" "$src/nofp.c"
	"$@" -O2 -c -fomit-frame-pointer -o "$out/main.o" "$src/main.c"
	"$@" -rdynamic -o "$out/prog" "$out/main.o" "$out/fp.o" "$out/nofp.o" -L"$out" -ldeep
	rm -f "$out"/*.o
}

# damage_fre FILE SYMBOL: add 64 to the CFA offset of every FRE of SYMBOL's
# FDE in FILE's .sframe (V2 or V3, found through PT_GNU_SFRAME): the walk through
# that function then reads its return address from the wrong stack slot.
damage_fre() {
	local f=$1 sym=$2 addr
	addr=$(nm "$f" | awk -v s="$sym" '$3 == s { print $1 }')
	[ -n "$addr" ] || die "damage: no symbol $sym in $f"
	(cd "$repo" && go run ./internal/testing/cmd/sframe-damage "$f" "$addr" cfa+64)
}

# run_prog LIBDIR PROG MODE SCENARIO SIZE: run PROG under the built loader
# with LIBDIR, then the built glibc's directories, as its only library path.
run_prog() {
	local b=$DIR/build libdir=$1 p=$2
	shift 2
	"$b/elf/ld.so" --inhibit-cache --library-path "$libdir:$b:$b/elf" "$p" "$@" "$LIBGCC"
}

# record NAME LIBDIR PROG MODE SCENARIO SIZE: run_prog's output, its
# error output included, into $w/runs/NAME.
record() {
	local name=$1
	shift
	run_prog "$@" >"$w/runs/$name" 2>&1 || true
}

# count NAME: the frames the run NAME reported.
count() { sed -n 's/^frames //p' "$w/runs/$1"; }

# run_checks: the programs, their conversions and every run into OUT
# ($outdir, or a new temporary directory), which is kept.
run_checks() {
	local tc t0 t1 c=${CFI2SFRAME:-} full n sc st src=$repo/e2e/testdata/glibc
	build_complete || die "glibc is not built in $DIR (run scripts/$prog build)"
	tc=$(toolchain_dir)
	binutils_dir
	t0=$(date +%s)
	if [ -n "$outdir" ]; then
		mkdir -p "$outdir" || die "cannot create $outdir"
		[ -z "$(ls -A "$outdir")" ] || die "$outdir is not empty"
		w=$(cd "$outdir" && pwd)
	else
		w=$(mktemp -d "${TMPDIR:-/tmp}/glibc-acceptance.XXXXXX")
	fi
	if [ -z "$c" ]; then
		(cd "$repo" && go build -o "$w/cfi2sframe" ./cmd/cfi2sframe) || die "go build ./cmd/cfi2sframe failed"
		c=$w/cfi2sframe
	fi
	LIBGCC=$(gcc -print-file-name=libgcc_s.so.1)
	LIBGCC=$(readlink -f "$LIBGCC")
	[ -f "$LIBGCC" ] || die "gcc -print-file-name=libgcc_s.so.1: $LIBGCC is not a file"
	note "$(head -1 "$DIR/complete"); $(sed -n 's/^build seconds /build time (s): /p' "$DIR/complete")"

	build_programs "$src" "$w/plain" gcc
	build_programs "$src" "$w/gnu" gcc -B"$tc/trixie/gcc-x86_64/" -Wa,--gsframe
	readelf -lW "$w/plain/prog" | grep -q GNU_SFRAME && die "the host toolchain wrote PT_GNU_SFRAME: no unconverted input"
	"$DIR/binutils/readelf" -lW "$w/gnu/prog" | grep -q GNU_SFRAME || die "as 2.44 --gsframe wrote no PT_GNU_SFRAME"

	# Our outputs: --for glibc, plain V2, V2 --pcrel.
	local v
	for v in "glibc:--for glibc" "v2:--sframe-version 2" "pcrel:--sframe-version 2 --pcrel"; do
		mkdir -p "$w/${v%%:*}"
		for f in prog libdeep.so; do
			# shellcheck disable=SC2086 # the flags are a word list
			"$c" -q ${v#*:} "$w/plain/$f" -o "$w/${v%%:*}/$f" || die "cfi2sframe ${v#*:} $f failed"
		done
	done
	# The libc we converted: the built libc.so.6 with GNU's V2 replaced by
	# ours (--force), so that the walk through backtrace(), qsort and
	# __libc_start_main uses our SFrame too.
	mkdir -p "$w/libc-ours"
	"$c" -q --for glibc --force "$DIR/build/libc.so.6" -o "$w/libc-ours/libc.so.6" || die "cfi2sframe --for glibc --force libc.so.6 failed"
	cp "$w/glibc/prog" "$w/glibc/libdeep.so" "$w/libc-ours/"
	"$c" verify "$w/libc-ours/libc.so.6" >"$w/libc-verify.txt" 2>&1 ||
		{ cat "$w/libc-verify.txt" >&2; die "cfi2sframe verify: our libc.so.6 disagrees with its CFI"; }
	# Damaged: our --for glibc output with nofp_level's FREs corrupted.
	mkdir -p "$w/damaged"
	cp "$w/glibc/prog" "$w/glibc/libdeep.so" "$w/damaged/"
	damage_fre "$w/damaged/prog" nofp_level >/dev/null

	# A patched reader (glibc's V3 reader as posted): V3 as well. v3: our
	# default output (V3, a signal FDE for each signal trampoline), with
	# the built libc; v3-libc: the same with libc converted to V3 (--force)
	# too; v3-nosig: prog, libdeep.so and libc converted with
	# --signal-frames=false; gnu3: GNU as 2.47 --gsframe (V3) and ld 2.47;
	# damaged3: v3 with nofp_level's FREs corrupted.
	local v3files=()
	if [ -n "$PATCH_SUM" ]; then
		printf 'patched %s %s\n' "$PATCH_SUM" "$PATCH_FILE" >"$w/reader"
		for v in "v3:" "v3-nosig:--signal-frames=false"; do
			mkdir -p "$w/${v%%:*}"
			for f in prog libdeep.so; do
				# shellcheck disable=SC2086 # the flags are a word list
				"$c" -q ${v#*:} "$w/plain/$f" -o "$w/${v%%:*}/$f" || die "cfi2sframe ${v#*:} $f failed"
			done
		done
		mkdir -p "$w/v3-libc"
		cp "$w/v3/prog" "$w/v3/libdeep.so" "$w/v3-libc/"
		"$c" -q --force "$DIR/build/libc.so.6" -o "$w/v3-libc/libc.so.6" || die "cfi2sframe --force libc.so.6 failed"
		"$c" -q --force --signal-frames=false "$DIR/build/libc.so.6" -o "$w/v3-nosig/libc.so.6" ||
			die "cfi2sframe --force --signal-frames=false libc.so.6 failed"
		for f in v3-libc v3-nosig; do
			"$c" verify "$w/$f/libc.so.6" >"$w/$f-libc-verify.txt" 2>&1 ||
				{ cat "$w/$f-libc-verify.txt" >&2; die "cfi2sframe verify: our $f libc.so.6 disagrees with its CFI"; }
		done
		[ -x "$tc/sid/gcc-x86_64/as" ] || die "$tc/sid/gcc-x86_64/as missing (GNU as 2.47 for the V3 control)"
		build_programs "$src" "$w/gnu3" gcc -B"$tc/sid/gcc-x86_64/" -Wa,--gsframe
		mkdir -p "$w/damaged3"
		cp "$w/v3/prog" "$w/v3/libdeep.so" "$w/damaged3/"
		damage_fre "$w/damaged3/prog" nofp_level >/dev/null
		v3files=("$w/v3-libc/libc.so.6" "$w/v3/prog" "$w/v3-nosig/prog" "$w/gnu3/prog")
	fi

	local hdr f
	for f in "$DIR/build/libc.so.6" "$w/libc-ours/libc.so.6" "$w/gnu/prog" "$w/glibc/prog" ${v3files[@]+"${v3files[@]}"}; do
		hdr=$("$c" dump --json "$f" 2>&1 | head -20 | tr -d ' \n') || true
		printf '%s: .sframe version %s, flags %s, %s FDEs, %s FREs\n' "${f#"$w"/}" \
			"$(grep -o '"version":[0-9]*' <<<"$hdr" | cut -d: -f2)" "$(grep -o '"flags":[0-9]*' <<<"$hdr" | cut -d: -f2)" \
			"$(grep -o '"num_fdes":[0-9]*' <<<"$hdr" | cut -d: -f2)" "$(grep -o '"num_fres":[0-9]*' <<<"$hdr" | cut -d: -f2)"
	done
	echo "== glibc $(sed -n 's/^glibc //p' "$DIR/complete" | head -1)${PATCH_SUM:+, patched with $PATCH_FILE}, SFrame-only backtrace() against the DWARF trace"
	full=256
	mkdir -p "$w/runs" "$w/verify" "$w/libgcc"
	# The reference itself: glibc's own fallback (the program without
	# .sframe, libgcc_s.so.1 on the library path) against the copy of it
	# in the test program.
	cp "$LIBGCC" "$w/libgcc/libgcc_s.so.1"
	for sc in chain signal; do
		record "plain-libgcc.sframe.$sc.full" "$w/plain:$w/libgcc" "$w/plain/prog" sframe $sc $full
		for v in plain glibc libc-ours gnu damaged pcrel; do
			record "$v.sframe.$sc.full" "$w/$v" "$w/$v/prog" sframe $sc $full
			record "$v.dwarf.$sc.full" "$w/$v" "$w/$v/prog" dwarf $sc $full
		done
		# Plain V2 and V2 --pcrel keep _start's RA-undefined FRE: full
		# depth fails there; up to _start's caller entry they are whole.
		n=$(count "glibc.dwarf.$sc.full")
		for v in v2 pcrel; do
			record "$v.sframe.$sc.dwarflen" "$w/$v" "$w/$v/prog" sframe $sc "$n"
			record "$v.dwarf.$sc.dwarflen" "$w/$v" "$w/$v/prog" dwarf $sc "$n"
		done
		[ -n "$PATCH_SUM" ] || continue
		for v in v3 v3-libc v3-nosig gnu3 damaged3; do
			record "$v.sframe.$sc.full" "$w/$v" "$w/$v/prog" sframe $sc $full
			record "$v.dwarf.$sc.full" "$w/$v" "$w/$v/prog" dwarf $sc $full
		done
	done
	# verify on the intact and the damaged program.
	for v in glibc damaged ${PATCH_SUM:+v3 damaged3}; do
		st=0
		"$c" verify "$w/$v/prog" >"$w/verify/$v" 2>&1 || st=$?
		echo "$st" >"$w/verify/$v.exit"
	done
	t1=$(date +%s)
	echo "== runs took $((t1 - t0)) s; outputs in $w (CFI2SFRAME_GLIBC_RUN=$w go test ./e2e -run Glibc -v judges them)"
}

mode=all force=0 outdir=
while [ $# -gt 0 ]; do
	case $1 in
	build | check | all) mode=$1 ;;
	--print) mode=print ;;
	--force) force=1 ;;
	--out)
		[ $# -ge 2 ] && [ -n "$2" ] || die "--out needs a directory"
		outdir=$2
		shift
		;;
	--patch)
		[ $# -ge 2 ] && [ -n "$2" ] || die "--patch needs a file"
		PATCH_FILE=$2
		shift
		;;
	-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown argument $1 (see --help)" ;;
	esac
	shift
done

# set_dir: PATCH_FILE made absolute, PATCH_SUM, and DIR.
set_dir() {
	local base=${XDG_CACHE_HOME:-$HOME/.cache}/cfi2sframe/glibc-sframe
	if [ -n "$PATCH_FILE" ]; then
		[ -f "$PATCH_FILE" ] && [ -r "$PATCH_FILE" ] || die "patch $PATCH_FILE: not a readable file"
		PATCH_FILE=$(cd "$(dirname "$PATCH_FILE")" && pwd)/$(basename "$PATCH_FILE")
		PATCH_SUM=$(sha256sum <"$PATCH_FILE" | cut -d' ' -f1)
		base=$base-patched-${PATCH_SUM:0:12}
	fi
	DIR=${CFI2SFRAME_GLIBC_CACHE:-$base}
}
set_dir

case $mode in
print)
	build_complete || die "glibc is not built in $DIR${PATCH_SUM:+ with $PATCH_FILE} (run scripts/$prog build)"
	echo "$DIR"
	;;
build) build_glibc ;;
check) run_checks ;;
all) build_glibc; run_checks ;;
esac
