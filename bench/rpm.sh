#!/usr/bin/env bash
# cfi2sframe IN.rpm -o OUT.rpm against the floor of any tool that
# rewrites an RPM's payload: decompressing it and compressing it again
# with the same compressor and level (issue 48's target: at most 1.3
# times that). rpmbuild packages LIB (default Debian's libLLVM-15.so.1,
# 117 MB, one file) once per payload compression in CODECS (default
# "zstd xz"), each at rpmbuild's default level (w.zstdio, w.xzdio: an
# empty PAYLOADFLAGS, which rpm, zstd and xz take as zstd -3 and xz -6).
# Then, RUNS times (default 3), alternating so that all meet the machine
# in the same state:
#   cfi2sframe IN.rpm -o OUT.rpm
#   rpmfloor IN.rpm > /dev/null          (the Go floor: bench/rpmfloor,
#       rpm.Recompress: the payload decompressed and compressed again by
#       the decoder, encoder, level and pipe cfi2sframe uses; nothing
#       converted, hashed or spooled)
#   rpm2cpio IN.rpm | zstd -3 -T1 > /dev/null   (or xz -6 -T1: the C
#       floor, rpm's own decoder and the reference compressor)
# It prints the medians and ranges of wall seconds and of CPU seconds
# (user + system, GNU time), the ratios to each floor, and cfi2sframe's
# peak resident set. The Go floor is the one the target is held to:
# klauspost/compress's zstd and ulikunitz/xz, the encoders cfi2sframe
# ships, are slower than the C ones, which no conversion can change.
#
#   bench/rpm.sh          RUNS (default 3), CODECS, LIB
#
# Needs rpmbuild, rpm2cpio, zstd, xz and GNU time (/usr/bin/time). The
# machine may be shared: run it under nice, with RUNS small; rpmbuild of
# the xz package alone takes a minute or two.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-3}
codecs=${CODECS:-zstd xz}
lib=${LIB:-/usr/lib/x86_64-linux-gnu/libLLVM-15.so.1}
for p in rpmbuild rpm2cpio zstd xz /usr/bin/time; do
	command -v "$p" >/dev/null || { echo "bench: $p not found (apt-get install rpm zstd xz-utils time)" >&2; exit 1; }
done
[ -f "$lib" ] || { echo "bench: $lib not found (LIB=...)" >&2; exit 1; }
. bench/common.sh
floor=$tmp/rpmfloor
go build -o "$floor" ./bench/rpmfloor

cat >"$tmp/bench.spec" <<EOF
Name: c2sbench
Version: 1.0
Release: 1
Summary: cfi2sframe benchmark package
License: none
AutoReqProv: no
%define _build_id_links none
%define debug_package %{nil}
%define __strip /bin/true
%description
$(basename "$lib") for bench/rpm.sh
%install
mkdir -p %{buildroot}/usr/lib
cp "$lib" %{buildroot}/usr/lib/
%files
/usr/lib/$(basename "$lib")
EOF

# run1 NAME CMD...: one run of CMD (through sh -c), its wall and CPU
# seconds appended to $tmp/NAME.all and $tmp/NAME-cpu.all, its peak RSS
# (KB) to $tmp/NAME.rss.
run1() {
	local name=$1
	shift
	/usr/bin/time -o "$tmp/t" -f '%e %U %S %M' sh -c "$1" >/dev/null 2>"$tmp/$name.err" || {
		echo "bench: $name failed:" >&2
		cat "$tmp/$name.err" >&2
		return 1
	}
	read -r e u s m <"$tmp/t"
	echo "$e" >>"$tmp/$name.all"
	awk -v u="$u" -v s="$s" 'BEGIN {printf "%.2f\n", u + s}' >>"$tmp/$name-cpu.all"
	echo "$m" >>"$tmp/$name.rss"
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2fx", (b > 0) ? a / b : 0}'; }

printf 'cfi2sframe %s, %s CPUs, load %s, %s runs each; %s (%d bytes)\n' "$(git rev-parse --short HEAD 2>/dev/null || echo '?')" \
	"$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)" "$runs" "$lib" "$(stat -c %s "$lib")"
for codec in $codecs; do
	case $codec in
	zstd) cflag=3 io=zstdio ;;
	xz) cflag=6 io=xzdio ;;
	*) echo "bench: codec $codec: zstd or xz" >&2; exit 1 ;;
	esac
	top=$tmp/top-$codec
	rpmbuild -bb --quiet --define "_topdir $top" --define "_binary_payload w.$io" "$tmp/bench.spec" >/dev/null
	in=$(echo "$top"/RPMS/*/*.rpm)
	flags=$(rpm -qp --qf '%{PAYLOADFLAGS}' "$in")
	level=${flags%%[!0-9]*}
	level=${level:-$cflag}
	for s in c2s gofloor cfloor; do : >"$tmp/$s.all"; : >"$tmp/$s-cpu.all"; : >"$tmp/$s.rss"; done
	cat "$in" >/dev/null # page cache warm for everyone
	for ((i = 0; i < runs; i++)); do
		run1 c2s "'$c2s' -q '$in' -o '$tmp/out.rpm'"
		run1 gofloor "'$floor' '$in'"
		run1 cfloor "rpm2cpio '$in' | $codec -$level -T1"
	done
	summary=$("$c2s" "$in" -o "$tmp/out.rpm" 2>&1 | sed 's/^[^:]*: //')
	rpm -K "$tmp/out.rpm" | grep -q 'digests OK' || { echo "bench: rpm -K $tmp/out.rpm failed" >&2; exit 1; }
	printf '\n%s payload (PAYLOADFLAGS "%s": level %s): %d bytes in, %d out; %s\n' "$codec" "$flags" "$level" \
		"$(stat -c %s "$in")" "$(stat -c %s "$tmp/out.rpm")" "$summary"
	printf '%-44s %8s %15s %8s %15s %13s %13s\n' command "wall (s)" "range" "CPU (s)" "range" "/ Go" "/ C"
	read -r gw _ _ < <(stats gofloor)
	read -r gc _ _ < <(stats gofloor-cpu)
	read -r cw _ _ < <(stats cfloor)
	read -r cc _ _ < <(stats cfloor-cpu)
	for s in c2s gofloor cfloor; do
		case $s in
		c2s) label="cfi2sframe IN.rpm -o OUT.rpm" ;;
		gofloor) label="rpmfloor IN.rpm (Go floor)" ;;
		cfloor) label="rpm2cpio IN.rpm | $codec -$level -T1 (C floor)" ;;
		esac
		read -r w wlo whi < <(stats "$s")
		read -r c clo chi < <(stats "$s-cpu")
		printf '%-44s %8.2f %7.2f-%-7.2f %8.2f %7.2f-%-7.2f %13s %13s\n' "$label" "$w" "$wlo" "$whi" "$c" "$clo" "$chi" \
			"$(ratio "$w" "$gw")/$(ratio "$c" "$gc")" "$(ratio "$w" "$cw")/$(ratio "$c" "$cc")"
	done
	read -r w _ _ < <(stats c2s)
	printf 'cfi2sframe / Go floor, wall: %s (target <= 1.3: %s); peak RSS %d MB\n' "$(ratio "$w" "$gw")" \
		"$(awk -v a="$w" -v b="$gw" 'BEGIN {print (a / b <= 1.3) ? "met" : "missed"}')" "$(($(sort -n "$tmp/c2s.rss" | tail -1) / 1024))"
	rm -rf "$top" "$tmp/out.rpm"
done
