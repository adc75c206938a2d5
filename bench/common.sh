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
