#!/usr/bin/env bash
# Copy directories (default /usr/bin) into a scratch directory, convert the
# copy in place with one tree-mode command (cfi2sframe --in-place --json,
# all CPUs), timed, and check the result:
#   - the summary by outcome and the refusals by reason;
#   - every converted ELF file verifies against its CFI and keeps the Linux
#     kernel SFrame unwinder's acceptance rules (verify --for kernel);
#   - every converted executable (in a directory named bin or sbin) is run
#     with --version (or --help when --version fails) beside the original,
#     with stdin from /dev/null and a timeout, from the same basename in
#     two directories; exit status and output must match;
#   - every file the command had nothing to do for is byte-identical.
#
#   scripts/usr-bin-sweep.sh [DIR...]        (CFI2SFRAME=path to use a built binary)
#
# Example: scripts/usr-bin-sweep.sh /usr/bin /usr/lib/x86_64-linux-gnu
set -uo pipefail
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || set -- /usr/bin
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
c2s=${CFI2SFRAME:-$tmp/cfi2sframe}
[ -x "$c2s" ] || go build -o "$c2s" ./cmd/cfi2sframe || exit 1
mkdir -p "$tmp/tree" "$tmp/orig"
declare -A src
for d in "$@"; do
	b=$(basename "$d")
	cp -a "$d" "$tmp/tree/$b" || exit 1
	src[$b]=$d
done

start=$(date +%s.%N)
"$c2s" --in-place --json "$tmp/tree"/* >"$tmp/records.jsonl" 2>"$tmp/summary"
rc=$?
end=$(date +%s.%N)
crashed=0
grep -q "panic\|goroutine" "$tmp/summary" && crashed=1
echo "cfi2sframe --in-place on $* (copied): exit $rc, $(awk -v a="$start" -v b="$end" 'BEGIN{printf "%.1f", b-a}') s wall, $(nproc) CPUs"
tail -1 "$tmp/summary"

field() { sed -n "s/.*\"$1\":\"\\(\\([^\"\\\\]\\|\\\\.\\)*\\)\".*/\\1/p" <<<"$2"; }
converted=0 vbad=0 kbad=0 same=0 differ=0 nondet=0 changed=0
declare -A reasons
while IFS= read -r rec; do
	f=$(field file "$rec")
	oc=$(field outcome "$rec")
	rel=${f#"$tmp/tree/"}
	top=${rel%%/*}
	orig="${src[$top]}/${rel#*/}"
	if [ "$oc" != converted ]; then
		if [ "$oc" != failed ] && ! cmp -s "$f" "$orig"; then
			changed=$((changed + 1))
			echo "CHANGED $orig ($oc)"
		fi
		if [ "$oc" = failed ] || [ "$oc" = unsupported ]; then
			r=$(field error "$rec" | sed -e "s|^$f: ||" -e 's/[0-9a-fx]*[0-9][0-9a-fx]*/N/g')
			reasons["$oc: $r"]=$((${reasons["$oc: $r"]:-0} + 1))
		fi
		continue
	fi
	converted=$((converted + 1))
	head -c 4 "$f" | grep -q $'\x7fELF' || continue # archives: verify reads linked files
	if [ "$(od -An -tx1 -j16 -N1 "$f" | tr -d ' ')" != 01 ] && ! v=$("$c2s" verify -q "$f" 2>&1); then
		vbad=$((vbad + 1))
		echo "VERIFY $orig: $(head -3 <<<"$v")"
	fi
	if [ "$(od -An -tx1 -j16 -N1 "$f" | tr -d ' ')" != 01 ] && ! v=$("$c2s" verify --for kernel "$f" 2>&1); then
		kbad=$((kbad + 1))
		echo "KERNEL $orig: $(head -3 <<<"$v")"
	fi
	case "/$rel" in */bin/* | */sbin/*) ;; *) continue ;; esac
	[ -x "$orig" ] || continue
	b=$(basename "$f")
	mkdir -p "$tmp/orig" "$tmp/conv"
	cp "$orig" "$tmp/orig/$b" && cp "$f" "$tmp/conv/$b"
	out1=$(cd "$tmp" && timeout 5 "./orig/$b" --version </dev/null 2>&1); r1=$?
	arg=--version
	if [ $r1 -ne 0 ]; then
		arg=--help
		out1=$(cd "$tmp" && timeout 5 "./orig/$b" --help </dev/null 2>&1); r1=$?
	fi
	out2=$(cd "$tmp" && timeout 5 "./conv/$b" $arg </dev/null 2>&1); r2=$?
	# Programs that print their own directory (clang's InstalledDir) or path.
	out1=${out1//"$tmp/./orig"/DIR}
	out2=${out2//"$tmp/./conv"/DIR}
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
		echo "DIFFER $orig $arg: exit $r1 vs $r2"
	fi
	rm -f "$tmp/orig/$b" "$tmp/conv/$b"
done <"$tmp/records.jsonl"
echo "verify on the converted linked files: $vbad disagree; verify --for kernel: $kbad break the kernel's rules"
echo "converted programs run with --version/--help: same $same (of which $nondet only after sorting lines and masking numbers), different $differ"
echo "files with nothing to do that changed: $changed"
for r in "${!reasons[@]}"; do printf '  %5d  %s\n' "${reasons[$r]}" "$r"; done | sort -rn
[ $crashed -eq 0 ] && [ $differ -eq 0 ] && [ $vbad -eq 0 ] && [ $kbad -eq 0 ] && [ $changed -eq 0 ]
