#!/usr/bin/env bash
# End-to-end cost of cfi2sframe on a big file, against GNU readelf on the
# same file, in one run: wall time and peak RSS (GNU time) of
#   convert (IN -o OUT, OUT new), convert again over the existing OUT
#   (replacing a file is synced before the rename, a new one is not),
#   verify OUT, report IN, dump OUT,
#   readelf --debug-dump=frames-interp IN (sid binutils, the peer),
# each with the ratio of its time to readelf's. Then the same on a
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
tc=$(bash scripts/reference-toolchain.sh --print)
readelf=$tc/sid/bin/x86_64-readelf
[ -x "$readelf" ] || readelf=$(command -v readelf)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
c2s=$tmp/cfi2sframe
go build -o "$c2s" ./cmd/cfi2sframe
go build -o "$tmp/genfdes" ./bench/genfdes

# measure NAME CMD...: one run, "wall-seconds peak-KiB" into $tmp/NAME.
measure() {
	local name=$1
	shift
	/usr/bin/time -f '%e %M' -o "$tmp/$name.time" "$@" >/dev/null 2>"$tmp/$name.err" || {
		echo "bench: $name failed:" >&2
		cat "$tmp/$name.err" >&2
		return 1
	}
}

# bench LABEL FILE: the table for one input.
bench() {
	local label=$1 in=$2 force=""
	"$c2s" dump "$in" >/dev/null 2>&1 && force=--force
	cat "$in" >/dev/null # page cache warm for everyone
	measure readelf "$readelf" --debug-dump=frames-interp "$in"
	rm -f "$tmp/out"
	measure convert "$c2s" -q $force "$in" -o "$tmp/out"
	measure convert-replace "$c2s" -q $force "$in" -o "$tmp/out"
	measure verify "$c2s" verify -q "$tmp/out"
	measure report "$c2s" report "$in"
	measure dump "$c2s" dump "$tmp/out"
	read -r rt rm <"$tmp/readelf.time"
	local ehsize
	ehsize=$("$readelf" -SW "$in" | sed 's/^ *\[ *[0-9]*\]//' | awk '$1==".eh_frame"{print $5}')
	printf '\n%s: %s (%s bytes; .eh_frame %d bytes)\n' "$label" "$in" "$(stat -c %s "$in")" "$((16#${ehsize:-0}))"
	printf '%-28s %9s %12s %16s\n' step "wall (s)" "peak RSS" "time / readelf"
	for s in convert convert-replace verify report dump readelf; do
		read -r t m <"$tmp/$s.time"
		printf '%-28s %9.2f %9d MiB %15.2fx\n' "$s" "$t" "$((m / 1024))" "$(awk -v a="$t" -v b="$rt" 'BEGIN{print (b>0)? a/b : 0}')"
	done
}

echo "cfi2sframe $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(nproc) CPUs, readelf: $("$readelf" --version | head -1)"
bench "largest library" "$file"
"$tmp/genfdes" -n "$nfdes" -o "$tmp/many-fdes"
bench "$nfdes tiny FDEs" "$tmp/many-fdes"
