#!/usr/bin/env bash
# Convert every ELF file in a directory (default /usr/bin) into a scratch
# directory and classify: converted, refused (with the reason), crashed.
# Every converted program is then run with --version (or --help when
# --version fails) beside the original, with stdin from /dev/null and a
# timeout, from the same basename in two directories; exit status and
# output must match.
#
#   scripts/usr-bin-sweep.sh [DIR] [CFI2SFRAME]
set -uo pipefail
cd "$(dirname "$0")/.."
dir=${1:-/usr/bin}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
c2s=${2:-$tmp/cfi2sframe}
[ -x "$c2s" ] || go build -o "$c2s" ./cmd/cfi2sframe || exit 1
mkdir -p "$tmp/orig" "$tmp/conv"
converted=0 refused=0 crashed=0 same=0 differ=0 notrun=0 nondet=0 vbad=0
declare -A reasons
for f in "$dir"/*; do
	[ -f "$f" ] && [ ! -L "$f" ] || continue
	head -c 4 "$f" 2>/dev/null | grep -q $'\x7fELF' || continue
	b=$(basename "$f")
	err=$("$c2s" -q "$f" -o "$tmp/conv/$b" 2>&1)
	rc=$?
	if [ $rc -eq 0 ]; then
		converted=$((converted + 1))
		if ! v=$("$c2s" verify -q "$tmp/conv/$b" 2>&1); then
			vbad=$((vbad + 1))
			echo "VERIFY $f: $(head -3 <<<"$v")"
		fi
	elif [ $rc -eq 1 ] && [ -n "$err" ] && ! grep -q "panic\|goroutine" <<<"$err"; then
		refused=$((refused + 1))
		r=$(sed -e "s|^cfi2sframe: $f: ||" -e 's/[0-9a-fx]*[0-9][0-9a-fx]*/N/g' <<<"$err" | head -1)
		reasons[$r]=$((${reasons[$r]:-0} + 1))
		continue
	else
		crashed=$((crashed + 1))
		echo "CRASH $f (exit $rc): $err"
		continue
	fi
	[ -x "$f" ] || { notrun=$((notrun + 1)); continue; }
	cp "$f" "$tmp/orig/$b"
	out1=$(cd "$tmp" && timeout 5 "./orig/$b" --version </dev/null 2>&1); r1=$?
	arg=--version
	if [ $r1 -ne 0 ]; then
		arg=--help
		out1=$(cd "$tmp" && timeout 5 "./orig/$b" --help </dev/null 2>&1); r1=$?
	fi
	out2=$(cd "$tmp" && timeout 5 "./conv/$b" $arg </dev/null 2>&1); r2=$?
	out1=${out1//orig\/$b/PROG}
	out2=${out2//conv\/$b/PROG}
	if [ "$out1" != "$out2" ]; then
		# Output that varies from run to run (PIDs, times, child processes
		# interleaving their output): compare sorted lines, numbers masked.
		out1=$(sed 's/[0-9][0-9]*/N/g' <<<"$out1" | sort)
		out2=$(sed 's/[0-9][0-9]*/N/g' <<<"$out2" | sort)
		[ "$out1" = "$out2" ] && nondet=$((nondet + 1))
	fi
	if [ $r1 -eq $r2 ] && [ "$out1" = "$out2" ]; then
		same=$((same + 1))
	else
		differ=$((differ + 1))
		echo "DIFFER $f $arg: exit $r1 vs $r2"
	fi
	rm -f "$tmp/orig/$b" "$tmp/conv/$b"
done
echo "ELF files: $((converted + refused + crashed)); converted $converted, refused $refused, crashed $crashed"
echo "verify on the converted files: $((converted - vbad)) agree with their CFI, $vbad disagree"
echo "converted programs run with --version/--help: same $same (of which $nondet only after sorting lines and masking numbers), different $differ, not executable $notrun"
for r in "${!reasons[@]}"; do printf '  refused %5d  %s\n' "${reasons[$r]}" "$r"; done | sort -rn -k2
[ $crashed -eq 0 ] && [ $differ -eq 0 ] && [ $vbad -eq 0 ]
