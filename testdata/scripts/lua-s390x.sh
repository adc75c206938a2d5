#!/usr/bin/env bash
# lua-s390x.sh — a real program for s390x: Lua 5.4 (Debian's lua5.4 source
# package) built twice with Debian's s390x cross gcc and the reference
# toolchain's sid binutils, once with -Wa,--gsframe and once without. The
# plain build is converted with cfi2sframe and then:
#
#  1. compared with GNU's build at every PC of every function GNU's .sframe
#     describes (internal/testing/sfcompare);
#  2. run under qemu-s390x-static beside the plain build on a Lua script
#     (closures, coroutines, errors through pcall, string patterns, table
#     sorting with a Lua comparator, integer and float arithmetic): the same
#     output;
#  3. checked by `cfi2sframe verify` and `verify --for kernel`;
#  4. read by libsframe 2.47.50 and 2.44 at every PC, converted to V3, V2
#     and V2+PCREL (scripts/libsframe-agreement.sh).
#
#   bash testdata/scripts/lua-s390x.sh     (needs network for the source
#                                           package the first time)
#
# The source comes from scripts/debian-source.sh (a private apt
# configuration, deb-src of Debian bookworm, into the toolchain cache);
# nothing is committed and nothing on the system changes. Needs gcc-s390x-linux-gnu, libc6-dev-s390x-cross and
# qemu-user-static (scripts/reference-toolchain.sh --cross).
set -euo pipefail
cd "$(dirname "$0")/../.."
bash scripts/reference-toolchain.sh >/dev/null
root=$(bash scripts/reference-toolchain.sh --print)
cache="${CFI2SFRAME_TOOLCHAIN:-$HOME/.cache/cfi2sframe/toolchain}/src"
for p in s390x-linux-gnu-gcc qemu-s390x-static; do
	command -v $p >/dev/null || { echo "lua-s390x.sh: $p not found (scripts/reference-toolchain.sh --cross)" >&2; exit 2; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/cfi2sframe" ./cmd/cfi2sframe
go build -o "$work/sfcompare" ./internal/testing/sfcompare/cmd/sfcompare
c2s="$work/cfi2sframe"

src=$(bash scripts/debian-source.sh lua5.4)/src
fail=0

# The interpreter, as upstream's "make linux" builds it (liblua's objects
# and lua.c, linked with -lm -ldl), at -O2.
build() { # KIND(gnu|plain) EXTRA...
	local kind=$1 out="$work/$1"
	shift
	mkdir -p "$out"
	local objs=()
	for s in "$src"/*.c; do
		case $(basename "$s") in luac.c) continue ;; esac
		s390x-linux-gnu-gcc -B"$root/sid/gcc-s390x/" -O2 -std=gnu99 -DLUA_COMPAT_5_3 -DLUA_USE_LINUX "$@" \
			-c "$s" -o "$out/$(basename "$s" .c).o"
		objs+=("$out/$(basename "$s" .c).o")
	done
	s390x-linux-gnu-gcc -B"$root/sid/gcc-s390x/" -Wl,-E -o "$out/lua" "${objs[@]}" -lm -ldl
}
build gnu -Wa,--gsframe
build plain
"$c2s" "$work/plain/lua" -o "$work/lua-ours"
echo "lua 5.4 ($(ls "$cache"/dl-lua5.4/lua5.4_*.dsc | sed 's/.*lua5.4_//; s/\.dsc//')) for s390x: $(s390x-linux-gnu-readelf -wF "$work/plain/lua" | grep -c ' FDE ') FDEs in the plain build"

# 1. Per PC against GNU's build.
"$work/sfcompare" "$work/gnu/lua" "$work/lua-ours" | tail -1 || fail=1

# 2. The same output under qemu.
cat >"$work/t.lua" <<'EOF'
local function fib(n) if n < 2 then return n end return fib(n - 1) + fib(n - 2) end
local t = {}
for i = 1, 200 do t[i] = (i * 7919) % 1009 end
table.sort(t, function(a, b) return a > b end)
local co = coroutine.wrap(function(a) for i = 1, 3 do a = coroutine.yield(a * 2) end return "done" end)
local ok, err = pcall(function() error({code = 42}) end)
print(fib(24), t[1], t[200], co(1), co(5), co(7), co(9), ok, err.code)
print(string.format("%5.2f %d %s", math.pi, 1 << 40, ("hello world"):gsub("o", "0")))
print(select("#", string.find("the quick brown fox", "(%a+) (%a+)")), utf8.char(228, 8364))
EOF
run() { qemu-s390x-static -L /usr/s390x-linux-gnu "$@"; }
a=$(run "$work/plain/lua" "$work/t.lua" 2>&1) || { echo "plain lua failed: $a"; fail=1; }
b=$(run "$work/lua-ours" "$work/t.lua" 2>&1) || { echo "converted lua failed: $b"; fail=1; }
if [ "$a" = "$b" ] && [ -n "$a" ]; then
	echo "runs under qemu-s390x with the same output ($(wc -l <<<"$b") lines): $(head -1 <<<"$b")"
else
	printf 'output differs:\n%s\n---\n%s\n' "$a" "$b"
	fail=1
fi

# 3. verify and the kernel's rules.
"$c2s" verify "$work/lua-ours" || fail=1
"$c2s" verify --for kernel "$work/lua-ours" || fail=1

# 4. libsframe at every PC.
bash scripts/libsframe-agreement.sh "$work/plain/lua" | grep -E 'total|FAIL|ok' || fail=1
exit $fail
