#!/usr/bin/env bash
# Rebuild every SFrame reference fixture in this directory from src/ with the
# reference GNU toolchain (scripts/reference-toolchain.sh), and write each
# fixture's golden FILE.objdump = `objdump --sframe FILE` by sid's objdump for
# the file's architecture.
#
#   v3-*  assembled and linked by Debian sid's binutils 2.47 (SFrame V3)
#   v2-*  assembled and linked by Debian trixie's binutils 2.44 (SFrame V2,
#         without SFRAME_F_FDE_FUNC_START_PCREL)
#   v1-*  assembled and linked by Debian bookworm's binutils 2.40 (SFrame V1);
#         their goldens come from bookworm's objdump, the only one that
#         decodes V1
#
# Needs: the toolchain (bash scripts/reference-toolchain.sh), the host gcc
# (x86-64 code generation) and gcc-aarch64-linux-gnu (AArch64 code
# generation, little- and big-endian; `reference-toolchain.sh --cross`).
# Code generation is by the host's compilers, so the bytes are reproducible
# for a given gcc version (the committed files: Debian 12, gcc 12.2); the
# assembler and linker always come from the reference toolchain.
#
# Usage: testdata/sframe/build.sh [--goldens-only] [OUTDIR]
#   --goldens-only  only rewrite the .objdump goldens of the fixtures in
#                   OUTDIR (default: this directory) with sid's objdump
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
die() { printf 'build.sh: %s\n' "$*" >&2; exit 1; }

goldens_only=0
if [ "${1:-}" = --goldens-only ]; then goldens_only=1; shift; fi
out=${1:-$here}
mkdir -p "$out"
out=$(cd "$out" && pwd)

TC=$(bash "$repo/scripts/reference-toolchain.sh" --print) ||
	die "reference toolchain not installed: run bash scripts/reference-toolchain.sh"

# The fixtures are the files named here; goldens are regenerated for exactly
# these (scripts/check-fixtures.sh relies on that).
fixtures() {
	local f
	for f in "$out"/v[123]-*; do
		case $f in *.objdump) ;; *) [ -e "$f" ] && echo "${f##*/}" ;; esac
	done
}

# objdump_for FILE: sid's objdump for FILE's machine. The target's own
# objdump matters: it applies the .rela.sframe relocations of relocatable
# files, which a generic ELF objdump (e.g. x86_64-objdump on an AArch64 .o)
# cannot, and which change the printed function addresses.
objdump_for() {
	local data machine
	data=$(od -An -tu1 -j5 -N1 "$1" | tr -d ' ')
	if [ "$data" = 2 ]; then
		machine=$(od -An -tu1 -j18 -N2 "$1" | awk '{print $1 * 256 + $2}')
	else
		machine=$(od -An -tu1 -j18 -N2 "$1" | awk '{print $2 * 256 + $1}')
	fi
	# SFrame V1 is decoded only by binutils 2.40 (2.44 prints the header
	# and stops, 2.47 rejects the section), so v1-* goldens come from it.
	local suite=sid
	case ${1##*/} in v1-*) suite=bookworm ;; esac
	case $machine in
	62) echo "$TC/$suite/bin/x86_64-objdump" ;;
	183) echo "$TC/$suite/bin/aarch64-objdump" ;;
	22) echo "$TC/$suite/bin/s390x-objdump" ;;
	*) die "$1: ELF machine $machine has no reference objdump" ;;
	esac
}

goldens() {
	local f objdump
	for f in $(fixtures); do
		objdump=$(objdump_for "$out/$f")
		# objdump prints the file name as given; run it in $out so the
		# golden names the bare file.
		(cd "$out" && "$objdump" --sframe "$f" >"$f.objdump" 2>&1) ||
			die "objdump --sframe failed on $f (see $out/$f.objdump)"
	done
}

if [ "$goldens_only" = 1 ]; then
	goldens
	exit 0
fi

command -v gcc >/dev/null || die "gcc not found"
command -v aarch64-linux-gnu-gcc >/dev/null ||
	die "aarch64-linux-gnu-gcc not found: run bash scripts/reference-toolchain.sh --cross (needs root)"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Compile from inside src/ with relative names, so the objects record the
# same source file names wherever the repository is.
cd "$here/src"

# Flags common to every compilation: no debug info (it would record build
# paths), no .comment noise, unwind tables always on (the point of it all).
CFLAGS_COMMON=(-g0 -fno-ident -fasynchronous-unwind-tables -fno-stack-protector -fcf-protection=none)
# Linked files: no build ID (it hashes everything), no page-sized padding
# between segments (keeps each file a few KB, also on AArch64's 64 KiB pages).
LDFLAGS_COMMON=("-Wl,--build-id=none" "-Wl,-z,noseparate-code" "-Wl,-z,max-page-size=4096")
LD_COMMON=(--build-id=none -z noseparate-code -z max-page-size=4096)

# expect_warnings CMD...: run CMD whose warnings (gas on FDEs it cannot
# represent) are expected, so they stay out of the build log; show them if
# CMD fails.
expect_warnings() {
	if ! "$@" 2>"$work/warnings.log"; then
		cat "$work/warnings.log" >&2
		die "failed: $*"
	fi
}

rm -f "$out"/v[123]-*

for v in v3 v2; do
	case $v in v3) suite=sid ;; v2) suite=trixie ;; esac
	B=$TC/$suite
	X86=(gcc "-B$B/gcc-x86_64/" "-Wa,--gsframe" "${CFLAGS_COMMON[@]}" "${LDFLAGS_COMMON[@]}")
	A64=(aarch64-linux-gnu-gcc "-B$B/gcc-aarch64/" "-Wa,--gsframe" "${CFLAGS_COMMON[@]}" "${LDFLAGS_COMMON[@]}")

	## x86-64 objects
	"${X86[@]}" -O0 -fno-omit-frame-pointer -c common.c -o "$out/$v-x86_64-O0-fp.o"
	"${X86[@]}" -O2 -fomit-frame-pointer -c common.c -o "$out/$v-x86_64-O2.o"
	"${X86[@]}" -Os -fno-omit-frame-pointer -c common.c -o "$out/$v-x86_64-Os-fp.o"
	# One text section per function: the .sframe FDEs of a relocatable
	# object then point at several sections through .rela.sframe.
	"${X86[@]}" -O2 -ffunction-sections -c common.c -o "$out/$v-x86_64-O2-ffs.o"
	expect_warnings "${X86[@]}" -O2 -c x86_64/drap.c -o "$out/$v-x86_64-drap.o"
	# gas warns about the FDEs it cannot represent (sigtramp_expr, fp_escape;
	# in V2 also the DRAP and flex functions).
	expect_warnings "$B/bin/x86_64-as" --gsframe -o "$out/$v-x86_64-start.o" x86_64/start.s
	expect_warnings "$B/bin/x86_64-as" --gsframe -o "$out/$v-x86_64-flex.o" x86_64/flex.s
	"$B/bin/x86_64-as" --gsframe -o "$out/$v-x86_64-huge.o" x86_64/huge.s

	## x86-64 shared libraries: lazy .plt, -z now, IBT .plt + .plt.sec. Each
	## has a soname so that the executables' DT_NEEDED does not record $out.
	"${X86[@]}" -O2 -fPIC -shared -Wl,-z,lazy -Wl,-soname,$v-x86_64-lib-lazy.so -o "$out/$v-x86_64-lib-lazy.so" lib.c
	"${X86[@]}" -O2 -fPIC -shared -Wl,-z,now -Wl,-soname,$v-x86_64-lib-now.so -o "$out/$v-x86_64-lib-now.so" lib.c
	"${X86[@]}" -O2 -fPIC -shared -fcf-protection=full -Wl,-z,ibtplt -Wl,-soname,$v-x86_64-lib-ibt.so -o "$out/$v-x86_64-lib-ibt.so" lib.c

	## x86-64 executable (ET_EXEC) calling the library through its PLT
	"${X86[@]}" -O2 -c main.c -o "$work/main.o"
	"${X86[@]}" -O2 -fno-pic -no-pie -nostdlib -Wl,--allow-shlib-undefined \
		-o "$out/$v-x86_64-exe" "$out/$v-x86_64-start.o" "$work/main.o" \
		"$out/$v-x86_64-O2.o" "$out/$v-x86_64-lib-lazy.so"

	## AArch64 little-endian objects
	"${A64[@]}" -O0 -c common.c -o "$out/$v-aarch64-O0.o"
	"${A64[@]}" -O2 -mbranch-protection=standard -c common.c -o "$out/$v-aarch64-O2-pac.o"
	"${A64[@]}" -O2 -fno-omit-frame-pointer -mbranch-protection=pac-ret+b-key -c common.c -o "$out/$v-aarch64-O2-pacb.o"
	"$B/bin/aarch64-as" --gsframe -o "$out/$v-aarch64-start.o" aarch64/start.s

	## AArch64 little-endian shared library (PLT) and executable
	"${A64[@]}" -O2 -fPIC -shared -mbranch-protection=standard -Wl,-soname,$v-aarch64-lib.so -o "$out/$v-aarch64-lib.so" lib.c
	"${A64[@]}" -O2 -c main.c -o "$work/a64-main.o"
	"${A64[@]}" -O2 -nostdlib -Wl,--allow-shlib-undefined -o "$out/$v-aarch64-exe" \
		"$out/$v-aarch64-start.o" "$work/a64-main.o" "$out/$v-aarch64-O2-pac.o" "$out/$v-aarch64-lib.so"

	## AArch64 big-endian: the cross gcc only compiles (-S); the reference
	## as -EB and ld -EB do the rest.
	A64S=(aarch64-linux-gnu-gcc -mbig-endian "${CFLAGS_COMMON[@]}" -S)
	"${A64S[@]}" -O2 -mbranch-protection=pac-ret+b-key -o "$work/be-common.s" common.c
	"${A64S[@]}" -O2 -fPIC -mbranch-protection=standard -o "$work/be-lib.s" lib.c
	"${A64S[@]}" -O2 -o "$work/be-main.s" main.c
	for s in be-common be-lib be-main; do
		# The .s files name the C source in .file, so the objects do not
		# depend on $work.
		"$B/bin/aarch64-as" -EB --gsframe -o "$work/$s.o" "$work/$s.s"
	done
	cp "$work/be-common.o" "$out/$v-aarch64be-O2-pacb.o"
	"$B/bin/aarch64-as" -EB --gsframe -o "$work/be-start.o" aarch64/start.s
	"$B/bin/aarch64-ld" "${LD_COMMON[@]}" -EB -shared -soname $v-aarch64be-lib.so -o "$out/$v-aarch64be-lib.so" "$work/be-lib.o"
	"$B/bin/aarch64-ld" "${LD_COMMON[@]}" -EB -e _start --allow-shlib-undefined \
		-dynamic-linker /lib/ld-linux-aarch64_be.so.1 -o "$out/$v-aarch64be-exe" \
		"$work/be-start.o" "$work/be-main.o" "$work/be-common.o" "$out/$v-aarch64be-lib.so"
done

## SFrame V1 (bookworm, binutils 2.40): a few objects and one library, for
## readers of the oldest format.
B=$TC/bookworm
X86=(gcc "-B$B/gcc-x86_64/" "-Wa,--gsframe" "${CFLAGS_COMMON[@]}" "${LDFLAGS_COMMON[@]}")
A64=(aarch64-linux-gnu-gcc "-B$B/gcc-aarch64/" "-Wa,--gsframe" "${CFLAGS_COMMON[@]}" "${LDFLAGS_COMMON[@]}")
"${X86[@]}" -O2 -fomit-frame-pointer -c common.c -o "$out/v1-x86_64-O2.o"
"${X86[@]}" -O0 -fno-omit-frame-pointer -c common.c -o "$out/v1-x86_64-O0-fp.o"
expect_warnings "$B/bin/x86_64-as" --gsframe -o "$out/v1-x86_64-start.o" x86_64/start.s
"$B/bin/x86_64-as" --gsframe -o "$out/v1-x86_64-huge.o" x86_64/huge.s
"${X86[@]}" -O2 -fPIC -shared -Wl,-soname,v1-x86_64-lib-lazy.so -o "$out/v1-x86_64-lib-lazy.so" lib.c
"${A64[@]}" -O2 -fno-omit-frame-pointer -mbranch-protection=pac-ret+b-key -c common.c -o "$out/v1-aarch64-O2-pacb.o"
"$B/bin/aarch64-as" -EB --gsframe -o "$out/v1-aarch64be-O2-pacb.o" "$work/be-common.s"

## s390x (sid only: binutils 2.44 has no s390x SFrame)
"$TC/sid/bin/s390x-as" --gsframe -o "$out/v3-s390x-funcs.o" s390x/funcs.s
"$TC/sid/bin/s390x-as" --gsframe -o "$work/s390x-lib.o" s390x/lib.s
"$TC/sid/bin/s390x-ld" "${LD_COMMON[@]}" -shared -soname v3-s390x-lib.so -o "$out/v3-s390x-lib.so" "$work/s390x-lib.o"

goldens
echo "build.sh: $(fixtures | wc -l) fixtures in $out"
