#!/usr/bin/env bash
# Side-by-side, in one run: opening an .sframe section and looking up
# 1,000,000 PCs with package sframe (Open, Table.Lookup; and the full
# Decode for reference) against libsframe (sframe_decode, sframe_find_fre)
# from the reference toolchain's sid libsframe-dev.
#
#   bench/sframe-vs-libsframe.sh [FILE]   default: the largest libLLVM*.so, else libc
#
# FILE is converted (SFrame V3) into a temporary copy whose section both
# sides read. Prints both figures and the ratios. Both sides are timed the
# same way, in CPU time of the measuring thread (waiting for a CPU on a
# loaded machine is left out): opening as the mean of 50 opens, best of 5
# rounds; lookups as the sum over blocks of 10,000 PCs of each block's best
# time in 5 passes (sframe/bench_test.go, bench/libsframe-bench.c).
set -euo pipefail
cd "$(dirname "$0")/.."
file=${1:-$(ls -S /usr/lib/x86_64-linux-gnu/libLLVM*.so* 2>/dev/null | head -1 || true)}
file=${file:-/lib/x86_64-linux-gnu/libc.so.6}
root=$(bash scripts/reference-toolchain.sh --print)
bash scripts/reference-toolchain.sh >/dev/null
ls="$root/sid/libsframe/usr"
if [ ! -f "$ls/include/sframe-api.h" ] || [ ! -f "$ls/lib/x86_64-linux-gnu/libsframe.a" ]; then
	echo "libsframe-dev (sframe-api.h, libsframe.a) is missing under $ls: run scripts/reference-toolchain.sh" >&2
	exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/cfi2sframe" ./cmd/cfi2sframe
"$tmp/cfi2sframe" -q --force "$file" -o "$tmp/conv"
"$root/sid/bin/x86_64-objcopy" --dump-section .sframe="$tmp/sec" "$tmp/conv" "$tmp/conv.tmp"
addr=0x$("$root/sid/bin/x86_64-readelf" -SW "$tmp/conv" | awk '$2 == ".sframe" { print $4 } $3 == ".sframe" { print $5 }' | head -1)
gcc -O2 -o "$tmp/libsframe-bench" bench/libsframe-bench.c -I"$ls/include" -Ibench/include "$ls/lib/x86_64-linux-gnu/libsframe.a"
go test -c -o "$tmp/sframe.test" ./sframe

echo "file: $file ($(stat -L -c %s "$file") bytes), .sframe $(stat -c %s "$tmp/sec") bytes at $addr"
# Alternate the two sides three times (the machine may be shared) and keep
# each side's best.
gobench="" c=""
for round in 1 2 3; do
	gobench+=$(CFI2SFRAME_BENCH_SFRAME="$tmp/sec" CFI2SFRAME_BENCH_ADDR="$addr" CFI2SFRAME_BENCH_PCS="$tmp/pcs" \
		"$tmp/sframe.test" -test.run '^$' -test.bench '^Benchmark(Open|Decode|Lookup)$' -test.benchmem)$'\n'
	c+=$("$tmp/libsframe-bench" "$tmp/sec" "$tmp/pcs")$'\n'
done
echo "$gobench" | grep Benchmark
echo "$c" | grep . | sed 's/^/libsframe /'
ours() { echo "$gobench" | awk -v b="^Benchmark$1-" -v u="$2" '$1 ~ b { for (i = 1; i <= NF; i++) if ($(i+1) == u) print $i }' | sort -n | head -1; }
ld=$(echo "$c" | awk '$1 == "decode_ns" { print $2 }' | sort -n | head -1)
ll=$(echo "$c" | awk '$1 == "lookup_ns" { print $2 }' | sort -n | head -1)
o=$(ours Open best-ns/open); d=$(ours Decode ns/op); l=$(ours Lookup best-ns/lookup)
printf 'open:   sframe.Open %.3f ms, sframe.Decode %.3f ms (wall, mean), libsframe sframe_decode %.3f ms; Open/libsframe = %.2fx (goal <= 2)\n' \
	"$(echo "$o / 1000000" | bc -l)" "$(echo "$d / 1000000" | bc -l)" "$(echo "$ld / 1000000" | bc -l)" "$(echo "$o / $ld" | bc -l)"
printf 'lookup: Table.Lookup %.1f ns, libsframe sframe_find_fre %.1f ns; Lookup/libsframe = %.2fx (goal <= 0.7)\n' \
	"$l" "$ll" "$(echo "$l / $ll" | bc -l)"
