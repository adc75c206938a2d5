#!/usr/bin/env bash
# The cost of --from-code on a large program whose code has almost no
# CFI (Debian's chromium: C++ built without unwind tables), against cp
# of it and its conversion without --from-code, in one run: wall time
# and peak RSS (GNU time) of each. Targets (issue 46): under 5 s and
# 512 MB on 2 cores. RUNS rounds (default 3) alternate cp, the plain
# conversion and --from-code; the medians are printed.
#
#   bench/fromcode.sh [FILE]
#
# FILE defaults to /usr/lib/chromium/chromium (apt-get install chromium).
set -euo pipefail
cd "$(dirname "$0")/.."
file=${1:-/usr/lib/chromium/chromium}
[ -r "$file" ] || { echo "bench/fromcode.sh: $file: not found (apt-get install chromium, or give a file)" >&2; exit 2; }
runs=${RUNS:-3}
. bench/common.sh

# rss NAME CMD...: one run of CMD; its peak RSS in KB (GNU time)
# appended to $tmp/NAME.rss, its wall seconds to $tmp/NAME.all.
rss() {
	local name=$1
	shift
	time1 "$name" /usr/bin/time -f %M -o "$tmp/$name.last" "$@"
	cat "$tmp/$name.last" >>"$tmp/$name.rss"
}
for ((r = 0; r < runs; r++)); do
	rm -f "$tmp/cp" "$tmp/plain" "$tmp/code"
	rss cp cp "$file" "$tmp/cp"
	rss plain "$c2s" -q --force "$file" -o "$tmp/plain"
	rss code "$c2s" -q --force --from-code "$file" -o "$tmp/code"
done
printf '%s, %s (%s), %d runs each, alternated\n' "$(git rev-parse --short HEAD)" "$file" "$(du -h "$file" | cut -f1)" "$runs"
printf '%-28s %10s %12s %8s\n' "" "wall (s)" "peak RSS (MB)" "/ cp"
read -r c _ < <(stats cp)
for n in cp plain code; do
	read -r v _ < <(stats "$n")
	m=$(sort -n "$tmp/$n.rss" | awk '{t[NR] = $1} END {print int(t[int((NR + 1) / 2)] / 1024)}')
	printf '%-28s %10.3f %12d %7.1fx\n' "$n" "$v" "$m" "$(echo "scale=3; $v / $c" | bc)"
	[ "$n" = code ] && secs=$v && mb=$m
done
verdict=met
[ "$(echo "$secs < 5" | bc)" = 1 ] && [ "$mb" -lt 512 ] || verdict="not met"
printf -- '--from-code: %.1f s, %d MB (target: under 5 s and 512 MB: %s)\n' "$secs" "$mb" "$verdict"
