#!/usr/bin/env bash
# Side-by-side: parse and execute every FDE of a large library with package
# cfi, and with binutils' interpreter (readelf --debug-dump=frames-interp,
# the reference toolchain's sid readelf, output discarded), in the same run.
# Prints both times (best of N runs) and the ratio.
#
#   bench/cfi-vs-readelf.sh [FILE] [RUNS]   default: the largest libLLVM*.so, else libc
set -euo pipefail
cd "$(dirname "$0")/.."
file=${1:-$(ls -S /usr/lib/x86_64-linux-gnu/libLLVM*.so* 2>/dev/null | head -1 || true)}
file=${file:-/lib/x86_64-linux-gnu/libc.so.6}
runs=${2:-5}
root=$(bash scripts/reference-toolchain.sh --print)
bash scripts/reference-toolchain.sh >/dev/null
readelf="$root/sid/bin/x86_64-readelf"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go test -c -o "$tmp/cfi.test" ./cfi

best() { sort -n | head -1; }
secs() { local s e; s=$(date +%s.%N); "$@" >/dev/null 2>&1; e=$(date +%s.%N); echo "$e - $s" | bc; }

echo "file: $file ($(stat -L -c %s "$file") bytes)"
r=$(for i in $(seq "$runs"); do secs "$readelf" --debug-dump=frames-interp "$file"; done | best)
# One benchmark iteration = parse + execute every FDE once.
ours=$(for i in $(seq "$runs"); do
	CFI2SFRAME_BENCH_FILE="$file" "$tmp/cfi.test" -test.run '^$' -test.bench BenchmarkParseExecute -test.benchtime 1x -test.benchmem |
		awk '/^BenchmarkParseExecute/ { for (i = 1; i <= NF; i++) if ($(i+1) == "ns/op") print $i / 1e9 }'
done | best)
CFI2SFRAME_BENCH_FILE="$file" "$tmp/cfi.test" -test.run '^$' -test.bench BenchmarkParseExecute -test.benchtime 3x -test.benchmem | grep Benchmark
printf 'readelf --debug-dump=frames-interp: %.3f s\ncfi Parse+Execute:                  %.3f s\nratio (readelf / cfi):              %.1fx\n' "$r" "$ours" "$(echo "$r / $ours" | bc -l)"
