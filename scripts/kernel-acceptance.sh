#!/usr/bin/env bash
# kernel-acceptance.sh — boot a Linux kernel that has the SFrame user-space
# unwinder under qemu (KVM, or TCG where KVM cannot run it) and check the
# user call chains it records from cfi2sframe's output against the true
# chains of test programs.
#
# Usage: scripts/kernel-acceptance.sh [--keep] KDIR|BZIMAGE
#   KDIR     a built kernel tree (its arch/x86/boot/bzImage is booted, and
#            the perf_event_attr bits the reader sets are checked against
#            its include/uapi/linux/perf_event.h)
#   BZIMAGE  a built x86-64 kernel image
#   --keep   keep the work directory (printed) instead of removing it
# Without an argument it prints "skip: ..." and exits 0: no kernel is built
# here (CI never builds one). `CFI2SFRAME_KERNEL=KDIR|BZIMAGE go test ./e2e
# -run Kernel` runs it and requires every "ok" check.
# Environment: CFI2SFRAME (the cfi2sframe binary; default: go build of
# ./cmd/cfi2sframe), CFI2SFRAME_TOOLCHAIN (as for reference-toolchain.sh,
# whose sid binutils build the GNU `as --gsframe` anchor), BUSYBOX (a static
# busybox; default /bin/busybox from Debian's busybox-static),
# KERNEL_ACCEPTANCE_ACCEL (kvm or tcg; default kvm, tcg where KVM is
# kvm_pvm, see below), KERNEL_ACCEPTANCE_PERIOD (sampling period in ns,
# default 100000), KERNEL_ACCEPTANCE_BOOT_TIMEOUT and _RUN_TIMEOUT (seconds,
# default 180 and 900).
#
# The kernel the figures in docs/acceptance.md come from (no kernel code is in this
# repository; the tree was assembled by hand):
#   base     Debian's linux-source-7.3 7.3.4-1~bpo13+1 (trixie-backports)
#   series   the unmerged SFrame user-unwinder files, read from the stored
#            index of GitHub's linux-mm/linux-mm, file@commit:
#              kernel/unwind/sframe.c                07e15cb06bc9a6fa87aea50934729c21a620bc85
#              kernel/unwind/sframe_debug.h          07e15cb06bc9a6fa87aea50934729c21a620bc85
#              include/linux/sframe.h                07e15cb06bc9a6fa87aea50934729c21a620bc85
#              kernel/unwind/sframe.h                7edb3240391778c319f1160827889920ba7da45e
#              kernel/unwind/user.c                  0d511c76135d200d8320ad479116842b3e287149
#              include/linux/unwind_user_types.h     964fbbfdad0d87f0bd72f70ff22599a82e7553cc
#              include/linux/unwind_user.h           ed993b459e6ad142875e4496638aa5dff0fe1d5e
#              arch/x86/include/asm/unwind_user.h    0664463626c6f19f225fff0c90546f807808ca54
#              arch/x86/include/asm/unwind_user_sframe.h  as rgushchin/linux
#                       83dedac220deddd1d1446f54cb2c7ed6e411ab09 has it
#                       (SFRAME_REG_SP 7, SFRAME_REG_FP 6; linux-mm's index
#                       has no copy)
#   glue     written by hand after the series' patch mails: binfmt_elf
#            registers PT_GNU_SFRAME once per executable (PF_X) program
#            header of the program and of its interpreter; the per-mm maple
#            tree (mm_struct, init_mm, mm_init, __mmdrop, dup_mmap); Kconfig
#            HAVE_UNWIND_USER_SFRAME (selected on x86-64) and
#            SFRAME_VALIDATION; PT_GNU_SFRAME in uapi/linux/elf.h; x86's
#            unsafe_copy_from_user(), which 7.3 lacks
#   config   tinyconfig + 64BIT, serial 8250 console, TTY, PRINTK,
#            BLK_DEV_INITRD, RD_GZIP, BINFMT_ELF, BINFMT_SCRIPT, PROC_FS,
#            SYSFS, DEVTMPFS(_MOUNT), TMPFS, PERF_EVENTS, DEBUG_FS,
#            DYNAMIC_DEBUG, SFRAME_VALIDATION, FUTEX, POSIX_TIMERS,
#            HIGH_RES_TIMERS (UNWIND_USER, HAVE_UNWIND_USER_FP and
#            HAVE_UNWIND_USER_SFRAME follow)
#   built    make -j2 bzImage from clean: 6 min 56 s on 2 shared cores
#   command  scripts/kernel-acceptance.sh /path/to/linux-source-7.3
#
# What it does, in a temporary directory:
#   - builds e2e/testdata/kernel/reader.c (static) and the test programs
#     chain.c, drap.c, signal.c and plt.c (static, -O2 -fomit-frame-pointer;
#     plt.c also -fno-builtin) with the host's gcc, and each variant of
#     them: .ours (cfi2sframe's default output), .for-kernel (cfi2sframe
#     --for kernel), .gnu (built again with sid's GNU as 2.47 --gsframe,
#     the anchor; Debian's libc.a has no .sframe, so only the program's own
#     functions are described), .plain (no .sframe), and two damaged copies
#     of chain.ours (leaf's one FRE moved to leaf's last byte, which the
#     kernel's validation accepts and the first lookup in leaf fails, so
#     the kernel removes the section; moved past leaf's end, which
#     validation refuses at exec); `cfi2sframe verify --for kernel` must
#     pass ours and flag the damaged ones;
#   - packs them with busybox into an initramfs whose init runs each under
#     the reader (two software cpu-clock events on the child: one with
#     defer_callchain and defer_output, whose PERF_RECORD_CALLCHAIN_DEFERRED
#     chains come from the kernel's unwind_user, one ordinary, whose chains
#     come from the frame-pointer walk at the sample), writes the chains
#     and each run's kernel log (dmesg -c) to the second serial port and
#     reboots; qemu-system-x86_64 boots it with
#     dyndbg="file kernel/unwind/* +p", so the unwinder's pr_debug lines
#     are logged;
#   - resolves every chain with the binary's symbols (nm; .plt stubs as
#     PLT) and compares it with the true chain of its innermost function
#     (known by construction, listed below), and prints per variant: the
#     deferred chains, the share equal to the true chain, the share that
#     stops at a known kernel limit (the signal trampoline, which it does
#     not cross; a caller frame whose rule names a register, which it
#     reads only in the interrupted frame), the rest, the share right
#     through main, the ordinary samples for comparison, and the kernel's
#     log lines about sframe; then one "ok"/"FAIL"/"info" line per check.
#
# KVM: on hosts whose KVM is kvm_pvm (the nested, page-table-based KVM of
# some cloud sandboxes) a kernel that is not built as a PVM guest runs
# through KVM's instruction emulator: the bzImage did not get past its
# decompressor in 400 s, and the same kernel's vmlinux booted directly
# (PVH) took 26 s to set up the FPU and then stopped at an instruction the
# emulator lacks (xrstor). There TCG runs the same kernel (about 40 s for
# all runs); only the clock the cpu-clock events sample is emulated.
set -euo pipefail

prog=kernel-acceptance.sh
die() { printf '%s: %s\n' "$prog" "$*" >&2; exit 1; }
note() { printf '%s: %s\n' "$prog" "$*" >&2; }

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
src=$repo/e2e/testdata/kernel

keep=0
if [ "${1:-}" = --keep ]; then
	keep=1
	shift
fi
if [ $# -eq 0 ] || [ -z "$1" ]; then
	echo "skip: no kernel tree or bzImage given (usage: $prog [--keep] KDIR|BZIMAGE; see the header for the kernel it needs)"
	exit 0
fi
[ $# -eq 1 ] || die "usage: $prog [--keep] KDIR|BZIMAGE"
kdir=
if [ -d "$1" ]; then
	kdir=$(cd "$1" && pwd)
	bzimage=$kdir/arch/x86/boot/bzImage
	[ -f "$bzimage" ] || die "$1 has no arch/x86/boot/bzImage: build the kernel first (make -j2 bzImage)"
elif [ -f "$1" ]; then
	bzimage=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
else
	die "$1: no such kernel tree or bzImage"
fi

# Everything else is required: a missing piece is an error, not a skip.
for t in qemu-system-x86_64 gcc nm readelf cpio gzip python3; do
	command -v "$t" >/dev/null || die "$t is not installed (apt-get install qemu-system-x86 gcc binutils cpio gzip)"
done
BUSYBOX=${BUSYBOX:-/bin/busybox}
[ -x "$BUSYBOX" ] || die "no busybox at $BUSYBOX (apt-get install busybox-static)"
if "$BUSYBOX" true 2>/dev/null && ldd "$BUSYBOX" >/dev/null 2>&1; then
	die "$BUSYBOX is dynamically linked; the initramfs needs busybox-static's"
fi
tc=$(bash "$here/reference-toolchain.sh" --print 2>/dev/null) ||
	die "the reference toolchain is not installed (bash scripts/reference-toolchain.sh): its GNU as 2.47 builds the --gsframe anchor"
gnu_b=$tc/sid/gcc-x86_64/
[ -x "$gnu_b/as" ] || die "no $gnu_b/as in the reference toolchain"
PERIOD=${KERNEL_ACCEPTANCE_PERIOD:-100000}

w=$(mktemp -d "${TMPDIR:-/tmp}/kernel-acceptance.XXXXXX")
qemu=
cleanup() {
	if [ -n "$qemu" ]; then kill "$qemu" 2>/dev/null || true; fi
	if [ $keep = 0 ]; then rm -rf "$w"; fi
}
trap cleanup EXIT
[ $keep = 0 ] || note "work directory: $w"

if [ -n "${CFI2SFRAME:-}" ]; then
	c2s=$CFI2SFRAME
else
	(cd "$repo" && go build -o "$w/cfi2sframe" ./cmd/cfi2sframe) || die "go build ./cmd/cfi2sframe failed"
	c2s=$w/cfi2sframe
fi

# The reader sets defer_callchain and defer_output by position (bits 38 and
# 39 of the flags word): check that against the tree's UAPI header.
if [ -n "$kdir" ]; then
	cat >"$w/uapi.c" <<'EOF'
#include <stdio.h>
#include <string.h>
#include <linux/perf_event.h>
int main(void)
{
	struct perf_event_attr a;
	unsigned long long *flags = (unsigned long long *)((char *)&a.read_format + sizeof(a.read_format));
	memset(&a, 0, sizeof(a));
	a.defer_callchain = 1;
	printf("%d ", __builtin_ctzll(*flags));
	memset(&a, 0, sizeof(a));
	a.defer_output = 1;
	printf("%d\n", __builtin_ctzll(*flags));
	return 0;
}
EOF
	# The tree's perf_event.h alone (the headers it includes are the
	# system's: the tree's raw UAPI headers need "make headers").
	mkdir -p "$w/uapi-inc/linux"
	cp "$kdir/include/uapi/linux/perf_event.h" "$w/uapi-inc/linux/" || die "$kdir has no include/uapi/linux/perf_event.h"
	gcc -I"$w/uapi-inc" -o "$w/uapi" "$w/uapi.c" || die "$kdir/include/uapi/linux/perf_event.h has no defer_callchain/defer_output (not a kernel with deferred call chains)"
	bits=$("$w/uapi")
	[ "$bits" = "38 39" ] || die "defer_callchain/defer_output are bits $bits of perf_event_attr's flags in $kdir, the reader sets 38 39"
fi

# Build the programs.
bin=$w/bin
mkdir -p "$bin"
cflags="-static -O2 -fomit-frame-pointer"
gcc -static -O2 -Wall -o "$bin/reader" "$src/reader.c" || die "cannot build the reader"
verify_log=$w/verify.log
: >"$verify_log"
for p in chain drap signal plt; do
	extra=
	[ $p != plt ] || extra=-fno-builtin # calls, not folded or inlined string functions
	# shellcheck disable=SC2086 # cflags and extra are lists of options
	gcc $cflags $extra -o "$bin/$p.plain" "$src/$p.c" || die "cannot build $p"
	# shellcheck disable=SC2086
	gcc $cflags $extra -B"$gnu_b" -Wa,--gsframe -o "$bin/$p.gnu" "$src/$p.c" || die "cannot build $p with GNU as --gsframe"
	"$c2s" -q "$bin/$p.plain" -o "$bin/$p.ours" || die "cfi2sframe $p failed"
	"$c2s" -q --for kernel "$bin/$p.plain" -o "$bin/$p.for-kernel" || die "cfi2sframe --for kernel $p failed"
done

# damage FILE SYMBOL MODE: rewrite the start offset of the one FRE of
# SYMBOL's FDE in FILE's .sframe (V3, through PT_GNU_SFRAME). MODE lookup:
# func_size-1, which the kernel's validation accepts (below func_size,
# sorted) but which leaves every PC below it without an FRE, so the first
# lookup there fails and the kernel removes the section; MODE validate:
# func_size, which __read_fre refuses, so validation refuses the section
# at exec.
damage() {
	local f=$1 sym=$2 mode=$3 addr
	addr=$(nm "$f" | awk -v s="$sym" '$3 == s { print $1; exit }')
	[ -n "$addr" ] || die "damage: no symbol $sym in $f"
	(cd "$repo" && go run ./internal/cmd/sframe-damage "$f" "$addr" "$mode")
}
for mode in lookup validate; do
	cp "$bin/chain.ours" "$bin/chain.damaged-$mode"
	damage "$bin/chain.damaged-$mode" leaf "$mode" >>"$verify_log" || die "cannot damage chain.ours"
done

# verify --for kernel: ours must pass, the damaged copies must not.
for f in chain.ours drap.ours signal.ours plt.ours chain.for-kernel drap.for-kernel signal.for-kernel plt.for-kernel chain.gnu drap.gnu signal.gnu plt.gnu chain.damaged-lookup chain.damaged-validate; do
	if "$c2s" verify --for kernel "$bin/$f" >"$w/v.out" 2>&1; then
		printf 'verify %s pass %s\n' "$f" "$(tr '\n' ' ' <"$w/v.out")" >>"$verify_log"
	else
		printf 'verify %s fail %s\n' "$f" "$(tr '\n' ' ' <"$w/v.out")" >>"$verify_log"
	fi
done

# The runs: LABEL ARGS (the loop counts keep each phase near a second).
cat >"$w/runs" <<'EOF'
chain.ours 300000000
chain.for-kernel 300000000
chain.gnu 300000000
chain.plain 300000000
chain.damaged-lookup 300000000
chain.damaged-validate 300000000
drap.ours 150000000
drap.for-kernel 150000000
drap.gnu 150000000
drap.plain 150000000
signal.ours 150000000
signal.for-kernel 150000000
signal.gnu 150000000
signal.plain 150000000
plt.ours 3000000
plt.for-kernel 3000000
plt.gnu 3000000
plt.plain 3000000
EOF

# The initramfs.
root=$w/root
mkdir -p "$root/bin" "$root/proc" "$root/sys" "$root/dev" "$root/tests"
cp "$BUSYBOX" "$root/bin/busybox"
cp "$bin/reader" "$root/bin/reader"
while read -r label _; do cp "$bin/$label" "$root/tests/$label"; done <"$w/runs"
cp "$w/runs" "$root/tests/runs"
cat >"$root/init" <<EOF
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
exec >/dev/ttyS1 2>&1
echo "boot \$(uname -r) \$(uname -v)"
echo "dyndbg enabled \$(grep -c 'kernel/unwind/.* =p' /proc/dynamic_debug/control) of \$(grep -c 'kernel/unwind/' /proc/dynamic_debug/control) kernel/unwind callsites"
dmesg | grep -i -E 'sframe|unwind' | sed 's/^/B /'
dmesg -c >/dev/null
while read -r label args; do
	/bin/reader -p $PERIOD "\$label" "/tests/\$label" \$args
	dmesg -c | sed 's/^/K /'
done </tests/runs
echo "all done"
sync
reboot -f
EOF
chmod +x "$root/init"
(cd "$root" && find . | LC_ALL=C sort | cpio -o -H newc --quiet | gzip -1) >"$w/initrd.gz"

# The accelerator: KVM unless this host's KVM is PVM (module kvm_pvm, the
# nested "pagetable-based" KVM of some cloud sandboxes), which runs a guest
# kernel that is not built as a PVM guest through KVM's instruction
# emulator, which does not boot it in minutes and stops at the first
# instruction it lacks (xrstor; see the header). There, and with
# KERNEL_ACCEPTANCE_ACCEL=tcg,
# qemu's TCG runs the same kernel (the unwinder's code is the same; only
# the clock the cpu-clock event samples is emulated).
accel=${KERNEL_ACCEPTANCE_ACCEL:-}
if [ -z "$accel" ]; then
	if [ -d /sys/module/kvm_pvm ]; then
		accel=tcg
		note "KVM here is kvm_pvm, which emulates an unmodified guest kernel instruction by instruction: using TCG (KERNEL_ACCEPTANCE_ACCEL=kvm forces KVM)"
	else
		accel=kvm
	fi
fi
case $accel in
kvm)
	[ -r /dev/kvm ] && [ -w /dev/kvm ] || die "/dev/kvm is not usable by $(id -un) (KERNEL_ACCEPTANCE_ACCEL=tcg runs without it)"
	accel_args="-enable-kvm"
	;;
tcg) accel_args="-accel tcg" ;;
*) die "KERNEL_ACCEPTANCE_ACCEL=$accel: want kvm or tcg" ;;
esac

note "booting $bzimage ($accel)"
console=$w/console.log data=$w/data.log
: >"$data"
# shellcheck disable=SC2086 # accel_args is a list of options
qemu-system-x86_64 $accel_args -m 512M -smp 1 -nographic -no-reboot -monitor none \
	-kernel "$bzimage" -initrd "$w/initrd.gz" \
	-append 'console=ttyS0 loglevel=4 panic=-1 dyndbg="file kernel/unwind/* +p"' \
	-serial "file:$console" -serial "file:$data" >"$w/qemu.log" 2>&1 &
qemu=$!
# The guest writes "boot" first and "all done" last; give up when the
# first does not come within BOOT_TIMEOUT seconds or the runs take longer
# than RUN_TIMEOUT.
boot_timeout=${KERNEL_ACCEPTANCE_BOOT_TIMEOUT:-180} run_timeout=${KERNEL_ACCEPTANCE_RUN_TIMEOUT:-900}
start=$SECONDS
while kill -0 "$qemu" 2>/dev/null; do
	if ! grep -q '^boot ' "$data" && [ $((SECONDS - start)) -ge "$boot_timeout" ]; then
		kill "$qemu"
		tail -n 20 "$console" >&2
		die "the guest did not reach its init within ${boot_timeout}s ($accel; console log above)"
	fi
	if [ $((SECONDS - start)) -ge "$run_timeout" ]; then
		kill "$qemu"
		die "the guest did not finish within ${run_timeout}s ($accel; console: $console, data: $data)"
	fi
	sleep 1
done
wait "$qemu" || die "qemu failed: $(tail -n 5 "$w/qemu.log")"
qemu=
grep -q '^all done' "$data" || {
	tail -n 30 "$console" >&2
	die "the guest did not finish its runs (console log above; data: $data)"
}
note "guest ran for $((SECONDS - start))s"
# The serial line ends lines with CR LF.
tr -d '\r' <"$data" >"$w/data.txt"
data=$w/data.txt

# Analysis.
truth=$w/truth
# PROGRAM: the true chain of a sample whose innermost function is the
# first, innermost first (NAME* matches any function whose name starts with
# NAME; PLT is a stub of the .plt section); after ";" the frames of it at
# which the kernel's
# unwinder is known to stop (see docs/acceptance.md): __restore_rt, since it reads
# no signal frame; drapfn as a caller, since its rbp rule names a register
# and the kernel applies register rules only in the interrupted frame.
cat >"$truth" <<'EOF'
chain leaf c8 c7 c6 c5 c4 c3 c2 c1 main __libc_start_call_main __libc_start_main _start ;
drap leaf d3 drapfn d2 d1 main __libc_start_call_main __libc_start_main _start ; drapfn
drap drapfn d2 d1 main __libc_start_call_main __libc_start_main _start ;
signal s3 s2 s1 main __libc_start_call_main __libc_start_main _start ;
signal hleaf h1 handler __restore_rt __kill s3 s2 s1 main __libc_start_call_main __libc_start_main _start ; __restore_rt
plt p2 p1 main __libc_start_call_main __libc_start_main _start ;
plt PLT p2 p1 main __libc_start_call_main __libc_start_main _start ;
plt __strlen_* p2 p1 main __libc_start_call_main __libc_start_main _start ;
plt __strnlen_* p2 p1 main __libc_start_call_main __libc_start_main _start ;
plt __strcpy_* p2 p1 main __libc_start_call_main __libc_start_main _start ;
EOF

printf '\nkernel: %s\n' "$(sed -n 's/^boot //p' "$data")"
sed -n 's/^dyndbg //p' "$data" | sed 's/^/dynamic debug: /'
sed -n 's/^B /boot log: /p' "$data"
printf '\nverify --for kernel:\n'
sed 's/^/  /' "$verify_log"
printf '\n'

results=$w/results
: >"$results"
labels=$(awk '{ print $1 }' "$w/runs")
for label in $labels; do
	p=${label%%.*}
	nm -n -S --defined-only "$bin/$label" >"$w/syms" || die "nm $label failed"
	readelf -lSW "$bin/$label" >"$w/segs" || die "readelf $label failed"
	awk -v label="$label" -v prog="$p" -v results="$results" '
	BEGIN { ns = 0; nx = 0; nt = 0; nex = 0; nk = 0; pltk = "" }
	function hex(s,   i, v) {
		v = 0; s = tolower(s); sub(/^0x/, "", s)
		for (i = 1; i <= length(s); i++) v = v * 16 + index("0123456789abcdef", substr(s, i, 1)) - 1
		return v
	}
	FILENAME == ARGV[1] {
		# nm -n -S: "ADDR SIZE TYPE NAME" or "ADDR TYPE NAME"
		if (NF == 4) { a = $1; s = $2; t = $3; n = $4 } else if (NF == 3) { a = $1; s = ""; t = $2; n = $3 } else next
		if (t !~ /^[TtWw]$/) next
		av = hex(a)
		if (!(n in byname)) byname[n] = av
		if (ns > 0 && addr[ns - 1] == av) { if (s != "") size[ns - 1] = hex(s); names[ns - 1] = names[ns - 1] " " n; next }
		addr[ns] = av; size[ns] = (s == "" ? -1 : hex(s)); name[ns] = n; names[ns] = " " n; ns++
		next
	}
	FILENAME == ARGV[2] {
		if ($1 != prog) next
		nt++; tn[nt] = 0; lim = 0; tlimits[nt] = " "
		for (i = 2; i <= NF; i++) {
			if ($i == ";") { lim = 1; continue }
			if (lim) { tlimits[nt] = tlimits[nt] $i " "; continue }
			tn[nt]++; tname[nt, tn[nt]] = $i; taddr[nt, tn[nt]] = ($i in byname) ? byname[$i] : -1
			if ($i == "PLT") taddr[nt, tn[nt]] = -2
			if ($i == "main") tmain[nt] = tn[nt]
		}
		next
	}
	function fn(ip,   lo, hi, mid, x, inx) {
		if (pltk != "" && ip >= addr[pltk] && ip < addr[pltk] + size[pltk]) return pltk
		inx = 0
		for (x = 0; x < nx; x++) if (ip >= xlo[x] && ip < xhi[x]) inx = 1
		if (!inx) return -1
		lo = 0; hi = ns - 1
		if (ns == 0 || ip < addr[0]) return -1
		while (lo < hi) { mid = int((lo + hi + 1) / 2); if (addr[mid] <= ip) lo = mid; else hi = mid - 1 }
		if (size[lo] >= 0 && ip >= addr[lo] + size[lo]) return -1
		return lo
	}
	function sym(h,   k) { k = fn(hex(h)); return k < 0 ? "?" h : name[k] }
	# same(f, t, i): function f is frame i of true chain t
	function same(f, t, i,   p) {
		if (f < 0) return 0
		if (tname[t, i] ~ /\*$/) { p = substr(tname[t, i], 1, length(tname[t, i]) - 1); return index(names[f], " " p) > 0 }
		if (taddr[t, i] == -2) return f == pltk
		return addr[f] == taddr[t, i]
	}
	function classify(n, ips,   t, i, f, top) {
		# returns "equal", "limit", "wrong", or "other"; sets why, the
		# true chain matched (tmatch) and throughmain (the chain is right
		# from the innermost frame through main, whatever follows)
		top = fn(hex(ips[1])); throughmain = 0; tmatch = 0
		for (t = 1; t <= nt; t++) {
			if (!same(top, t, 1)) continue
			tmatch = t
			for (i = 1; i <= n && i <= tn[t]; i++) {
				f = fn(hex(ips[i]))
				if (!same(f, t, i)) break
			}
			if (tmain[t] && i > tmain[t]) throughmain = 1
			if (i <= n && i <= tn[t]) { why = "frame " i " is " sym(ips[i]) ", want " tname[t, i]; return "wrong" }
			if (n == tn[t]) return "equal"
			if (n > tn[t]) { why = (n - tn[t]) " frames after " tname[t, tn[t]]; return "wrong" }
			if (index(tlimits[t], " " tname[t, n] " ")) { why = "stops at " tname[t, n]; return "limit" }
			why = "stops after " tname[t, n] " (frame " n " of " tn[t] ")"
			return "wrong"
		}
		why = "innermost frame " sym(ips[1])
		return "other"
	}
	FILENAME == ARGV[3] {
		# readelf -lSW: the executable LOAD segments, and .plt (which
		# has no symbol) as a function named PLT
		if ($1 == "LOAD" && $0 ~ / E /) { xlo[nx] = hex($3); xhi[nx] = hex($3) + hex($6); nx++ }
		if ($0 ~ /\] \.plt +PROGBITS/) {
			sub(/^.*\] /, ""); pltk = ns; addr[ns] = hex($3); size[ns] = hex($5); name[ns] = "PLT"; names[ns] = " PLT"
		}
		next
	}
	FILENAME == ARGV[4] {
		# A run is "run LABEL" ... "end LABEL", then the kernel log of it.
		if ($1 == "run") { inrun = ($2 == label); owner = $2; next }
		if ($1 == "K") { if (owner == label) { sub(/^K /, ""); if (tolower($0) ~ /sframe|unwind/) klog[++nk] = $0 }; next }
		if (!inrun) next
		if ($1 == "end") { inrun = 0; next }
		if ($1 == "stat") { st[$2] = $3; next }
		if ($1 != "D" && $1 != "S") next
		kind = $1; cnt = $2; n = $3
		delete ips
		for (i = 1; i <= n; i++) ips[i] = $(i + 3)
		throughmain = 0; tmatch = 0
		c = n == 0 ? "wrong" : classify(n, ips)
		if (n == 0) why = "empty chain"
		tot[kind] += cnt; cls[kind, c] += cnt; main[kind] += throughmain ? cnt : 0
		if (c == "equal" || c == "limit") good[kind, tmatch] += cnt
		if (tmatch) { per[kind, tmatch] += cnt; per[kind, tmatch, c] += cnt }
		if (kind == "D" && c != "equal") {
			s = ""
			for (i = 1; i <= n; i++) s = s " " sym(ips[i])
			ex[++nex] = sprintf("    %6d x %-6s %s:%s", cnt, c, why, s)
		}
		next
	}
	END {
		spin = cls["D", "equal"] + cls["D", "limit"] + cls["D", "wrong"]
		sspin = cls["S", "equal"] + cls["S", "limit"] + cls["S", "wrong"]
		pe = spin ? 100 * cls["D", "equal"] / spin : 0
		pl = spin ? 100 * cls["D", "limit"] / spin : 0
		ps = sspin ? 100 * cls["S", "equal"] / sspin : 0
		pm = spin ? 100 * main["D"] / spin : 0
		printf "%s: exit %s; %d deferred chains (%d samples marked deferred, %d lost): in the spinning functions %d, equal to the true chain %d (%.1f%%), stopped at a known limit %d (%.1f%%), wrong %d; right through main %d (%.1f%%); outside the spinning functions %d\n",
			label, st["exit"], tot["D"], st["deferred-marks"], st["deferred-lost"], spin, cls["D", "equal"], pe, cls["D", "limit"], pl, cls["D", "wrong"], main["D"], pm, cls["D", "other"]
		# every true chain must have been seen right (equal or at its limit)
		missing = 0
		for (t = 1; t <= nt; t++) if (!good["D", t]) missing++
		for (t = 1; t <= nt; t++)
			printf "  innermost %s: %d chains, %d equal, %d at a known limit, %d wrong\n", tname[t, 1], per["D", t], per["D", t, "equal"], per["D", t, "limit"], per["D", t, "wrong"]
		printf "  ordinary samples (frame-pointer walk at the sample): %d, in the spinning functions %d, equal to the true chain %d (%.1f%%)\n", tot["S"], sspin, cls["S", "equal"], ps
		for (i = 1; i <= nex && i <= 12; i++) print ex[i]
		if (nex > 12) printf "    ... %d more distinct chains\n", nex - 12
		if (nk == 0) print "  kernel log: no line about sframe/unwind"
		for (i = 1; i <= nk; i++) print "  kernel log: " klog[i]
		printf "%s %s %d %d %d %d %d %d %d %d %d\n", label, st["exit"], tot["D"], spin, cls["D", "equal"], cls["D", "limit"], cls["D", "wrong"], cls["D", "other"], nk, main["D"], missing >> results
	}' "$w/syms" "$truth" "$w/segs" "$data"
	# Per innermost function: how many deferred chains were equal.
	grep -E "^$label " "$results" >/dev/null || die "no results for $label"
done

# The checks.
fail=0
check() { # STATUS NAME TEXT
	printf '%s %s | %s\n' "$1" "$2" "$3"
	[ "$1" != FAIL ] || fail=1
}
klog() { # LABEL: the kernel log lines of LABEL's run (they follow its "end")
	awk -v l="$1" '$1 == "run" { r = ($2 == l) } r && $1 == "K"' "$data" | sed 's/^K //'
}
field() { # LABEL N: field N of LABEL's results line
	awk -v l="$1" -v n="$2" '$1 == l { print $n }' "$results"
}
vstatus() { awk -v f="$1" '$1 == "verify" && $2 == f { print $3 }' "$verify_log"; }
pct() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.1f%%", 100 * a / b; else printf "-" }'; }
printf '\n'
# ours: cfi2sframe's default output of chain and drap, and --for kernel of
# all three. signal's default output has no FDE for glibc's __restore_rt
# (its CFI is a DWARF expression SFrame cannot say): the kernel falls back
# to its frame-pointer walk there and adds a wrong frame; --for kernel
# gives it a signal FDE (--signal-frames), where the walk stops.
for label in chain.ours drap.ours plt.ours chain.for-kernel drap.for-kernel signal.for-kernel plt.for-kernel signal.ours; do
	ex=$(field "$label" 2) spin=$(field "$label" 4) eq=$(field "$label" 5) lim=$(field "$label" 6) wrong=$(field "$label" 7) missing=$(field "$label" 11)
	bad=$(klog "$label" | grep -c -i -E 'sframe' || true)
	text="$eq of $spin deferred chains ($(pct "$eq" "$spin")) equal the true chain, $lim ($(pct "$lim" "$spin")) stop at a known limit, $wrong wrong; $missing true chains never seen; exit $ex; $bad kernel log lines about sframe; verify --for kernel: $(vstatus "$label")"
	if [ "$label" = signal.ours ]; then
		check info "ours $label" "default output (no signal FDE): $text"
	elif [ "$ex" = 0 ] && [ "$spin" -gt 0 ] && [ "$wrong" = 0 ] && [ "$missing" = 0 ] && [ "$bad" = 0 ] && [ "$(vstatus "$label")" = pass ]; then
		check ok "ours $label" "$text"
	else
		check FAIL "ours $label" "$text"
	fi
done
for label in chain.gnu drap.gnu signal.gnu plt.gnu; do
	ex=$(field "$label" 2) spin=$(field "$label" 4) eq=$(field "$label" 5) lim=$(field "$label" 6) wrong=$(field "$label" 7) main=$(field "$label" 10)
	check info "anchor $label" "GNU as 2.47 --gsframe (libc.a's objects have no .sframe): $eq of $spin deferred chains ($(pct "$eq" "$spin")) equal the true chain, $lim ($(pct "$lim" "$spin")) stop at a known limit, $wrong wrong; right through main $main ($(pct "$main" "$spin")); exit $ex; verify --for kernel: $(vstatus "$label")"
done
for label in chain.plain drap.plain signal.plain plt.plain; do
	ex=$(field "$label" 2) spin=$(field "$label" 4) eq=$(field "$label" 5) main=$(field "$label" 10)
	text="no .sframe: $eq of $spin deferred chains equal the true chain, $main right through main (the frame-pointer fallback on -fomit-frame-pointer code); exit $ex"
	if [ "$ex" = 0 ] && [ "$spin" -gt 0 ] && [ "$eq" = 0 ] && [ "$main" = 0 ]; then
		check ok "control $label" "$text"
	else
		check FAIL "control $label" "$text"
	fi
done
label=chain.damaged-lookup
removed=$(klog "$label" | grep -c 'removing bad .sframe section' || true)
eq=$(field "$label" 5) spin=$(field "$label" 4)
text="verify --for kernel: $(vstatus "$label"); kernel: $removed 'removing bad .sframe section'; $eq of $spin chains equal the true chain"
if [ "$(vstatus "$label")" = fail ] && [ "$removed" -ge 1 ] && [ "$eq" = 0 ]; then
	check ok "control $label" "$text"
else
	check FAIL "control $label" "$text"
fi
label=chain.damaged-validate
refused=$(klog "$label" | grep -c -E 'sframe: .*(safe_read_fre|safe_read_fde|not sorted)' || true)
eq=$(field "$label" 5) spin=$(field "$label" 4)
text="verify --for kernel: $(vstatus "$label"); kernel: $refused validation failures at exec; $eq of $spin chains equal the true chain"
if [ "$(vstatus "$label")" = fail ] && [ "$refused" -ge 1 ] && [ "$eq" = 0 ]; then
	check ok "control $label" "$text"
else
	check FAIL "control $label" "$text"
fi
exit $fail
