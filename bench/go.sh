#!/usr/bin/env bash
# The cost of converting a Go program (SFrame from its function table,
# .gopclntab) against cp of it, beside the same ratio for a C++ library
# converted from its .eh_frame (libLLVM, as bench/convert.sh takes it):
# the target is that a Go program costs no more, relative to cp, than
# libLLVM does. RUNS rounds (default 11) alternate, in each, cp and
# `cfi2sframe IN -o OUT` (OUT new) of each file; the medians and the
# ratios are printed.
#
#   bench/go.sh [GO-BINARY] [OTHER]
#
# GO-BINARY defaults to the go command of the Go that runs this script
# (stripped: no CFI at all); OTHER to the largest libLLVM present.
set -euo pipefail
cd "$(dirname "$0")/.."
gobin=${1:-$(go env GOROOT)/bin/go}
other=${2:-$(ls -S /usr/lib/x86_64-linux-gnu/libLLVM*.so* 2>/dev/null | head -1 || true)}
[ -n "$other" ] || other=$(ls -S /usr/lib/x86_64-linux-gnu/*.so* | head -1)
runs=${RUNS:-11}
. bench/common.sh

files=("$gobin" "$other")
for ((r = 0; r < runs; r++)); do
	for i in 0 1; do
		f=${files[i]}
		rm -f "$tmp/cp" "$tmp/out"
		time1 "cp$i" cp "$f" "$tmp/cp"
		time1 "c2s$i" "$c2s" -q "$f" -o "$tmp/out"
	done
done
printf '%s, %d runs each, alternated\n' "$(git rev-parse --short HEAD)" "$runs"
printf '%-60s %10s %10s %8s\n' file "cp (s)" "convert (s)" "/ cp"
declare -A ratio
for i in 0 1; do
	f=${files[i]}
	read -r c _ < <(stats "cp$i")
	read -r v _ < <(stats "c2s$i")
	ratio[$f]=$(echo "scale=3; $v / $c" | bc)
	printf '%-60s %10.4f %10.4f %7.2fx\n' "$f ($(du -h "$f" | cut -f1))" "$c" "$v" "${ratio[$f]}"
done
verdict=met
[ "$(echo "${ratio[$gobin]} <= ${ratio[$other]}" | bc)" = 1 ] || verdict="not met"
printf 'Go program / cp: %.2fx; %s / cp: %.2fx (target: the Go program no more: %s)\n' "${ratio[$gobin]}" "$(basename "$other")" "${ratio[$other]}" "$verdict"
