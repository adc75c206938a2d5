#!/bin/sh
# Rebuilds elfwrite's committed fixtures: tiny libc-free programs for
# x86-64 and AArch64, as a static non-PIE executable and a static PIE.
# Needs gcc and gcc-aarch64-linux-gnu. Run from this directory.
set -eu
flags="-Os -nostdlib -fno-asynchronous-unwind-tables -Wl,--build-id=none"
for cc in gcc:x86_64 aarch64-linux-gnu-gcc:aarch64; do
	gcc=${cc%%:*}
	arch=${cc#*:}
	# shellcheck disable=SC2086 # flags is a word list
	"$gcc" $flags -static -no-pie -fno-pie -o "tiny-$arch" tiny.c
	# shellcheck disable=SC2086
	"$gcc" $flags -Wl,-z,norelro -static-pie -fPIE -o "tiny-$arch-pie" tiny.c
done

# Big-endian fixtures from assembly: AArch64 BE with the cross binutils,
# s390x with the reference toolchain's binutils (scripts/reference-toolchain.sh).
aarch64-linux-gnu-as -EB -o tiny-aarch64_be.o tiny-aarch64_be.s
aarch64-linux-gnu-ld -EB -m aarch64linuxb -static --build-id=none -z norelro -o tiny-aarch64_be tiny-aarch64_be.o
sid=${CFI2SFRAME_TOOLCHAIN:-${XDG_CACHE_HOME:-$HOME/.cache}/cfi2sframe/toolchain}/sid/bin
"$sid/s390x-as" -o tiny-s390x.o tiny-s390x.s
"$sid/s390x-ld" -static --build-id=none -o tiny-s390x tiny-s390x.o
rm -f tiny-aarch64_be.o tiny-s390x.o
