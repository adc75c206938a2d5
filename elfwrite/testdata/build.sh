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
