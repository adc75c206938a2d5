# Sourced by bench/convert.sh and bench/tree.sh, from the checkout's root:
# $readelf (the reference toolchain's sid readelf, else the system's), a
# scratch directory $tmp removed on exit, and $c2s, cfi2sframe built from
# this checkout into it (static, as README's install command makes it).
tc=$(bash scripts/reference-toolchain.sh --print)
readelf=$tc/sid/bin/x86_64-readelf
[ -x "$readelf" ] || readelf=$(command -v readelf)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
c2s=$tmp/cfi2sframe
CGO_ENABLED=0 go build -o "$c2s" ./cmd/cfi2sframe # as README installs it

# stats NAME: "median min max" of the seconds in $tmp/NAME.all, one run
# a line.
stats() {
	sort -n "$tmp/$1.all" | awk '{t[NR] = $1} END {print t[int((NR + 1) / 2)], t[1], t[NR]}'
}

# time1 NAME CMD...: one run of CMD, its wall seconds (bash's clock)
# appended to $tmp/NAME.all; its output is dropped.
time1() {
	local name=$1 t0 t1
	shift
	t0=$EPOCHREALTIME
	"$@" >/dev/null 2>&1
	t1=$EPOCHREALTIME
	echo "$t1 - $t0" | bc >>"$tmp/$name.all"
}
