#!/bin/sh
# Builds the code-analysis corpus of issue 46 from x86_64.s and aarch64.s:
# each source twice, linked into a small executable,
#
#   ARCH-cfi    as written: .eh_frame has an FDE per function (the
#               reference internal/testing/codecheck judges against)
#   ARCH-nocfi  the same code with no CFI: every line whose first word
#               starts with .cfi_ is deleted before assembling
#
# and then runs each (x86-64 natively, AArch64 under qemu-aarch64-static)
# to show the code does what its CFI says: _start exits 0 only when every
# function returned what it should.
#
# Why sed and not a CFI(x) macro: `as` has no switch to drop .cfi_*
# directives, and the sources stay plain assembly that any reader (and
# `as` itself) takes as it is; the one rule it sets is that a directive
# stays on a line of its own. The test TestNoCFIHasNoFDEs checks the
# result: no FDE in the -nocfi files covers a function.
#
# Deterministic: no build ID, no debug info, fixed page size, the
# objects' names fixed; -nostartfiles keeps the C runtime's start files
# (and their FDEs) out, so every FDE is one of ours. abort comes from the
# C library through the PLT. The AVX-512, AVX2 and BMI2 functions run
# natively: build on a machine that has them (or skip the run: RUN=0).
set -eu
cd "$(dirname "$0")"
RUN=${RUN:-1}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

LDFLAGS="-nostartfiles -Wl,--build-id=none -Wl,-z,noseparate-code -Wl,-z,max-page-size=4096"

strip_cfi() {
	sed -e '/^[[:space:]]*\.cfi_/d' "$1"
}

# build ARCH GCC: ARCH.s into ARCH-cfi and ARCH-nocfi.
build() {
	arch=$1 gcc=$2
	cp "$arch.s" "$tmp/$arch-cfi.s"
	strip_cfi "$arch.s" >"$tmp/$arch-nocfi.s"
	if grep -v '^[[:space:]]*\(#\|//\)' "$tmp/$arch-nocfi.s" | grep -q '\.cfi_'; then
		echo "build.sh: a .cfi_ directive is not on a line of its own in $arch.s" >&2
		exit 1
	fi
	for v in cfi nocfi; do
		(cd "$tmp" && $gcc -c -o "$arch-$v.o" "$arch-$v.s")
		(cd "$tmp" && $gcc $LDFLAGS -o "$arch-$v" "$arch-$v.o")
		cp "$tmp/$arch-$v" "$arch-$v"
	done
}

build x86_64 gcc
build aarch64 aarch64-linux-gnu-gcc

if [ "$RUN" = 1 ]; then
	for v in cfi nocfi; do
		./x86_64-$v || { echo "build.sh: x86_64-$v exited $?" >&2; exit 1; }
		qemu-aarch64-static -L /usr/aarch64-linux-gnu ./aarch64-$v ||
			{ echo "build.sh: aarch64-$v exited $?" >&2; exit 1; }
	done
	echo "build.sh: all four ran and exited 0"
fi
