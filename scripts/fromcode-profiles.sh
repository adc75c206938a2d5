#!/usr/bin/env bash
# Profiles of real programs before and after --from-code: how many of
# `cfi2sframe trace`'s samples walk to the outermost frame when the
# libraries a process loads are converted plainly (code without CFI stays
# without SFrame) and when they are converted with --from-code (that code
# described from its instructions). The goal of issue 46 is 99%.
#
#   scripts/fromcode-profiles.sh [-F HZ]        (CFI2SFRAME=path to use a built binary)
#
# Workloads (x86-64 Linux, ptrace allowed):
#   av1    ffmpeg decoding an AV1 sample (libdav1d), -f null
#   hevc   ffmpeg decoding an HEVC sample (libavcodec's decoder), -f null
#   numpy  python3.11: a @ b of 1500x1500 doubles, 4 times, on OpenBLAS
# The samples are made by ffmpeg itself (testsrc2, 1280x720, 30 fps, 5 s;
# AV1 with libaom-av1, libsvtav1 or librav1e, HEVC with libx265) and kept
# in the cache (~/.cache/cfi2sframe/fromcode-profiles, or
# $CFI2SFRAME_PROFILES), with every run's files under runs/LAST.
#
# Every ELF file the process maps (ldd of ffmpeg; /proc/self/maps of a
# short python run) is converted twice, into before/ (cfi2sframe --force;
# a library without CFI is copied as it is) and after/ (with --from-code
# --diagnostics text, then `verify`, whose rules made from code must all
# follow the instructions). The programs run from those directories with
# LD_LIBRARY_PATH pointing at them; numpy's package tree is copied beside
# them (extension modules are loaded by path) and found through
# PYTHONPATH. The dynamic loader and python's lib-dynload modules are not
# redirected: trace converts them from their CFI in memory, the same way
# for both runs.
#
# Prints, per workload: samples, the share walked to the outermost frame
# before and after, and where the incomplete walks stopped (by object,
# from the summary's "walks stopped early" places, which trace caps at 20)
# with the --from-code summary of those objects (functions left out, by
# reason). Exits 0 when every workload reaches the goal, 1 when one does
# not or a step fails (build, sample, conversion, verify, trace).
# Without ffmpeg, numpy or OpenBLAS it installs them when run as root
# (apt-get install -y ffmpeg python3-numpy libopenblas0-pthread), and
# otherwise prints "skip: ..." and exits 0.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
prog=fromcode-profiles.sh
die() { printf '%s: %s\n' "$prog" "$*" >&2; exit 1; }
note() { printf '%s: %s\n' "$prog" "$*" >&2; }

hz=499
while [ $# -gt 0 ]; do
	case $1 in
	-F) [ $# -ge 2 ] || die "-F needs a rate"; hz=$2; shift 2 ;;
	*) die "unknown argument $1 (usage: $prog [-F HZ])" ;;
	esac
done
goal=99
[ "$(uname -m)" = x86_64 ] && [ "$(uname -s)" = Linux ] || { echo "skip: trace samples x86-64 Linux processes"; exit 0; }

# Packages: installed only as root, and only when missing.
pkgs=(ffmpeg python3-numpy libopenblas0-pthread)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	if [ "$(id -u)" != 0 ]; then
		echo "skip: needs the packages ${missing[*]} (apt-get install -y ${pkgs[*]}, as root)"
		exit 0
	fi
	note "installing ${missing[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null ||
		{ apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null; } ||
		die "apt-get install ${missing[*]} failed"
fi
py=/usr/bin/python3.11
[ -x "$py" ] || py=$(readlink -f /usr/bin/python3)
"$py" -c 'import numpy' 2>/dev/null || die "$py cannot import numpy (python3-numpy is for Debian's python3)"

cache=${CFI2SFRAME_PROFILES:-$HOME/.cache/cfi2sframe/fromcode-profiles}
run=$cache/runs/$(date +%Y%m%d-%H%M%S)
mkdir -p "$run"
ln -sfn "$run" "$cache/runs/LAST"
c2s=${CFI2SFRAME:-$run/cfi2sframe}
if [ -z "${CFI2SFRAME:-}" ]; then
	note "building cfi2sframe"
	go build -o "$c2s" ./cmd/cfi2sframe || die "go build failed"
fi
if out=$("$c2s" trace -- sleep 0.1 2>&1); then :; else
	grep -q "cannot trace process" <<<"$out" && { echo "skip: ptrace is not allowed here: $out"; exit 0; }
	die "trace of sleep failed: $out"
fi

# The samples, made once by ffmpeg itself.
gen=(-hide_banner -loglevel error -y -f lavfi -i testsrc2=size=1280x720:rate=30 -t 5 -pix_fmt yuv420p)
encoders=$(ffmpeg -hide_banner -encoders 2>/dev/null)
if [ ! -s "$cache/sample-av1.mkv" ]; then
	if grep -q ' libaom-av1 ' <<<"$encoders"; then av1=(-c:v libaom-av1 -cpu-used 8 -row-mt 1)
	elif grep -q ' libsvtav1 ' <<<"$encoders"; then av1=(-c:v libsvtav1 -preset 12)
	elif grep -q ' librav1e ' <<<"$encoders"; then av1=(-c:v librav1e -speed 10)
	else die "this ffmpeg has no AV1 encoder (libaom-av1, libsvtav1, librav1e)"; fi
	note "making the AV1 sample (${av1[1]}, about 30 s)"
	ffmpeg "${gen[@]}" "${av1[@]}" "$cache/sample-av1.tmp.mkv" && mv "$cache/sample-av1.tmp.mkv" "$cache/sample-av1.mkv" ||
		die "ffmpeg could not make the AV1 sample"
fi
if [ ! -s "$cache/sample-hevc.mkv" ]; then
	grep -q ' libx265 ' <<<"$encoders" || die "this ffmpeg has no libx265 encoder"
	note "making the HEVC sample (libx265)"
	ffmpeg "${gen[@]}" -c:v libx265 -preset ultrafast -x265-params log-level=error "$cache/sample-hevc.tmp.mkv" &&
		mv "$cache/sample-hevc.tmp.mkv" "$cache/sample-hevc.mkv" || die "ffmpeg could not make the HEVC sample"
fi

# The numpy workload; with an argument, it lists the ELF files it mapped.
cat >"$run/matmul.py" <<'EOF'
import sys
import numpy as np
rng = np.random.default_rng(46)
n = 1500 if len(sys.argv) < 2 else 64
a, b = rng.random((n, n)), rng.random((n, n))
for _ in range(4):
    c = a @ b
assert c.shape == (n, n)
if len(sys.argv) > 1:
    with open("/proc/self/maps") as m, open(sys.argv[1], "w") as out:
        seen = set()
        for line in m:
            f = line.split(maxsplit=5)[5].strip() if len(line.split()) > 5 else ""
            if f.startswith("/") and f not in seen:
                seen.add(f)
                out.write(f + "\n")
EOF

# convert_one SRC SET REL: SRC into SET/before/REL and SET/after/REL. One
# line per file goes to SET/log/REL.status: before and after outcomes.
convert_one() {
	local src=$1 set=$2 rel=$3 key b a msg
	key=${rel//\//_}
	b=$set/before/$rel a=$set/after/$rel
	mkdir -p "$(dirname "$b")" "$(dirname "$a")"
	if msg=$("$c2s" -q --force "$src" -o "$b" 2>&1); then
		echo "before converted" >"$set/log/$key.status"
	else
		cp "$src" "$b"
		echo "before copied: $(head -1 <<<"$msg")" >"$set/log/$key.status"
	fi
	if "$c2s" --force --from-code --diagnostics text "$src" -o "$a" >"$set/log/$key.diag" 2>&1; then
		if grep -q ': from-code: ' "$set/log/$key.diag"; then
			if "$c2s" verify "$a" >"$set/log/$key.verify" 2>&1 &&
				grep -q '(0 rules that do not follow)' "$set/log/$key.verify"; then
				echo "after from-code verified" >>"$set/log/$key.status"
			else
				echo "after VERIFY: $(tail -1 "$set/log/$key.verify")" >>"$set/log/$key.status"
			fi
		else
			echo "after converted (nothing from code)" >>"$set/log/$key.status"
		fi
	else
		cp "$src" "$a"
		echo "after copied: $(grep -v ': from-code\|^  ' "$set/log/$key.diag" | tail -1)" >>"$set/log/$key.status"
	fi
	grep -q '^panic:\|^goroutine ' "$set/log/$key.diag" && echo "after PANIC" >>"$set/log/$key.status"
	return 0
}
export -f convert_one
export c2s

# prepare SET LIST: converts the files LIST names (one path a line) into
# SET/{before,after}: the program by its base name, a library by its
# soname, numpy's modules at their place in SET/{before,after}/py.
prepare() {
	local set=$1 list=$2 numpy f rel so
	numpy=$("$py" -c 'import numpy, os; print(os.path.dirname(numpy.__file__))')
	rm -rf "$set" && mkdir -p "$set/before/py" "$set/after/py" "$set/log"
	cp -a "$numpy" "$set/before/py/" && cp -a "$numpy" "$set/after/py/"
	while IFS= read -r f; do
		[ -f "$f" ] && [ "$(head -c 4 "$f")" = $'\x7fELF' ] || continue
		case $f in
		*/ld-linux-x86-64.so.2 | */lib-dynload/*) continue ;; # not redirected (see the header)
		"$numpy"/*) rel=py/numpy/${f#"$numpy"/} ;;
		*)
			so=$(readelf -dW "$f" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
			rel=${so:-$(basename "$f")}
			;;
		esac
		printf '%s\t%s\t%s\n' "$f" "$set" "$rel"
	done <"$list" | sort -u -t$'\t' -k3,3 >"$set/files"
	tr '\t' '\0' <"$set/files" | tr '\n' '\0' | xargs -0 -n 3 -P "$(nproc)" bash -c 'convert_one "$@"' _
}

note "listing the files each program maps"
{ echo /usr/bin/ffmpeg; ldd /usr/bin/ffmpeg | sed -n 's/.*=> \(\/[^ ]*\) .*/\1/p'; } | xargs -n1 readlink -f >"$run/ffmpeg.maps"
"$py" "$run/matmul.py" "$run/numpy.maps.raw" || die "the numpy workload failed"
xargs -n1 readlink -f <"$run/numpy.maps.raw" >"$run/numpy.maps"
for set in ffmpeg numpy; do
	note "converting the $(wc -l <"$run/$set.maps") files $set maps, plainly and with --from-code"
	start=$(date +%s)
	prepare "$run/$set" "$run/$set.maps"
	note "  $(wc -l <"$run/$set/files") ELF files in $(($(date +%s) - start)) s"
done

# Every file converted or copied; a panic, a rule made from code that
# verify finds wrong, or --from-code failing where the plain conversion
# worked, is a failure.
status=0
for set in ffmpeg numpy; do
	cat "$run/$set"/log/*.status >"$run/$set/outcomes"
	bad=$(grep -c 'PANIC\|VERIFY' "$run/$set/outcomes" || true)
	for s in "$run/$set"/log/*.status; do
		if grep -q '^before converted' "$s" && grep -q '^after copied' "$s"; then
			echo "--from-code failed where the plain conversion did not: $(basename "$s" .status): $(grep '^after' "$s")"
			bad=$((bad + 1))
		fi
		grep -q 'PANIC\|VERIFY' "$s" && echo "$(basename "$s" .status): $(grep 'PANIC\|VERIFY' "$s")"
	done
	echo "$set: $(wc -l <"$run/$set/files") ELF files; before: $(grep -c '^before converted' "$run/$set/outcomes" || true) converted," \
		"$(grep -c '^before copied' "$run/$set/outcomes" || true) copied (no CFI or refused); after: $(grep -c '^after from-code verified' "$run/$set/outcomes" || true)" \
		"with rows from code (verify: every rule follows the instructions), $(grep -c '^after converted' "$run/$set/outcomes" || true) nothing from code," \
		"$(grep -c '^after copied' "$run/$set/outcomes" || true) copied"
	[ "$bad" = 0 ] || status=1
done
for d in before after; do
	got=$(env LD_LIBRARY_PATH="$run/numpy/$d" PYTHONPATH="$run/numpy/$d/py" "$run/numpy/$d/python3.11" -c 'import numpy; print(numpy.__file__)' 2>&1) ||
		die "the converted python ($d) cannot import numpy: $got"
	case $got in "$run/numpy/$d/py/"*) ;; *) die "the converted python ($d) imports numpy from $got, not the copy" ;; esac
done

# trace_one NAME SET DIR CMD...: trace CMD with SET/DIR's files; the
# summary goes to $run/NAME.DIR.trace.
trace_one() {
	local name=$1 set=$2 d=$3
	shift 3
	if ! env LD_LIBRARY_PATH="$run/$set/$d" PYTHONPATH="$run/$set/$d/py" \
		"$c2s" trace -F "$hz" -- "$@" >"$run/$name.$d.trace" 2>&1; then
		echo "trace of $name ($d) failed:"
		tail -5 "$run/$name.$d.trace"
		return 1
	fi
	grep -q '^walked to the outermost frame: ' "$run/$name.$d.trace" || { echo "no summary from trace of $name ($d)"; return 1; }
}

# Reading the summary: samples, outermost, their share, where walks stopped.
samples() { sed -n 's/^process [0-9]*: \([0-9]*\) samples from \([0-9]*\) thread.*/\1 \2/p' "$1" | head -1; }
outermost() { sed -n 's/^walked to the outermost frame: \([0-9]*\) (\([0-9.]*\)%).*/\1 \2/p' "$1"; }
# stops FILE: "count object" of the walks stopped early, by object.
stops() {
	awk '/^walks stopped early:/ { on = 1; next }
		on && /^  +[0-9]+  / {
			n = $1; sub(/^ *[0-9]+  /, ""); sub(/^[^:]*: /, ""); sub(/ 0x[0-9a-f]+.*$/, "")
			by[$0] += n; next }
		on { on = 0 }
		END { for (o in by) printf "%d %s\n", by[o], o }' "$1" | sort -rn
}

ff=(-nostdin -hide_banner -loglevel error -threads 2)
declare -A res
for w in av1 hevc numpy; do
	for d in before after; do
		note "trace -F $hz: $w, $d"
		case $w in
		av1) trace_one av1 ffmpeg "$d" "$run/ffmpeg/$d/ffmpeg" "${ff[@]}" -c:v libdav1d -stream_loop 2 -i "$cache/sample-av1.mkv" -f null - || status=1 ;;
		hevc) trace_one hevc ffmpeg "$d" "$run/ffmpeg/$d/ffmpeg" "${ff[@]}" -stream_loop 2 -i "$cache/sample-hevc.mkv" -f null - || status=1 ;;
		numpy) trace_one numpy numpy "$d" "$run/numpy/$d/python3.11" "$run/matmul.py" || status=1 ;;
		esac
		f=$run/$w.$d.trace
		[ -f "$f" ] && grep -q '^walked to the outermost' "$f" || continue
		read -r n th <<<"$(samples "$f")"
		read -r o p <<<"$(outermost "$f")"
		res[$w.$d]="$n $th $o $p"
	done
done

echo
printf '%-8s %-34s %9s %9s %9s  %s\n' workload "" samples before after "goal $goal%"
declare -A desc=([av1]="ffmpeg: AV1 sample, libdav1d" [hevc]="ffmpeg: HEVC sample, hevc decoder" [numpy]="numpy: 1500x1500 a @ b, OpenBLAS")
for w in av1 hevc numpy; do
	read -r nb tb ob pb <<<"${res[$w.before]:-- - - -}"
	read -r na ta oa pa <<<"${res[$w.after]:-- - - -}"
	met="no"
	if [ "$pa" = - ]; then met="no run"; status=1
	elif awk -v p="$pa" -v g="$goal" 'BEGIN { exit !(p >= g) }'; then met="met"
	else status=1; fi
	printf '%-8s %-34s %9s %8s%% %8s%%  %s\n' "$w" "${desc[$w]}" "$na" "$pb" "$pa" "$met"
done
for w in av1 hevc numpy; do
	for d in before after; do
		f=$run/$w.$d.trace
		[ -f "$f" ] || continue
		echo
		echo "$w, $d: $(grep '^walked to the outermost' "$f")"
		grep '^  ending in ' "$f" | head -5
		grep '^walks stopped early: ' "$f" || true
		# trace lists the 20 commonest places; the rest are counted here.
		sed -n 's/^  \.\.\. \([0-9]*\) more places$/  (and \1 more places, not counted below)/p' "$f"
		stops "$f" | head -8 | while read -r n o; do
			printf '  stopped in %-60s %6d\n' "$o" "$n"
			[ "$d" = after ] || continue
			set=ffmpeg
			[ "$w" = numpy ] && set=numpy
			rel=${o#"$run/$set/after/"}
			[ -f "$run/$set/log/${rel//\//_}.diag" ] || continue
			# What --from-code left out of it, and why.
			sed -n 's/.*: \([0-9]* functions converted.*\)/      --from-code: \1/p' "$run/$set/log/${rel//\//_}.diag" | tail -1
		done
	done
done
echo
echo "traces, conversion logs (log/*.diag: cfi2sframe --from-code --diagnostics text) in $run"
[ $status = 0 ] || echo "$prog: the goal is not met everywhere, or a step failed (see above)"
exit $status
