#!/usr/bin/env bash
# Tree mode against GNU readelf, in one run: a copy of DIRS (default
# /usr/bin and /usr/lib/x86_64-linux-gnu) is made with cp -a under a
# scratch directory on the file system holding TMPDIR, then
#   readelf --debug-dump=frames-interp on every file, one after another
#     (sid binutils, the peer; output discarded),
#   cfi2sframe -q -j JOBS -o OUT COPY (a new tree beside it),
#   cfi2sframe -q -j JOBS --in-place on a fresh copy (each replaced file
#     is synced before its rename),
# each timed RUNS times (default 2; the copy for --in-place is remade
# before each run, outside the timing), with the ratio of the fastest run
# to readelf's. The copy needs about as much free space as DIRS, twice.
#
#   bench/tree.sh [DIR ...]        JOBS (default 2), RUNS (default 2)
#
# The in-place figure depends on the disk: its writers wait for the syncs
# and, on a file system mounted with discard, for the replaced files'
# blocks to be freed.
set -euo pipefail
cd "$(dirname "$0")/.."
dirs=("$@")
[ ${#dirs[@]} -gt 0 ] || dirs=(/usr/bin /usr/lib/x86_64-linux-gnu)
jobs=${JOBS:-2}
runs=${RUNS:-2}
. bench/common.sh

# copy DEST: dirs copied under DEST, as cp -a makes them.
copy() {
	rm -rf "$1"
	mkdir -p "$1"
	cp -a "${dirs[@]}" "$1/"
	sync
}

secs() {
	local t0 t1
	t0=$(date +%s.%N)
	"$@" >/dev/null 2>&1 || true
	t1=$(date +%s.%N)
	echo "$t1 - $t0" | bc
}

best() { sort -n | head -1; }

copy "$tmp/src"
files=$(find "$tmp/src" -type f | wc -l)
size=$(du -sh "$tmp/src" | cut -f1)
find "$tmp/src" -type f -exec cat {} + >/dev/null # page cache warm for everyone

r=$(for ((i = 0; i < runs; i++)); do
	secs bash -c 'find "$1" -type f -print0 | xargs -0 -n 1 "$2" --debug-dump=frames-interp' _ "$tmp/src" "$readelf"
done | best)
o=$(for ((i = 0; i < runs; i++)); do
	rm -rf "$tmp/out"
	sync
	secs "$c2s" -q -j "$jobs" -o "$tmp/out" "$tmp/src"
done | best)
# The summary line of one more run, into a scratch tree.
summary=$("$c2s" -j "$jobs" -o "$tmp/out2" "$tmp/src" 2>&1 | tail -1 || true)
rm -rf "$tmp/out2"
p=$(for ((i = 0; i < runs; i++)); do
	copy "$tmp/inplace"
	secs "$c2s" -q -j "$jobs" --in-place "$tmp/inplace"
done | best)

printf 'tree: %s files (%s) from %s\n%s\n' "$files" "$size" "${dirs[*]}" "$summary"
printf '%-36s %8s %10s\n' command "wall (s)" "/ readelf"
printf '%-36s %8.2f %10s\n' "readelf -wF, each file in turn" "$r" "1.00"
printf '%-36s %8.2f %9.2fx\n' "cfi2sframe -j $jobs -o OUT" "$o" "$(echo "$o / $r" | bc -l)"
printf '%-36s %8.2f %9.2fx\n' "cfi2sframe -j $jobs --in-place" "$p" "$(echo "$p / $r" | bc -l)"
