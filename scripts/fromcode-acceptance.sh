#!/usr/bin/env bash
# fromcode-acceptance.sh — what --from-code adds on real packages, and how
# precise its rows are, with the cfi2sframe of this checkout.
#
#   packages   Debian's chromium, libx265-199, libdav1d6, libopenblas0-pthread,
#              firefox-esr, libx264-164, libnettle8 and libjpeg62-turbo, as the
#              host's apt sources give them (bookworm on the reference
#              machine), fetched with apt-get download into the cache (no
#              root needed) and unpacked with dpkg-deb -x. apt-get download
#              checks every .deb against the SHA256 of the (signed) Packages
#              index; this script checks the cached .deb against
#              apt-cache show's SHA256 again, so that a file left from an
#              earlier run is held to the index too. For each library (and
#              chromium's executable): report --json and report --json
#              --from-code give the code bytes, the share SFrame describes
#              before and after --from-code and the share described from
#              instructions; the --from-code report is timed. Then
#              cfi2sframe FILE -o OUT --from-code and cfi2sframe verify OUT
#              (which checks every from-code row against the instructions):
#              a failed conversion or verify fails the script.
#   precision  internal/testing/cmd/codecheck on files that have CFI (libc,
#              libstdc++, python3.11, gdb and libLLVM-15 when present,
#              firefox-esr's libxul.so and chromium from above): each is
#              analysed as if it had no CFI and every row is judged against
#              its CFI. Printed: instructions judged, wrong PCs, the share of
#              the CFI-covered instructions described, the top reasons for
#              the rest. Any wrong PC fails the script.
#
# Usage: scripts/fromcode-acceptance.sh [--quick] [--no-packages] [--no-precision]
#   --quick         (or FROMCODE_QUICK=1) skip chromium and libxul.so (300 and
#                   180 MB: minutes each, in both parts)
#   --no-packages   only the precision part (on the host's files, and on the
#                   packages' files if an earlier run left them in the cache)
#   --no-precision  only the packages part
# Environment: CFI2SFRAME (a built cfi2sframe; default: go build of
# ./cmd/cfi2sframe into a temporary directory), CFI2SFRAME_FROMCODE_CACHE
# (the cache; default ${XDG_CACHE_HOME:-$HOME/.cache}/cfi2sframe/fromcode-acceptance).
# Layout of the cache: debs/ (the .deb files), root/ (all of them unpacked),
# root/.complete (the .deb names unpacked), results/ (each run's tables, by
# date). Exit status: 0 when every check passed (a part skipped for want of
# apt is not a failure; it is said), 1 otherwise.
set -euo pipefail

prog=fromcode-acceptance.sh
die() { printf '%s: %s\n' "$prog" "$*" >&2; exit 1; }
note() { printf '%s: %s\n' "$prog" "$*" >&2; }

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
DIR=${CFI2SFRAME_FROMCODE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cfi2sframe/fromcode-acceptance}
PACKAGES="chromium libx265-199 libdav1d6 libopenblas0-pthread firefox-esr libx264-164 libnettle8 libjpeg62-turbo"
LIB=usr/lib/x86_64-linux-gnu
# The files measured, relative to the unpacked root; BIG ones are skipped
# by --quick.
FILES="usr/lib/chromium/chromium $LIB/libx265.so.199 $LIB/libdav1d.so.6
$LIB/openblas-pthread/libopenblas.so.0 usr/lib/firefox-esr/libmozavcodec.so
usr/lib/firefox-esr/libxul.so $LIB/libx264.so.164 $LIB/libnettle.so.8
$LIB/libjpeg.so.62"
BIG="usr/lib/chromium/chromium usr/lib/firefox-esr/libxul.so"
# The precision part's host files (those missing are said and skipped).
HOST_FILES="/usr/lib/x86_64-linux-gnu/libc.so.6 /usr/lib/x86_64-linux-gnu/libstdc++.so.6
/usr/bin/python3.11 /usr/bin/gdb /usr/lib/x86_64-linux-gnu/libLLVM-15.so.1"

quick=${FROMCODE_QUICK:-0} packages=1 precision=1
while [ $# -gt 0 ]; do
	case $1 in
	--quick) quick=1 ;;
	--no-packages) packages=0 ;;
	--no-precision) precision=0 ;;
	-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown argument $1 (see --help)" ;;
	esac
	shift
done
[ "$quick" = 0 ] || [ "$quick" = 1 ] || die "FROMCODE_QUICK must be 0 or 1, not $quick"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/fromcode-acceptance.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
c=${CFI2SFRAME:-}
if [ -z "$c" ]; then
	(cd "$repo" && go build -o "$tmp/cfi2sframe" ./cmd/cfi2sframe) || die "go build ./cmd/cfi2sframe failed"
	c=$tmp/cfi2sframe
fi
[ -x "$c" ] || die "$c is not executable"
mkdir -p "$DIR/results"
out=$DIR/results/$(date -u +%Y%m%dT%H%M%SZ).txt
failures=0
fail() { note "FAIL: $*"; failures=$((failures + 1)); }

is_big() { case " $(echo $BIG) " in *" $1 "*) return 0 ;; esac; return 1; }
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
pct() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.1f", 100 * a / b; else printf "-" }'; }
# jfield NAME FILE: the first (the file's, not the total's) value of the
# integer field NAME in report --json's output; 0 when absent (the report
# without --from-code has no from_code_code_bytes).
jfield() {
	local v
	v=$(sed -n "s/^ *\"$1\": \\([0-9]*\\),\\{0,1\\}\$/\\1/p" "$2" | head -1)
	echo "${v:-0}"
}

# fetch_packages: PACKAGES' .debs into DIR/debs, their sums checked, unpacked
# into DIR/root. Returns 1 (with a message) when apt cannot give them.
fetch_packages() {
	local p deb v want got names
	command -v apt-get >/dev/null && command -v apt-cache >/dev/null && command -v dpkg-deb >/dev/null ||
		{ note "apt-get, apt-cache or dpkg-deb is missing: the packages part is skipped"; return 1; }
	mkdir -p "$DIR/debs"
	# Download only what the cache lacks (the newest candidate's file name).
	local need=()
	for p in $PACKAGES; do
		v=$(apt-cache policy "$p" 2>/dev/null | sed -n 's/^ *Candidate: //p')
		[ -n "$v" ] && [ "$v" != "(none)" ] ||
			{ note "apt knows no candidate for $p (apt-get update? a bookworm source?): the packages part is skipped"; return 1; }
		ls "$DIR/debs/${p}_"*.deb >/dev/null 2>&1 &&
			[ "$(dpkg-deb -f "$(ls "$DIR/debs/${p}_"*.deb | head -1)" Version)" = "$v" ] || need+=("$p")
	done
	if [ ${#need[@]} -gt 0 ]; then
		note "apt-get download ${need[*]}"
		for p in "${need[@]}"; do rm -f "$DIR/debs/${p}_"*.deb; done
		(cd "$DIR/debs" && apt-get -q download "${need[@]}") >"$DIR/download.log" 2>&1 ||
			{ tail -5 "$DIR/download.log" >&2; note "apt-get download failed (log $DIR/download.log): the packages part is skipped"; return 1; }
	fi
	names=
	for p in $PACKAGES; do
		deb=$(ls "$DIR/debs/${p}_"*.deb | head -1)
		v=$(dpkg-deb -f "$deb" Version)
		want=$(apt-cache show "$p=$v" 2>/dev/null | sed -n 's/^SHA256: //p' | head -1)
		got=$(sha256sum <"$deb" | cut -d' ' -f1)
		[ -n "$want" ] || die "$p $v: apt-cache show gives no SHA256"
		[ "$got" = "$want" ] || die "$deb: sha256 $got, apt's Packages index says $want"
		printf '%s %s sha256 %s (as apt-cache show gives)\n' "$p" "$v" "$got" | tee -a "$out"
		names="$names $(basename "$deb")"
	done
	if [ "$(cat "$DIR/root/.complete" 2>/dev/null)" != "$names" ]; then
		rm -rf "$DIR/root"
		mkdir -p "$DIR/root"
		for deb in "$DIR"/debs/*.deb; do dpkg-deb -x "$deb" "$DIR/root" || die "cannot unpack $deb"; done
		echo "$names" >"$DIR/root/.complete"
	fi
}

# measure_file REL: one row of the packages table; a failed report,
# conversion or verify is counted in failures.
measure_file() {
	local rel=$1 f=$DIR/root/$1 t0 t1 code before after from vt
	[ -f "$f" ] || { fail "$rel is not in the unpacked packages"; return; }
	if ! "$c" report --json "$f" >"$tmp/before.json" 2>"$tmp/err"; then
		fail "report $rel: $(head -3 "$tmp/err")"
		return
	fi
	t0=$(now)
	if ! "$c" report --json --from-code "$f" >"$tmp/after.json" 2>"$tmp/err"; then
		fail "report --from-code $rel: $(head -3 "$tmp/err")"
		return
	fi
	t1=$(now)
	code=$(jfield code_bytes "$tmp/after.json")
	before=$(jfield sframe_covered_code_bytes "$tmp/before.json")
	after=$(jfield sframe_covered_code_bytes "$tmp/after.json")
	from=$(jfield from_code_code_bytes "$tmp/after.json")
	[ "$(jfield code_bytes "$tmp/before.json")" = "$code" ] || fail "$rel: the two reports count different code bytes"
	vt=ok
	if ! "$c" -q "$f" -o "$tmp/out" --from-code 2>"$tmp/err"; then
		fail "cfi2sframe --from-code $rel: $(head -3 "$tmp/err")"
		vt=convert-failed
	elif ! "$c" verify "$tmp/out" >"$tmp/verify" 2>&1; then
		fail "verify of $rel --from-code: $(head -5 "$tmp/verify")"
		vt=VERIFY-FAILED
	fi
	rm -f "$tmp/out"
	printf '%-52s %11s %9s%% %9s%% %9s%% %9s %s\n' "$rel" "$code" "$(pct "$before" "$code")" \
		"$(pct "$after" "$code")" "$(pct "$from" "$code")" "$(secs "$t0" "$t1")" "$vt" | tee -a "$out"
}

packages_part() {
	local rel
	fetch_packages || return 0
	printf '\n== --from-code on Debian packages (%s; cfi2sframe %s)\n' "$(date -u +%F)" "$(git -C "$repo" describe --always --dirty 2>/dev/null || echo '?')" | tee -a "$out"
	printf '%-52s %11s %10s %10s %10s %9s %s\n' file "code bytes" "before" "after" "from code" "report s" "verify" | tee -a "$out"
	for rel in $FILES; do
		if [ "$quick" = 1 ] && is_big "$rel"; then
			printf '%-52s skipped (--quick)\n' "$rel" | tee -a "$out"
			continue
		fi
		measure_file "$rel"
	done
}

# check_file FILE: one row of the precision table.
check_file() {
	local f=$1 st=0 judged wrong cov desc pc reasons
	"$cc" "$f" >"$tmp/cc" 2>&1 || st=$?
	judged=$(sed -n 's/.*; judged \([0-9]*\).*/\1/p' "$tmp/cc" | awk '{ s += $1 } END { print s + 0 }')
	wrong=$(sed -n 's/.*wrong at \([0-9]*\) PCs.*/\1/p' "$tmp/cc" | awk '{ s += $1 } END { print s + 0 }')
	cov=$(sed -n 's/^CFI covers \([0-9]*\) instructions; described \([0-9]*\) .*/\1/p' "$tmp/cc" | awk '{ s += $1 } END { print s + 0 }')
	desc=$(sed -n 's/^CFI covers \([0-9]*\) instructions; described \([0-9]*\) .*/\2/p' "$tmp/cc" | awk '{ s += $1 } END { print s + 0 }')
	pc=$(pct "$desc" "$cov")
	# The three largest reasons for the CFI-covered instructions left out.
	reasons=$(sed -n 's/^  left out: \(.*[^ ]\)  *\([0-9][0-9]*\)$/\2 \1/p' "$tmp/cc" |
		awk '{ n = $1; $1 = ""; sub(/^ /, ""); s[$0] += n } END { for (r in s) print s[r], r }' |
		sort -rn | head -3 | awk -v t="$cov" '{ n = $1; $1 = ""; sub(/^ /, ""); printf "%s%s %.1f%%", (NR > 1 ? ", " : ""), $0, 100 * n / t }')
	printf '%-40s %10s %6s %9s%%  %s\n' "${f#"$DIR/root/"}" "$judged" "$wrong" "$pc" "$reasons" | tee -a "$out"
	if [ "$st" != 0 ] || [ "$wrong" != 0 ] || [ "$judged" = 0 ]; then
		cp "$tmp/cc" "$DIR/results/codecheck-$(basename "$f").txt"
		fail "codecheck $f: exit $st, $wrong wrong PCs, $judged judged (output kept in $DIR/results/codecheck-$(basename "$f").txt)"
	fi
}

precision_part() {
	local f rel
	cc=$tmp/codecheck
	(cd "$repo" && go build -o "$cc" ./internal/testing/cmd/codecheck) || die "go build ./internal/testing/cmd/codecheck failed"
	printf '\n== codecheck: rows from code judged against the CFI (%s)\n' "$(date -u +%F)" | tee -a "$out"
	printf '%-40s %10s %6s %10s  %s\n' file judged wrong described "top reasons left out (share of CFI-covered)" | tee -a "$out"
	for f in $HOST_FILES; do
		[ -f "$f" ] || { printf '%-40s not on this machine: skipped\n' "$f" | tee -a "$out"; continue; }
		check_file "$f"
	done
	for rel in usr/lib/firefox-esr/libxul.so usr/lib/chromium/chromium; do
		if [ "$quick" = 1 ]; then
			printf '%-40s skipped (--quick)\n' "$rel" | tee -a "$out"
		elif [ -f "$DIR/root/$rel" ]; then
			check_file "$DIR/root/$rel"
		else
			printf '%-40s not unpacked (no packages): skipped\n' "$rel" | tee -a "$out"
		fi
	done
}

note "cache $DIR; results also in $out"
[ "$packages" = 0 ] || packages_part
[ "$precision" = 0 ] || precision_part
if [ "$failures" -gt 0 ]; then
	note "$failures check(s) failed"
	exit 1
fi
note "all checks passed"
