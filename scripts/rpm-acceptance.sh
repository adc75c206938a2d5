#!/usr/bin/env bash
# Acceptance for RPM packages that rpm did not build here (issue 48):
# Debian's coreutils and libc6, made RPMs by `alien --to-rpm`.
#
#  1. apt-get download coreutils libc6 (the versions apt has), then
#     alien --to-rpm --keep-version each (gzip -9 payloads, SHA-256 file
#     digests).
#  2. cfi2sframe IN.rpm -o OUT.rpm; the sizes and the files converted.
#  3. rpm -Kv OUT.rpm: every digest OK.
#  4. rpm -qp --dump: the same files; only size and digest change, and
#     only for as many files as cfi2sframe says it updated.
#  5. Each pair (originals, converted) installed into a scratch root of
#     its own (rpm --root R -i --nodeps --noscripts: the files are really
#     written, R/var/lib/rpm records them), then rpm --root R -V --nodeps
#     reports nothing. -V is shown to check the files: a byte appended to
#     one converted program is reported (S.5......).
#  6. Programs of the converted coreutils, on the converted libc6
#     (chroot R), print what the originals print.
#  7. cfi2sframe verify on every converted file.
#
#   sudo scripts/rpm-acceptance.sh      (root: chroot, file owners)
#
# Needs rpm, alien (apt-get install -y alien), network for apt-get
# download. Everything happens in a temporary directory; nothing on the
# system changes.
set -euo pipefail
cd "$(dirname "$0")/.."
for tool in rpm alien apt-get chroot; do
	command -v $tool >/dev/null || { echo "$tool not found (apt-get install -y rpm alien)" >&2; exit 2; }
done
[ "$(id -u)" = 0 ] || { echo "run as root (chroot, rpm --root with file owners)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/cfi2sframe" ./cmd/cfi2sframe
c2s="$work/cfi2sframe"
fail=0
bad() { echo "FAIL: $*"; fail=1; }

mkdir -p "$work/deb" "$work/in" "$work/out"
(cd "$work/deb" && apt-get download coreutils libc6 2>/dev/null)
for d in "$work"/deb/*.deb; do
	(cd "$work/in" && alien --to-rpm --keep-version "$d" 2>&1 | grep -v '^Warning:')
done

echo "== conversion"
printf '%-40s %12s %12s %7s %s\n' package in out growth summary
for in in "$work"/in/*.rpm; do
	p=$(basename "$in") out="$work/out/$p"
	msg=$("$c2s" "$in" -o "$out" 2>&1) || { bad "$p: $msg"; continue; }
	echo "$msg" >"$work/$p.msg"
	a=$(stat -c %s "$in") b=$(stat -c %s "$out")
	printf '%-40s %12d %12d %6.1f%% %s\n' "$p" "$a" "$b" "$(echo "100*($b-$a)/$a" | bc -l)" "${msg#*: }"
done

echo "== rpm -Kv"
for out in "$work"/out/*.rpm; do
	k=$(rpm -Kv "$out" 2>&1) || bad "rpm -K $out"
	echo "$k" | sed "s|$work/||"
	echo "$k" | grep -q -e BAD -e NOTFOUND && bad "rpm -K: $out"
done

echo "== rpm -qp --dump"
for in in "$work"/in/*.rpm; do
	p=$(basename "$in") out="$work/out/$p"
	rpm -qp --dump "$in" >"$work/a" 2>/dev/null
	rpm -qp --dump "$out" >"$work/b" 2>/dev/null
	# Fields: path size mtime digest mode owner group config doc rdev link.
	same=$(paste -d'\n' "$work/a" "$work/b" | awk 'NR%2==1 {a=$0; next} {
		split(a, x, " "); n=split($0, y, " ")
		if (x[1] != y[1]) { print "BAD order " x[1] " " y[1]; next }
		x[2]=y[2]; x[4]=y[4]; for (i=1; i<=n; i++) if (x[i] != y[i]) print "BAD field " i " of " y[1]
		if (a != $0) changed++ } END { print changed+0 }')
	want=$(sed -n 's/.*; \([0-9]*\) file digests updated.*/\1/p' "$work/$p.msg")
	echo "$p: $(wc -l <"$work/a") files, $(wc -l <"$work/b") in the converted package; $(echo "$same" | tail -1) lines differ in size and digest only (cfi2sframe: $want file digests updated)"
	echo "$same" | grep BAD && bad "$p: --dump"
	[ "$(wc -l <"$work/a")" = "$(wc -l <"$work/b")" ] && [ "$(echo "$same" | tail -1)" = "$want" ] || bad "$p: --dump counts"
done

echo "== install, rpm -V"
for set in in out; do
	r="$work/root-$set"
	mkdir -p "$r"
	rpm --root "$r" -i --nodeps --noscripts "$work/$set"/*.rpm 2>&1 | grep -v -e 'use Alien' -e 'know what you are doing' || true
	v=$(rpm --root "$r" -V --nodeps coreutils libc6 2>&1) && echo "$set: rpm -V: nothing reported" || bad "$set: rpm -V: $v"
done
r="$work/root-out"
cp -p "$r/bin/cat" "$work/cat"
printf x >>"$r/bin/cat"
v=$(rpm --root "$r" -V --nodeps coreutils 2>&1) || true
echo "control, a byte appended to /bin/cat: rpm -V says: $v"
echo "$v" | grep -q 'S\.5.* /bin/cat$' || bad "rpm -V does not see a changed file"
cp -p "$work/cat" "$r/bin/cat"
v=$(rpm --root "$r" -V --nodeps coreutils libc6 2>&1) || bad "rpm -V after the control: $v"

echo "== programs (chroot)"
for cmd in "/bin/cat --version" "/usr/bin/sha256sum /usr/share/doc/libc6/copyright" "/bin/date -u -d @0" "/usr/bin/seq 3" "/bin/echo hello"; do
	# shellcheck disable=SC2086
	a=$(chroot "$work/root-in" $cmd 2>&1 | head -3 || true) b=$(chroot "$work/root-out" $cmd 2>&1 | head -3 || true)
	[ "$a" = "$b" ] && echo "same: $cmd: $(echo "$b" | head -1)" || bad "$cmd: $a / $b"
done

echo "== verify"
changed=()
while IFS= read -r f; do
	[ -f "$work/root-out/$f" ] && [ ! -L "$work/root-out/$f" ] || continue
	cmp -s "$work/root-in/$f" "$work/root-out/$f" || changed+=("$work/root-out/$f")
done < <(rpm --root "$work/root-out" -ql coreutils libc6)
echo "${#changed[@]} installed files of the packages differ from the originals"
"$c2s" verify "${changed[@]}" >"$work/verify.log" 2>&1 || bad "verify: $(grep -v ': 0 disagreements' "$work/verify.log" | head)"
echo "verify: $(grep -c ' 0 disagreements, 0 ranges without CFI.* 0 CFI functions missing' "$work/verify.log") files with 0 disagreements"

[ $fail = 0 ] && echo PASS || echo FAIL
exit $fail
