#!/usr/bin/env bash
# The tree form on a whole Debian root file system against cp -a of it,
# in one run: the tarball of scripts/rootfs.sh (bookworm minbase and a
# few packages, ~7200 files of which ~800 ELF, 190 MB; built first when
# missing) is extracted with its owners, modes, devices and capabilities
# into a scratch directory ROOT on the file system holding TMPDIR, then
#   cp -a ROOT X                          (the floor: a faithful copy),
#   cfi2sframe -q -j JOBS -o OUT ROOT     (a converted copy beside it),
#   cfi2sframe -q -j JOBS --in-place COPY (COPY made with cp -a before
#                                          each run, outside the timing)
# are each timed RUNS times (default 5), alternating run by run so that
# all three meet the machine in the same state (its speed drifts over
# minutes), and printed as the median, the range and the ratio of the
# median to cp -a's. Dirty pages are synced before each timed command,
# outside the timing; every run writes a new tree (see below).
#
#   bench/rootfs.sh        JOBS (default: all CPUs), RUNS (default 5)
#
# Needs root (the tarball holds devices, owners and file capabilities;
# scripts/rootfs.sh runs mmdebstrap as root) and 3×RUNS+2 times the
# tree's size free (3.4 GB for 5 runs). On ext4 without a journal, as
# here, start it when no large tree has been deleted in the last six
# minutes (see below). The in-place figure depends on the disk: each
# replaced file is synced before its rename, which cp -a does not do.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "bench: rootfs.sh needs root (devices, owners, capabilities)" >&2; exit 1; }
jobs=${JOBS:-$(nproc)}
runs=${RUNS:-5}
bash scripts/rootfs.sh
tarball=$(bash scripts/rootfs.sh --print)
. bench/common.sh

root=$tmp/root
mkdir "$root"
tar --xattrs --xattrs-include='*' --acls --numeric-owner -C "$root" -xpf "$tarball"
files=$(find "$root" -type f | wc -l)
elfs=$(find "$root" -type f -size +3c -exec sh -c 'for f; do [ "$(head -c 4 "$f")" != "$(printf "\177ELF")" ] || echo; done' _ {} + | wc -l)
size=$(du -sh "$root" | cut -f1)
find "$root" -type f -exec cat {} + >/dev/null # page cache warm for everyone
sync

# run1 NAME CMD...: one run of CMD, its wall seconds (bash's clock)
# appended to $tmp/NAME.all.
run1() {
	local name=$1 t0 t1
	shift
	sync
	t0=$EPOCHREALTIME
	"$@" >/dev/null 2>"$tmp/$name.err" || {
		echo "bench: $name failed:" >&2
		cat "$tmp/$name.err" >&2
		return 1
	}
	t1=$EPOCHREALTIME
	awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.4f\n", b - a}' >>"$tmp/$name.all"
}

: >"$tmp/cp.all"
: >"$tmp/out.all"
: >"$tmp/inplace.all"
# Every run writes a new tree, removed only at the end: on ext4 without
# a journal, creating files after deleting thousands is ten times slower
# for one to six minutes (the inode allocator passes over every inode
# deleted in that time, recently_deleted() in fs/ext4/ialloc.c: cp -a
# of this tree took 0.4 s, and 6 to 8 s after rm -rf of a copy), which
# would charge each command for the cleanup of the one before.
for ((i = 0; i < runs; i++)); do
	run1 cp cp -a "$root" "$tmp/cp.$i"
	run1 out "$c2s" -q -j "$jobs" -o "$tmp/out.$i" "$root"
	cp -a "$root" "$tmp/inplace.$i"
	run1 inplace "$c2s" -q -j "$jobs" --in-place "$tmp/inplace.$i"
done
# The summary line of one more run, into a scratch tree.
summary=$("$c2s" -j "$jobs" -o "$tmp/out.summary" "$root" 2>&1 | tail -1 || true)

read -r ct _ _ < <(stats cp)
printf 'rootfs: %s files (%s ELF, %s) from %s\n%s\n' "$files" "$elfs" "$size" "$tarball" "$summary"
printf 'cfi2sframe %s, %s CPUs, -j %s, %s runs each\n' "$(git rev-parse --short HEAD 2>/dev/null || echo '?')" "$(nproc)" "$jobs" "$runs"
printf '%-40s %9s %17s %8s\n' command "median (s)" "range (s)" "/ cp -a"
for s in cp out inplace; do
	case $s in
	cp) label="cp -a ROOT X" ;;
	out) label="cfi2sframe -q -j $jobs -o OUT ROOT" ;;
	inplace) label="cfi2sframe -q -j $jobs --in-place COPY" ;;
	esac
	read -r m lo hi < <(stats "$s")
	printf '%-40s %9.3f %8.3f-%-8.3f %7.2fx\n' "$label" "$m" "$lo" "$hi" "$(awk -v a="$m" -v b="$ct" 'BEGIN {print (b > 0) ? a / b : 0}')"
done
