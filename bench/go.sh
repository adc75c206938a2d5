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

# secs CMD...: the wall time of one run, in seconds.
secs() {
	local t0 t1
	t0=$(date +%s%N)
	"$@" >/dev/null 2>&1
	t1=$(date +%s%N)
	echo "scale=6; ($t1 - $t0) / 1000000000" | bc
}
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

declare -A t
for ((r = 0; r < runs; r++)); do
	for f in "$gobin" "$other"; do
		rm -f "$tmp/cp" "$tmp/out"
		t["cp $f"]+="$(secs cp "$f" "$tmp/cp") "
		t["c2s $f"]+="$(secs "$c2s" -q "$f" -o "$tmp/out") "
	done
done
printf '%s, %d runs each, alternated\n' "$(git rev-parse --short HEAD)" "$runs"
printf '%-60s %10s %10s %8s\n' file "cp (s)" "convert (s)" "/ cp"
declare -A ratio
for f in "$gobin" "$other"; do
	c=$(echo "${t["cp $f"]}" | tr ' ' '\n' | grep . | median)
	v=$(echo "${t["c2s $f"]}" | tr ' ' '\n' | grep . | median)
	ratio[$f]=$(echo "scale=3; $v / $c" | bc)
	printf '%-60s %10.4f %10.4f %7.2fx\n' "$f ($(du -h "$f" | cut -f1))" "$c" "$v" "${ratio[$f]}"
done
verdict=met
[ "$(echo "${ratio[$gobin]} <= ${ratio[$other]}" | bc)" = 1 ] || verdict="not met"
printf 'Go program / cp: %.2fx; %s / cp: %.2fx (target: the Go program no more: %s)\n' "${ratio[$gobin]}" "$(basename "$other")" "${ratio[$other]}" "$verdict"
