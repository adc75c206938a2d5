#!/usr/bin/env bash
# End-to-end cost of cfi2sframe on a big file, against GNU readelf on the
# same file and against cp of it (the floor: a conversion writes a whole
# new file), in one run: the median wall time of RUNS runs (default 5; cp
# and convert alternate) and the peak RSS (GNU time) of
#   convert (IN -o OUT, OUT new), convert again over the existing OUT
#   (replacing a file is synced before the rename, a new one is not),
#   verify OUT, report IN, dump OUT,
#   readelf --debug-dump=frames-interp IN (sid binutils, the peer),
#   cp IN OUT (OUT new),
# each with the ratio of its time to readelf's and to cp's. Then the same on a
# generated file with ~2.1 M tiny FDEs (bench/genfdes).
#
#   bench/convert.sh [FILE] [N-FDES]
#
# FILE defaults to libLLVM (any version present) or else the largest
# shared library in /usr/lib/x86_64-linux-gnu. Needs /usr/bin/time
# (Debian package "time"; installed here when missing and run as root).
set -euo pipefail
cd "$(dirname "$0")/.."
file=${1:-}
nfdes=${2:-2100000}
if [ -z "$file" ]; then
	file=$(ls -S /usr/lib/x86_64-linux-gnu/libLLVM*.so* 2>/dev/null | head -1 || true)
	[ -n "$file" ] || file=$(ls -S /usr/lib/x86_64-linux-gnu/*.so* | head -1)
fi
if [ ! -x /usr/bin/time ]; then
	if [ "$(id -u)" = 0 ]; then
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq time >/dev/null
	else
		echo "bench: /usr/bin/time missing (apt-get install time)" >&2
		exit 1
	fi
fi
. bench/common.sh
go build -o "$tmp/genfdes" ./bench/genfdes

# run1 NAME CMD...: one run of CMD, appended to $tmp/NAME.all as its wall
# seconds (bash's clock, to the microsecond: GNU time's %e has 10 ms,
# a sixth of cp's time here) and its peak KiB (GNU time). When $fresh
# names a file, it is removed first (a new output, not a replaced one).
run1() {
	local name=$1 t0 t1
	shift
	[ -z "${fresh:-}" ] || rm -f "$fresh"
	t0=$EPOCHREALTIME
	/usr/bin/time -f '%M' -o "$tmp/$name.one" "$@" >/dev/null 2>"$tmp/$name.err" || {
		echo "bench: $name failed:" >&2
		cat "$tmp/$name.err" >&2
		return 1
	}
	t1=$EPOCHREALTIME
	echo "$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.4f", b - a}') $(cat "$tmp/$name.one")" >>"$tmp/$name.all"
}

# summarize NAME: the median wall seconds and the largest peak KiB of
# NAME's runs into $tmp/NAME.time.
summarize() {
	echo "$(sort -n "$tmp/$1.all" | awk '{t[NR] = $1} END {print t[int((NR + 1) / 2)]}')" \
		"$(sort -n -k2 "$tmp/$1.all" | tail -1 | cut -d' ' -f2)" >"$tmp/$1.time"
}

# measure NAME CMD...: RUNS runs (5 by default) of CMD, summarized.
runs=${RUNS:-5}
measure() {
	local name=$1 i
	shift
	: >"$tmp/$name.all"
	for ((i = 0; i < runs; i++)); do
		run1 "$name" "$@" || return 1
	done
	summarize "$name"
}

# bench LABEL FILE: the table for one input.
bench() {
	local label=$1 in=$2 force=""
	"$c2s" dump "$in" >/dev/null 2>&1 && force=--force
	cat "$in" >/dev/null # page cache warm for everyone
	measure readelf "$readelf" --debug-dump=frames-interp "$in"
	# cp and the conversion alternate, so that both meet the machine in
	# the same state (its speed drifts by a third over minutes here).
	local i
	: >"$tmp/cp.all"
	: >"$tmp/convert.all"
	for ((i = 0; i < runs; i++)); do
		fresh=$tmp/cp run1 cp cp "$in" "$tmp/cp"
		fresh=$tmp/out run1 convert "$c2s" -q $force "$in" -o "$tmp/out"
	done
	summarize cp
	summarize convert
	rm -f "$tmp/cp"
	measure convert-replace "$c2s" -q $force "$in" -o "$tmp/out"
	measure verify "$c2s" verify -q "$tmp/out"
	measure report "$c2s" report "$in"
	measure dump "$c2s" dump "$tmp/out"
	read -r rt rm <"$tmp/readelf.time"
	local ehsize
	ehsize=$("$readelf" -SW "$in" | sed 's/^ *\[ *[0-9]*\]//' | awk '$1==".eh_frame"{print $5}')
	printf '\n%s: %s (%s bytes; .eh_frame %d bytes)\n' "$label" "$in" "$(stat -L -c %s "$in")" "$((16#${ehsize:-0}))"
	read -r ct cm <"$tmp/cp.time"
	printf '%-28s %9s %12s %16s %12s\n' step "wall (s)" "peak RSS" "time / readelf" "time / cp"
	for s in convert convert-replace verify report dump readelf cp; do
		read -r t m <"$tmp/$s.time"
		printf '%-28s %9.3f %9d MiB %15.2fx %11.2fx\n' "$s" "$t" "$((m / 1024))" \
			"$(awk -v a="$t" -v b="$rt" 'BEGIN{print (b>0)? a/b : 0}')" "$(awk -v a="$t" -v b="$ct" 'BEGIN{print (b>0)? a/b : 0}')"
	done
}

echo "cfi2sframe $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(nproc) CPUs, readelf: $("$readelf" --version | head -1)"
bench "largest library" "$file"
"$tmp/genfdes" -n "$nfdes" -o "$tmp/many-fdes"
bench "$nfdes tiny FDEs" "$tmp/many-fdes"
