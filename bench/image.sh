#!/usr/bin/env bash
# cfi2sframe image against skopeo copy, in one run. A source image in an
# OCI layout under a scratch directory on the file system holding TMPDIR
# (default: the Debian root file system of scripts/rootfs.sh as one gzip
# layer, built first when missing, plus with CHROMIUM=1 a second layer
# holding Debian's chromium and chromium-common unpacked with dpkg-deb -x;
# or IMAGE=oci:DIR:TAG, any image layout) is copied RUNS times (default 5)
# by each of
#   skopeo copy --dest-compress-format zstd oci:SRC oci:A  (the floor: every
#                                        layer decompressed and recompressed)
#   skopeo copy oci:SRC oci:B            (every blob copied as it is)
#   cfi2sframe image -j JOBS --dest-compress-format zstd oci:SRC oci:C
# alternating run by run so that all three meet the machine in the same
# state, each into a new layout (a layout that already has a blob is not
# written it again), removed after the run. It prints the median and the
# range of each, the ratios of cfi2sframe's median to skopeo's (target:
# at most 1.3 times the zstd copy) and cfi2sframe's peak resident set
# (GNU time's %M, the largest of the runs; target: under 256 MB).
#
#   bench/image.sh        JOBS (default: all CPUs), RUNS (default 5),
#                         CHROMIUM=1, IMAGE=oci:DIR:TAG
#
# Needs skopeo and umoci (Debian packages), GNU time (/usr/bin/time) and,
# for the default image, root (scripts/rootfs.sh runs mmdebstrap); with
# CHROMIUM=1, apt-get download of the two packages (about 100 MB).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${JOBS:-$(nproc)}
runs=${RUNS:-5}
for p in skopeo umoci /usr/bin/time; do
	command -v "$p" >/dev/null || { echo "bench: $p not found (apt-get install skopeo umoci time)" >&2; exit 1; }
done
if [ -z "${IMAGE:-}" ]; then
	bash scripts/rootfs.sh
	tarball=$(bash scripts/rootfs.sh --print)
fi
. bench/common.sh

if [ -n "${IMAGE:-}" ]; then
	src=$IMAGE
	what="$IMAGE"
else
	# umoci writes each layer gzip-compressed, as docker and buildah do.
	lay=$tmp/src
	umoci init --layout "$lay"
	umoci new --image "$lay:bench"
	umoci raw add-layer --image "$lay:bench" "$tarball"
	what="rootfs ($(basename "$tarball"))"
	if [ "${CHROMIUM:-0}" = 1 ]; then
		mkdir "$tmp/debs" "$tmp/chromium"
		(cd "$tmp/debs" && apt-get download chromium chromium-common >/dev/null 2>&1) ||
			{ echo "bench: apt-get download chromium chromium-common failed" >&2; exit 1; }
		for d in "$tmp"/debs/*.deb; do dpkg-deb -x "$d" "$tmp/chromium"; done
		tar -C "$tmp/chromium" --numeric-owner --owner=0 --group=0 -cf "$tmp/chromium.tar" .
		umoci raw add-layer --image "$lay:bench" "$tmp/chromium.tar"
		what="$what + $(cd "$tmp/debs" && ls | sed 's/_amd64.deb//' | paste -sd ' ')"
		rm -rf "$tmp/debs" "$tmp/chromium" "$tmp/chromium.tar"
	fi
	src=oci:$lay:bench
fi
srcdir=${src#oci:}
srcdir=${srcdir%:*}
layers=$(skopeo inspect --format '{{len .Layers}}' "$src")
size=$(du -sh "$srcdir" | cut -f1)
find "$srcdir" -type f -exec cat {} + >/dev/null # page cache warm for everyone
sync

# run1 NAME CMD...: one run of CMD into a new layout $tmp/out (removed
# after), its wall seconds (bash's clock) appended to $tmp/NAME.all.
run1() {
	local name=$1 t0 t1
	shift
	rm -rf "$tmp/out"
	sync
	t0=$EPOCHREALTIME
	"$@" >/dev/null 2>"$tmp/$name.err" || {
		echo "bench: $name failed:" >&2
		cat "$tmp/$name.err" >&2
		return 1
	}
	t1=$EPOCHREALTIME
	awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.4f\n", b - a}' >>"$tmp/$name.all"
	rm -rf "$tmp/out"
}

: >"$tmp/zstd.all"
: >"$tmp/plain.all"
: >"$tmp/c2s.all"
: >"$tmp/rss"
for ((i = 0; i < runs; i++)); do
	run1 zstd skopeo --insecure-policy copy --quiet --dest-compress-format zstd "$src" "oci:$tmp/out:bench"
	run1 plain skopeo --insecure-policy copy --quiet "$src" "oci:$tmp/out:bench"
	run1 c2s /usr/bin/time -a -o "$tmp/rss" -f %M "$c2s" image -q -j "$jobs" --dest-compress-format zstd "$src" "oci:$tmp/out:bench"
done
# The summary of one more run, into a scratch layout.
summary=$("$c2s" image -j "$jobs" --dest-compress-format zstd "$src" "oci:$tmp/out.summary:bench" 2>&1 | tail -3 || true)
rss=$(sort -n "$tmp/rss" | tail -1)

read -r zt _ _ < <(stats zstd)
read -r pt _ _ < <(stats plain)
printf 'image: %s: %s layers, %s\n%s\n' "$what" "$layers" "$size" "$summary"
printf 'cfi2sframe %s, skopeo %s, %s CPUs, -j %s, %s runs each\n' "$(git rev-parse --short HEAD 2>/dev/null || echo '?')" \
	"$(skopeo --version | awk '{print $3}')" "$(nproc)" "$jobs" "$runs"
printf '%-58s %9s %17s %8s %8s\n' command "median (s)" "range (s)" "/ zstd" "/ plain"
for s in zstd plain c2s; do
	case $s in
	zstd) label="skopeo copy --dest-compress-format zstd" ;;
	plain) label="skopeo copy" ;;
	c2s) label="cfi2sframe image -j $jobs --dest-compress-format zstd" ;;
	esac
	read -r m lo hi < <(stats "$s")
	printf '%-58s %9.3f %8.3f-%-8.3f %7.2fx %7.2fx\n' "$label" "$m" "$lo" "$hi" \
		"$(awk -v a="$m" -v b="$zt" 'BEGIN {print (b > 0) ? a / b : 0}')" \
		"$(awk -v a="$m" -v b="$pt" 'BEGIN {print (b > 0) ? a / b : 0}')"
done
read -r ct _ _ < <(stats c2s)
printf 'cfi2sframe / skopeo zstd: %.2fx (target <= 1.3: %s)\n' "$(awk -v a="$ct" -v b="$zt" 'BEGIN {print a / b}')" \
	"$(awk -v a="$ct" -v b="$zt" 'BEGIN {print (a / b <= 1.3) ? "met" : "missed"}')"
printf 'cfi2sframe peak RSS: %d MB (largest of %s runs; target < 256 MB: %s)\n' "$((rss / 1024))" "$runs" \
	"$([ "$rss" -lt $((256 * 1024)) ] && echo met || echo missed)"
