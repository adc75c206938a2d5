#!/usr/bin/env bash
# Acceptance for relocatable objects on a real C project from Debian's
# source packages (zlib):
#
#  1. For x86-64, AArch64 and s390x: compile every zlib source and the example
#     program twice with the reference toolchain (-Wa,--gsframe and
#     without), convert each plain object with cfi2sframe, link both sets
#     with GNU ld, and compare the final .sframe at every PC
#     (internal/testing/sfcompare); run both programs (AArch64 and s390x under
#     qemu).
#  2. clang (Debian's clang-14, integrated assembler, no SFrame support):
#     compile the same objects, convert, link with GNU ld; `cfi2sframe
#     verify` on the result and the program runs.
#
#   scripts/rel-acceptance.sh        (needs network for the source package)
#
# The source comes from scripts/debian-source.sh (a private apt
# configuration, deb-src of Debian bookworm, into the toolchain cache);
# nothing on the system changes.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
root=$(bash scripts/reference-toolchain.sh --print)
bash scripts/reference-toolchain.sh >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/cfi2sframe" ./cmd/cfi2sframe
go build -o "$work/sfcompare" ./internal/testing/sfcompare/cmd/sfcompare
c2s="$work/cfi2sframe"

src=$(bash scripts/debian-source.sh zlib)
lib_srcs=(adler32 crc32 deflate infback inffast inflate inftrees trees zutil compress uncompr gzclose gzlib gzread gzwrite)
fail=0

build() { # ARCH CC KIND(gnu|plain|clang) -> objects in $work/ARCH-KIND
	local arch=$1 cc=$2 kind=$3 out="$work/$1-$3" extra=()
	mkdir -p "$out"
	case $kind in
	gnu) extra=(-B"$root/sid/gcc-$arch/" -Wa,--gsframe) ;;
	plain) extra=(-B"$root/sid/gcc-$arch/") ;;
	esac
	for s in "${lib_srcs[@]}"; do
		"$cc" -O2 -fPIC -D_LARGEFILE64_SOURCE=1 -DHAVE_HIDDEN "${extra[@]}" -I"$src" -c "$src/$s.c" -o "$out/$s.o"
	done
	"$cc" -O2 "${extra[@]}" -I"$src" -c "$src/test/example.c" -o "$out/example.o"
}

for arch in x86_64 aarch64 s390x; do
	cc=gcc run=()
	if [ $arch != x86_64 ]; then
		cc=$arch-linux-gnu-gcc
		run=(qemu-$arch-static -L /usr/$arch-linux-gnu)
	fi
	build $arch $cc gnu
	build $arch $cc plain
	mkdir -p "$work/$arch-ours"
	n=0
	for o in "$work/$arch-plain"/*.o; do
		"$c2s" -q "$o" -o "$work/$arch-ours/$(basename "$o")"
		n=$((n + 1))
	done
	# Each converted object next to what as --gsframe made.
	same=0
	for o in "$work/$arch-gnu"/*.o; do
		b=$(basename "$o")
		if cmp -s <("$root/sid/bin/$arch-objdump" --sframe "$o" | tail -n +3) <("$root/sid/bin/$arch-objdump" --sframe "$work/$arch-ours/$b" | tail -n +3); then
			same=$((same + 1))
		else
			echo "$arch $b: objdump --sframe differs from as --gsframe"
			fail=1
		fi
	done
	echo "$arch: $n zlib objects converted; objdump --sframe identical to as --gsframe for $same"
	for kind in gnu ours; do
		"$cc" -B"$root/sid/gcc-$arch/" -o "$work/example-$arch-$kind" "$work/$arch-$kind"/*.o
	done
	"$work/sfcompare" "$work/example-$arch-gnu" "$work/example-$arch-ours" | tail -1 || fail=1
	a=$(cd "$work" && "${run[@]}" "./example-$arch-gnu" 2>&1)
	b=$(cd "$work" && "${run[@]}" "./example-$arch-ours" 2>&1)
	if [ "$a" = "$b" ] && grep -q "inflate" <<<"$b"; then
		echo "$arch: example program runs, same output ($(wc -l <<<"$b") lines)"
	else
		echo "$arch: example program output differs"
		fail=1
	fi
done

if command -v clang >/dev/null; then
	build x86_64 clang clang
	mkdir -p "$work/clang-ours"
	for o in "$work/x86_64-clang"/*.o; do "$c2s" -q "$o" -o "$work/clang-ours/$(basename "$o")"; done
	gcc -B"$root/sid/gcc-x86_64/" -o "$work/example-clang" "$work/clang-ours"/*.o
	# GNU ld writes the PLT's SFrame itself; its .plt.got entries say
	# CFA=sp+16 where the CFI (and the instructions) say rsp+8 (DESIGN.md).
	v=$("$c2s" verify -q "$work/example-clang" 2>&1 || true)
	if grep "sframe says" <<<"$v" | grep -qv "(.plt.got)"; then
		echo "clang: verify found disagreements:"; echo "$v"; fail=1
	else
		echo "clang: verify agrees everywhere but in ld's own .plt.got description ($(grep -c "sframe says" <<<"$v" || true) finding)"
	fi
	out=$(cd "$work" && ./example-clang 2>&1) && grep -q inflate <<<"$out" && echo "clang: example program runs" || { echo "clang: example failed"; fail=1; }
else
	echo "clang not installed (apt-get install clang): clang part skipped"
fi
exit $fail
