#!/usr/bin/env bash
# Runs converted programs through what distributions do to files after a
# build (issue 10): strip, objcopy (bookworm 2.40, trixie 2.44, sid 2.47),
# the dh_strip sequence, eu-strip, patchelf. For every STEP-th ELF program
# in DIR (default /usr/bin, every program), it converts the program and
# applies each tool to the converted file and to the original. A result is
# intact when the tool succeeds, `PROG --version` prints the same as the
# original's, and `cfi2sframe verify` passes; a tool that already breaks
# the original is n/a. Prints "tool: intact N/M" per tool, and the size
# each conversion added beyond the .sframe bytes.
#
#   bash scripts/retrofit-sweep.sh [DIR] [STEP]
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-/usr/bin}
step=${2:-1}
bash scripts/reference-toolchain.sh >/dev/null
TC=$(bash scripts/reference-toolchain.sh --print)
for t in eu-strip patchelf strip objcopy; do
	command -v "$t" >/dev/null || { echo "retrofit-sweep: $t not installed" >&2; exit 1; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
c2s=$work/cfi2sframe
go build -o "$c2s" ./cmd/cfi2sframe
results=$work/results
: >"$results"
W=$work/w

version() { timeout 10 "$1" --version 2>&1 </dev/null | head -3 || true; }

# apply SRC CMD...: copy SRC to $W, run CMD, compare $W --version with $ref.
apply() {
	local src=$1; shift
	rm -f "$W" "$W.debug"; cp "$src" "$W"
	"$@" >"$work/tool.log" 2>&1 || return 1
	[ "$(version "$W")" = "$ref" ]
}
tool() {
	local name=$1; shift
	if ! apply "$orig" "$@"; then echo "$name n/a" >>"$results"; return; fi
	if apply "$conv" "$@" && "$c2s" verify -q "$W" >/dev/null 2>&1; then
		echo "$name ok" >>"$results"
	else
		echo "$name FAIL" >>"$results"
		echo "FAIL $name: $orig: $(head -c 200 "$work/tool.log")" >&2
	fi
}
rpath() { patchelf --set-rpath "$(patchelf --print-rpath "$W")${1:+:}/opt/cfi2sframe-sweep/lib" "$W"; }
interp() { patchelf --set-interpreter "$(patchelf --print-interpreter "$W" | sed 's#^/#//#')" "$W"; }
dh_strip() {
	objcopy --only-keep-debug "$W" "$W.debug" &&
		strip --remove-section=.comment --remove-section=.note --strip-unneeded "$W" &&
		objcopy --add-gnu-debuglink="$W.debug" "$W"
}

i=0 files=0 added=0
for orig in "$dir"/*; do
	[ -f "$orig" ] && [ ! -L "$orig" ] && [ -x "$orig" ] || continue
	head -c4 "$orig" | grep -q ELF || continue
	i=$((i + 1))
	[ $((i % step)) = 0 ] || continue
	conv=$work/conv
	if ! "$c2s" -q "$orig" -o "$conv" 2>"$work/conv.err"; then
		echo "convert $(sed 's/.*: //' "$work/conv.err" | head -c 60)" >>"$results"
		continue
	fi
	ref=$(version "$orig")
	files=$((files + 1))
	sf=$(readelf -lW "$conv" | awk '$1=="GNU_SFRAME"{print $5}')
	sf=$((${sf:-0}))
	added=$((added + $(stat -c %s "$conv") - $(stat -c %s "$orig") - ${sf:-0}))
	tool "strip" strip "$W"
	tool "strip --strip-debug" strip --strip-debug "$W"
	tool "strip --strip-unneeded" strip --strip-unneeded "$W"
	tool "dh_strip sequence" dh_strip
	tool "objcopy --strip-all 2.40" "$TC/bookworm/bin/x86_64-objcopy" --strip-all "$W"
	tool "objcopy --strip-all 2.44" "$TC/trixie/bin/x86_64-objcopy" --strip-all "$W"
	tool "objcopy --strip-all 2.47" "$TC/sid/bin/x86_64-objcopy" --strip-all "$W"
	tool "eu-strip" eu-strip "$W"
	tool "eu-strip -f" eu-strip -f "$W.debug" "$W"
	tool "patchelf --set-rpath" rpath
	tool "patchelf --set-interpreter" interp
done
echo "$files programs converted from $dir (every ${step}th ELF file); added beyond .sframe: $((added / (files > 0 ? files : 1))) bytes per file on average"
grep '^convert ' "$results" | sort | uniq -c | sed 's/^/  not converted: /' || true
grep -v '^convert ' "$results" | awk '{st=$NF; $NF=""; sub(/ $/, "", $0); t[$0]++; if (st=="ok") ok[$0]++; if (st=="n/a") na[$0]++}
	END {for (k in t) printf "%-28s intact %d/%d (%d n/a: the tool breaks the original too)\n", k":", ok[k], t[k]-na[k], na[k]}' | sort
! grep -q ' FAIL$' "$results"
