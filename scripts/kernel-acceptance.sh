#!/usr/bin/env bash
# kernel-acceptance.sh — boot a Linux kernel that has the SFrame user-space
# unwinder under qemu (KVM, or TCG where KVM cannot run it) and check the
# user call chains it records from cfi2sframe's output against the true
# chains of test programs. This script builds, boots and records; the Go
# test judges what it recorded (internal/testing/judge).
#
# Usage: scripts/kernel-acceptance.sh KDIR|BZIMAGE|IMAGE [OUT]
#   KDIR     a built kernel tree (its arch/x86/boot/bzImage,
#            arch/arm64/boot/Image or arch/s390/boot/bzImage is booted, and
#            the perf_event_attr bits the reader sets are checked against
#            its include/uapi/linux/perf_event.h)
#   BZIMAGE  a built x86-64 kernel image, or an s390 one
#            (arch/s390/boot/bzImage; told apart by "S390EP" at 0x10008)
#   IMAGE    a built arm64 kernel image (arch/arm64/boot/Image; told from a
#            bzImage by its header's magic)
#   OUT      the directory for the artefacts (created; must be empty);
#            default: a new temporary directory, printed and kept
# Without an argument it prints "skip: ..." and exits 0: no kernel is built
# here (CI never builds one). `CFI2SFRAME_KERNEL=KDIR|BZIMAGE go test ./e2e
# -run Kernel -v` runs it, prints the figures and requires every "ok"
# check; `CFI2SFRAME_KERNEL_RUN=OUT go test ./e2e -run Kernel -v` judges
# the artefacts of an earlier run.
# Environment: CFI2SFRAME (the cfi2sframe binary; default: go build of
# ./cmd/cfi2sframe), CFI2SFRAME_TOOLCHAIN (as for reference-toolchain.sh,
# whose sid binutils build the GNU `as --gsframe` anchor), BUSYBOX (a static
# busybox of the kernel's architecture; default /bin/busybox from Debian's
# busybox-static, on arm64 and s390x Debian's busybox-static arm64 or s390x
# package of the host's version, downloaded from the archive's pool into
# ~/.cache/cfi2sframe/busybox-ARCH once), KERNEL_ACCEPTANCE_ARCH (x86_64,
# arm64 or s390x; default: from the tree or image), KERNEL_ACCEPTANCE_CPU
# (arm64: qemu's -cpu, default max,pauth-impdef=on),
# KERNEL_ACCEPTANCE_ACCEL (kvm or tcg; default kvm, tcg where KVM is
# kvm_pvm, see below), KERNEL_ACCEPTANCE_PERIOD (sampling period in ns,
# default 100000), KERNEL_ACCEPTANCE_BOOT_TIMEOUT and _RUN_TIMEOUT (seconds,
# default 180 and 900, on arm64 and s390x 180 and 3600).
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
#            unsafe_copy_from_user(), which 7.3 lacks; since 2026-12-07
#            the system calls sframe_register/sframe_unregister (473/474
#            on x86-64) after Steven Rostedt's v2 patch of 2026-05-28:
#            struct sframe_setup {sframe_start, sframe_size, text_start,
#            text_size} by pointer with its size, the maple-tree insert
#            under mmap_write_lock
#   config   tinyconfig + 64BIT, serial 8250 console, TTY, PRINTK,
#            BLK_DEV_INITRD, RD_GZIP, BINFMT_ELF, BINFMT_SCRIPT, PROC_FS,
#            SYSFS, DEVTMPFS(_MOUNT), TMPFS, PERF_EVENTS, DEBUG_FS,
#            DYNAMIC_DEBUG, SFRAME_VALIDATION, FUTEX, POSIX_TIMERS,
#            HIGH_RES_TIMERS (UNWIND_USER, HAVE_UNWIND_USER_FP and
#            HAVE_UNWIND_USER_SFRAME follow)
#   built    make -j2 bzImage from clean: 6 min 56 s on 2 shared cores
#            (2026-12-07, assembled again: nice -n 10 make -j2, 7 min 15 s)
#   command  CFI2SFRAME_KERNEL=/path/to/linux-source-7.3 go test ./e2e
#            -run Kernel -v (this script, then the judge)
#
# What it does, in OUT:
#   - builds e2e/testdata/kernel/reader.c (static) and the test programs
#     chain.c, drap.c, signal.c, plt.c and noreturn.c (static, -O2 -fomit-frame-pointer;
#     plt.c also -fno-builtin) with the host's gcc, and each variant of
#     them: .ours (cfi2sframe's default output), .for-kernel (cfi2sframe
#     --for kernel), .gnu (built again with sid's GNU as 2.47 --gsframe,
#     the anchor; Debian's libc.a has no .sframe, so only the program's own
#     functions are described), .plain (no .sframe), and two damaged copies
#     of chain.ours (leaf's one FRE moved to leaf's last byte, which the
#     kernel's validation accepts and the first lookup in leaf fails, so
#     the kernel removes the section; moved past leaf's end, which
#     validation refuses at exec); `cfi2sframe verify --for kernel` runs
#     on each (the judge requires ours to pass and the damaged ones to
#     fail; for noreturn, with --json too: its notes, return-at-end
#     among them, on a "limits" line); noreturn's layout is checked
#     (pad_caller's and next_caller's calls end them, padding follows
#     the first, after_next the second directly);
#   - builds goprog.go with go build, CGO_ENABLED=0 -ldflags='-s -w'
#     (static and stripped: its .sframe comes from its .gopclntab alone),
#     as .plain and .for-kernel (cfi2sframe's default output is the same
#     file for it); it runs under reader -i, which samples the Go
#     runtime's other threads too;
#   - builds dyn.c (PIE) with its library libchain.c (libchain.so), and
#     sfreg.c (sfreg.so, to preload: it registers every loaded object's
#     PT_GNU_SFRAME with sframe_register, number
#     KERNEL_ACCEPTANCE_SFRAME_REGISTER_NR, default 473); per variant a
#     directory /lib/v/VARIANT in the guest with libchain.so and
#     libc.so.6: ours and for-kernel (dyn, libchain.so and the host's
#     libc.so.6 converted), gnu (dyn and libchain.so built with GNU as
#     --gsframe, libc.so.6 as the host has it), plain; the guest gets the
#     host's ld.so; each variant runs with sfreg.so preloaded (dyn.V+pre)
#     and without (dyn.V: the libraries' frames fall back to the frame
#     pointer, limit 5);
#   - packs them with busybox into an initramfs whose init runs each under
#     the reader (two software cpu-clock events on the child: one with
#     defer_callchain and defer_output, whose PERF_RECORD_CALLCHAIN_DEFERRED
#     chains come from the kernel's unwind_user, one ordinary, whose chains
#     come from the frame-pointer walk at the sample), writes the chains
#     and each run's kernel log (dmesg -c) to the second serial port and
#     reboots; qemu-system-x86_64 boots it with
#     dyndbg="file kernel/unwind/* +p", so the unwinder's pr_debug lines
#     are logged; each run's standard error (sfreg.so's log) comes back as
#     R lines, the child's executable mappings as M lines;
#   - leaves in OUT: bin/ (the reader and every program run), runs (a
#     label and the arguments per run), verify.log (verify --for kernel's
#     verdicts), root/ (the guest's files: the judge reads the libraries
#     a run's mappings name from there),
#     dynlib/ (the libraries per variant), data.txt (what the guest wrote: the chains, "stat" lines
#     and kernel log of each run), console.log and qemu.log.
#
# arm64 (a tree with arch/arm64/boot/Image, or such an Image): the same,
# built with Debian's cross toolchain (gcc-aarch64-linux-gnu,
# libc6-dev-arm64-cross; lld) and booted with qemu-system-aarch64 -M virt
# -cpu max (TCG; PL011 console on ttyAMA0, the data on a virtio console,
# hvc0). Every C program in eight builds, each with the four variants:
# GNU ld or lld (-fuse-ld=lld), static or dynamic (PIE, the cross gcc's
# default; the initramfs has the cross libc's ld.so and libc.so.6 in /lib,
# and OUT too, in bin/lib), with -mbranch-protection=standard (PAC and BTI)
# or without; labels PROG.BUILD.VARIANT, e.g. chain.lld-dyn-pac.for-kernel.
# GNU ld's static programs have no safe layout for a new program header
# (docs/layout.md), so they are converted with --fragile-layout (a
# "layout ... fragile" line in verify.log says so). The damaged copies are
# made from chain.ld-static.ours; goprog is built with GOARCH=arm64. The
# reader writes each program's executable mappings (M lines), with which
# the judge resolves a PIE program, libc.so.6 and the vDSO (each library
# read from OUT's root/, as the guest had it). dyn, libchain.so and
# sfreg.so as on x86-64, with the cross libc.so.6 converted (a quarter of
# the loop counts).
#
# s390x (a tree with arch/s390/boot/bzImage, or such a bzImage): the same,
# built with Debian's cross toolchain (gcc-s390x-linux-gnu,
# libc6-dev-s390x-cross) and booted with qemu-system-s390x -M
# s390-ccw-virtio -cpu max (TCG; the SCLP VT220 console on ttysclp0, the
# data on a virtio console on the CCW bus, hvc0). Every C program in two
# builds with GNU ld, static and dynamic (PIE; the cross libc's ld64.so.1
# and libc.so.6 in /lib and in bin/lib), each with the four variants;
# labels PROG.BUILD.VARIANT, e.g. chain.dyn.for-kernel; the static ones are
# converted with --fragile-layout, as on arm64. The damaged copies are made
# from chain.static.ours; goprog is built with GOARCH=s390x. The reader
# sets the two perf bits in the big-endian bit-field order (reader.c).
# The Go test (e2e/kernel_test.go, with internal/testing/judge) then resolves every
# chain with the binary's symbols (as nm lists them; .plt stubs as PLT) and
# compares it with the true chain of its innermost function (known by
# construction, internal/testing/judge.KernelTruth), and prints per variant: the
# deferred chains, the share equal to the true chain, the share that stops
# at a known kernel limit (the signal trampoline, which it does not cross;
# a caller frame whose rule names a register, which it reads only in the
# interrupted frame; a return address at the end of a caller that the
# next function follows directly, where verify --for kernel noted
# return-at-end), the rest, the share right through main, the ordinary
# samples for comparison, and the kernel's log lines about sframe; then one
# "ok"/"FAIL"/"info" line per check.
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

if [ $# -eq 0 ] || [ -z "$1" ]; then
	echo "skip: no kernel tree or image given (usage: $prog KDIR|BZIMAGE|IMAGE [OUT]; see the header for the kernel it needs)"
	exit 0
fi
[ $# -le 2 ] || die "usage: $prog KDIR|BZIMAGE|IMAGE [OUT]"

# image_arch FILE: x86_64 for a bzImage (the setup header's "HdrS" at
# 0x202), arm64 for an arm64 Image (its header's magic "ARM\x64" at 56),
# s390x for an s390 bzImage (its entry's "S390EP" at 0x10008).
image_arch() {
	if [ "$(dd if="$1" bs=1 skip=56 count=4 2>/dev/null)" = "ARMd" ]; then
		echo arm64
	elif [ "$(dd if="$1" bs=1 skip=65544 count=6 2>/dev/null)" = "S390EP" ]; then
		echo s390x
	elif [ "$(dd if="$1" bs=1 skip=514 count=4 2>/dev/null)" = "HdrS" ]; then
		echo x86_64
	fi
}
arch=${KERNEL_ACCEPTANCE_ARCH:-}
case $arch in
"" | x86_64 | arm64 | s390x) ;;
*) die "KERNEL_ACCEPTANCE_ARCH=$arch: want x86_64, arm64 or s390x" ;;
esac
kdir=
if [ -d "$1" ]; then
	kdir=$(cd "$1" && pwd)
	if [ -z "$arch" ]; then
		n=0
		for i in arch/x86/boot/bzImage arch/arm64/boot/Image arch/s390/boot/bzImage; do
			[ ! -f "$kdir/$i" ] || n=$((n + 1))
		done
		if [ $n -gt 1 ]; then
			die "$1 has more than one of arch/x86/boot/bzImage, arch/arm64/boot/Image and arch/s390/boot/bzImage: say which with KERNEL_ACCEPTANCE_ARCH=x86_64, arm64 or s390x"
		elif [ -f "$kdir/arch/arm64/boot/Image" ]; then
			arch=arm64
		elif [ -f "$kdir/arch/s390/boot/bzImage" ]; then
			arch=s390x
		else
			arch=x86_64
		fi
	fi
	case $arch in
	x86_64) image=$kdir/arch/x86/boot/bzImage build="make -j2 bzImage" ;;
	arm64) image=$kdir/arch/arm64/boot/Image build="make -j2 ARCH=arm64 CROSS_COMPILE=aarch64-linux-gnu- Image" ;;
	s390x) image=$kdir/arch/s390/boot/bzImage build="make -j2 ARCH=s390 CROSS_COMPILE=s390x-linux-gnu- bzImage" ;;
	esac
	[ -f "$image" ] || die "$1 has no ${image#"$kdir"/}: build the kernel first ($build)"
elif [ -f "$1" ]; then
	image=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
	got=$(image_arch "$image")
	[ -n "$got" ] || die "$1 is not an x86 bzImage, an arm64 Image or an s390 bzImage"
	[ -z "$arch" ] || [ "$arch" = "$got" ] || die "$1 is an $got kernel image, KERNEL_ACCEPTANCE_ARCH says $arch"
	arch=$got
else
	die "$1: no such kernel tree or kernel image"
fi

# What each architecture builds and boots with.
case $arch in
x86_64)
	CC=gcc NM=nm qemu_bin=qemu-system-x86_64 gnu_arch=x86_64 datadev=/dev/ttyS1
	tools="qemu-system-x86_64 gcc nm cpio gzip go"
	install="apt-get install qemu-system-x86 gcc binutils cpio gzip"
	busybox_default=/bin/busybox
	;;
arm64)
	CC=aarch64-linux-gnu-gcc NM=aarch64-linux-gnu-nm qemu_bin=qemu-system-aarch64 gnu_arch=aarch64 datadev=/dev/hvc0
	tools="qemu-system-aarch64 aarch64-linux-gnu-gcc aarch64-linux-gnu-nm ld.lld gcc cpio gzip go curl dpkg-deb"
	install="apt-get install qemu-system-arm gcc-aarch64-linux-gnu libc6-dev-arm64-cross lld gcc cpio gzip curl"
	busybox_default=${XDG_CACHE_HOME:-$HOME/.cache}/cfi2sframe/busybox-arm64/bin/busybox
	sysroot=/usr/aarch64-linux-gnu
	;;
s390x)
	CC=s390x-linux-gnu-gcc NM=s390x-linux-gnu-nm qemu_bin=qemu-system-s390x gnu_arch=s390x datadev=/dev/hvc0
	tools="qemu-system-s390x s390x-linux-gnu-gcc s390x-linux-gnu-nm gcc cpio gzip go curl dpkg-deb"
	install="apt-get install qemu-system-misc gcc-s390x-linux-gnu libc6-dev-s390x-cross gcc cpio gzip curl"
	busybox_default=${XDG_CACHE_HOME:-$HOME/.cache}/cfi2sframe/busybox-s390x/bin/busybox
	sysroot=/usr/s390x-linux-gnu
	;;
esac

# Everything else is required: a missing piece is an error, not a skip.
for t in $tools; do
	command -v "$t" >/dev/null || die "$t is not installed ($install; Go 1.25 or later: see README)"
done
BUSYBOX=${BUSYBOX:-$busybox_default}
if [ "$arch" != x86_64 ] && [ ! -e "$BUSYBOX" ] && [ "$BUSYBOX" = "$busybox_default" ]; then
	# Debian's busybox-static for arm64 or s390x, the host's version, from
	# the archive's pool (the host's apt knows only amd64).
	v=$(dpkg-query -W -f='${Version}' busybox-static 2>/dev/null || apt-cache show busybox-static 2>/dev/null | awk '/^Version:/ { print $2; exit }')
	[ -n "$v" ] || die "cannot tell busybox-static's version (apt-get install busybox-static, or BUSYBOX=a static $arch busybox)"
	deb=busybox-static_${v#*:}_$arch.deb
	note "fetching $deb"
	d=$(dirname "$(dirname "$busybox_default")")
	mkdir -p "$d"
	curl -sSfo "$d/$deb" "${CFI2SFRAME_DEBIAN_MIRROR:-http://deb.debian.org/debian}/pool/main/b/busybox/$deb" || die "cannot download $deb (BUSYBOX=a static $arch busybox)"
	dpkg-deb -x "$d/$deb" "$d" || die "cannot unpack $deb"
fi
[ -x "$BUSYBOX" ] || die "no busybox at $BUSYBOX (apt-get install busybox-static)"
if [ "$arch" = x86_64 ] && "$BUSYBOX" true 2>/dev/null && ldd "$BUSYBOX" >/dev/null 2>&1; then
	die "$BUSYBOX is dynamically linked; the initramfs needs busybox-static's"
fi
tc=$(bash "$here/reference-toolchain.sh" --print 2>/dev/null) ||
	die "the reference toolchain is not installed (bash scripts/reference-toolchain.sh): its GNU as 2.47 builds the --gsframe anchor"
gnu_b=$tc/sid/gcc-$gnu_arch/
[ -x "$gnu_b/as" ] || die "no $gnu_b/as in the reference toolchain"
PERIOD=${KERNEL_ACCEPTANCE_PERIOD:-100000}

if [ -n "${2:-}" ]; then
	mkdir -p "$2" || die "cannot create $2"
	[ -z "$(ls -A "$2")" ] || die "$2 is not empty"
	w=$(cd "$2" && pwd)
else
	w=$(mktemp -d "${TMPDIR:-/tmp}/kernel-acceptance.XXXXXX")
fi
qemu=
cleanup() {
	if [ -n "$qemu" ]; then kill "$qemu" 2>/dev/null || true; fi
}
trap cleanup EXIT
note "artefacts in $w"
echo "$arch" >"$w/arch"

if [ -n "${CFI2SFRAME:-}" ]; then
	c2s=$CFI2SFRAME
else
	(cd "$repo" && go build -o "$w/cfi2sframe" ./cmd/cfi2sframe) || die "go build ./cmd/cfi2sframe failed"
	c2s=$w/cfi2sframe
fi

# The reader sets defer_callchain and defer_output by position (bits 38 and
# 39 of the flags word): check that against the tree's UAPI header.
if [ -n "$kdir" ]; then
	# The tree's perf_event.h alone (the headers it includes are the
	# system's: the tree's raw UAPI headers need "make headers").
	mkdir -p "$w/uapi-inc/linux"
	cp "$kdir/include/uapi/linux/perf_event.h" "$w/uapi-inc/linux/" || die "$kdir has no include/uapi/linux/perf_event.h"
	gcc -I"$w/uapi-inc" -o "$w/uapi" "$src/uapi.c" || die "$kdir/include/uapi/linux/perf_event.h has no defer_callchain/defer_output (not a kernel with deferred call chains)"
	bits=$("$w/uapi")
	[ "$bits" = "38 39" ] || die "defer_callchain/defer_output are bits $bits of perf_event_attr's flags in $kdir, the reader sets 38 39"
fi

# Build the programs.
bin=$w/bin
mkdir -p "$bin"
# build_dyn LIBC: the dynamically linked program, dyn.c (PIE, with $CC)
# with its own library libchain.c, run with ld.so and LIBC (the cross
# libc.so.6 on arm64; "": the host's, which ldd finds, and the host's
# ld.so, which the initramfs gets).
# Per variant a directory of libraries the guest's LD_LIBRARY_PATH names
# (/lib/v/VARIANT): plain (nothing has .sframe), gnu (dyn and libchain.so
# built with GNU as --gsframe; libc.so.6 as Debian ships it, without
# .sframe), ours and for-kernel (dyn, libchain.so and libc.so.6 converted
# by cfi2sframe, default output and --for kernel). sfreg.so, preloaded in
# the "+pre" runs, registers each library's .sframe with sframe_register()
# (the kernel registers only the program's and ld.so's at exec); its
# number is set here, in one place (KERNEL_ACCEPTANCE_SFRAME_REGISTER_NR,
# 473 on both: arm64's table is scripts/syscall.tbl too; the guest's
# SFRAME_REGISTER_NR overrides it at run time).
build_dyn() {
	local libc=$1 v vflag l
	SFRAME_REGISTER_NR=${KERNEL_ACCEPTANCE_SFRAME_REGISTER_NR:-473}
	dynflags="-O2 -fomit-frame-pointer"
	dl=$w/dynlib
	mkdir -p "$dl/plain" "$dl/gnu" "$dl/ours" "$dl/for-kernel"
	# shellcheck disable=SC2086 # dynflags is a list of options
	$CC $dynflags -fPIC -shared -o "$dl/plain/libchain.so" "$src/libchain.c" || die "cannot build libchain.so"
	# shellcheck disable=SC2086
	$CC $dynflags -o "$bin/dyn.plain" "$src/dyn.c" -L"$dl/plain" -lchain || die "cannot build dyn"
	# shellcheck disable=SC2086
	$CC $dynflags -B"$gnu_b" -Wa,--gsframe -fPIC -shared -o "$dl/gnu/libchain.so" "$src/libchain.c" || die "cannot build libchain.so with GNU as --gsframe"
	# shellcheck disable=SC2086
	$CC $dynflags -B"$gnu_b" -Wa,--gsframe -o "$bin/dyn.gnu" "$src/dyn.c" -L"$dl/gnu" -lchain || die "cannot build dyn with GNU as --gsframe"
	$CC -O2 -Wall -fPIC -shared -DSFRAME_REGISTER_NR="$SFRAME_REGISTER_NR" -o "$bin/sfreg.so" "$src/sfreg.c" || die "cannot build sfreg.so"
	interp=$(readelf -lW "$bin/dyn.plain" | sed -n 's/.*Requesting program interpreter: \(.*\)]/\1/p')
	if [ -z "$libc" ]; then
		libc=$(LD_LIBRARY_PATH="$dl/plain" ldd "$bin/dyn.plain" | awk '$1 == "libc.so.6" { print $3 }')
		[ -n "$interp" ] && [ -f "$interp" ] || die "cannot find dyn's interpreter ($interp)"
	fi
	[ -n "$libc" ] && [ -f "$libc" ] || die "cannot find dyn's libc.so.6 ($libc)"
	cp "$libc" "$dl/plain/libc.so.6"
	cp "$libc" "$dl/gnu/libc.so.6"
	"$c2s" -q "$bin/dyn.plain" -o "$bin/dyn.ours" || die "cfi2sframe dyn failed"
	"$c2s" -q --for kernel "$bin/dyn.plain" -o "$bin/dyn.for-kernel" || die "cfi2sframe --for kernel dyn failed"
	for v in ours for-kernel; do
		vflag=
		[ $v = ours ] || vflag="--for kernel"
		# shellcheck disable=SC2086 # vflag is empty or two words
		"$c2s" -q $vflag "$dl/plain/libchain.so" -o "$dl/$v/libchain.so" || die "cfi2sframe $vflag libchain.so failed"
		# shellcheck disable=SC2086
		"$c2s" -q $vflag "$libc" -o "$dl/$v/libc.so.6" || die "cfi2sframe $vflag $libc failed"
	done
	for v in plain gnu ours for-kernel; do
		cp "$bin/dyn.$v" "$bin/dyn.$v+pre"
		for l in libchain.so libc.so.6; do cp "$dl/$v/$l" "$bin/$l.$v"; done
	done
}

# verify_dyn: verify --for kernel on dyn's variants, a line per run
# covering the program and the libraries it runs with.
verify_dyn() {
	local v label
	for v in ours for-kernel gnu; do
		for label in "dyn.$v" "dyn.$v+pre"; do
			if "$c2s" verify --for kernel "$bin/dyn.$v" "$dl/$v/libchain.so" "$dl/$v/libc.so.6" >"$w/v.out" 2>&1; then
				printf 'verify %s pass %s\n' "$label" "$(tr '\n' ' ' <"$w/v.out")" >>"$verify_log"
			else
				printf 'verify %s fail %s\n' "$label" "$(tr '\n' ' ' <"$w/v.out")" >>"$verify_log"
			fi
		done
	done
}

# damage FILE SYMBOL MODE: rewrite the start offset of the one FRE of
# SYMBOL's FDE in FILE's .sframe (V3, through PT_GNU_SFRAME). MODE lookup:
# func_size-1, which the kernel's validation accepts (below func_size,
# sorted) but which leaves every PC below it without an FRE, so the first
# lookup there fails and the kernel removes the section; MODE validate:
# func_size, which __read_fre refuses, so validation refuses the section
# at exec.
damage() {
	local f=$1 sym=$2 mode=$3 addr
	addr=$("$NM" "$f" | awk -v s="$sym" '$3 == s { print $1; exit }')
	[ -n "$addr" ] || die "damage: no symbol $sym in $f"
	(cd "$repo" && go run ./internal/testing/cmd/sframe-damage "$f" "$addr" "$mode")
}
# convert OPTS IN OUT: cfi2sframe, with --fragile-layout where no safe
# layout exists (GNU ld's static AArch64 and s390x programs: .rela.plt
# right after the program headers; see docs/layout.md), noted in
# verify.log.
convert() {
	local in=$2 out=$3
	# shellcheck disable=SC2086 # OPTS is a list of options
	if ! "$c2s" -q $1 "$in" -o "$out" 2>"$w/c.err"; then
		grep -q 'no layout that' "$w/c.err" || die "cfi2sframe $1 $(basename "$in") failed: $(cat "$w/c.err")"
		# shellcheck disable=SC2086
		"$c2s" -q $1 --fragile-layout "$in" -o "$out" 2>/dev/null || die "cfi2sframe $1 --fragile-layout $(basename "$in") failed"
		printf 'layout %s fragile %s\n' "$(basename "$out")" "$(tr '\n' ' ' <"$w/c.err")" >>"$verify_log"
	fi
}
# cross_setup: the C flags and the static reader for arm64 or s390x
# ($CC), and empty verify.log and runs.
cross_setup() {
	cflags="-O2 -fomit-frame-pointer"
	$CC -static -O2 -Wall -o "$bin/reader" "$src/reader.c" || die "cannot build the reader"
	verify_log=$w/verify.log
	: >"$verify_log"
	: >"$w/runs"
}
# build_cross SCALE BUILD...: the four C programs for arm64 or s390x with
# $CC, each in every BUILD (LINKER-LINKING[-pac], as ld-static or
# lld-dyn-pac, or only static or dyn, with GNU ld) and the four variants
# (labels PROG.BUILD.VARIANT), appended to runs with loop counts SCALE
# times arm64's: a quarter of x86-64's, plt's excepted (140 runs under
# TCG, sharing the host's cores: the first full arm64 run, at x86-64's
# counts, gave about 8000 chains a run; plt at a quarter, as few as 10 on
# a quiet host).
build_cross() {
	local scale=$1 p b n opts lld extra
	shift
	for p in chain drap signal plt; do
		extra=
		[ $p != plt ] || extra=-fno-builtin # calls, not folded or inlined string functions
		case $p in
		chain) n=75000000 ;;
		plt) n=3000000 ;;
		*) n=37500000 ;;
		esac
		n=$((n * scale))
		for b in "$@"; do
			opts="$cflags $extra"
			case $b in *static*) opts="$opts -static" ;; esac
			case $b in *-pac) opts="$opts -mbranch-protection=standard" ;; esac
			lld=
			case $b in lld-*) lld="-B$w/lld/ -fuse-ld=lld" ;; esac
			# shellcheck disable=SC2086 # opts and lld are lists of options
			$CC $opts $lld -o "$bin/$p.$b.plain" "$src/$p.c" || die "cannot build $p.$b"
			# shellcheck disable=SC2086
			$CC $opts $lld -B"$gnu_b" -Wa,--gsframe -o "$bin/$p.$b.gnu" "$src/$p.c" || die "cannot build $p.$b with GNU as --gsframe"
			convert "" "$bin/$p.$b.plain" "$bin/$p.$b.ours"
			convert "--for kernel" "$bin/$p.$b.plain" "$bin/$p.$b.for-kernel"
			for v in ours for-kernel gnu plain; do echo "$p.$b.$v $n"; done >>"$w/runs"
		done
	done
}
# cross_go_libs GOARCH N LDSO PKG: goprog for GOARCH (plain and --for
# kernel, N loops), and the cross libc's LDSO and libc.so.6 staged in
# bin/lib for the dynamic programs (PKG installs them).
cross_go_libs() {
	(cd "$src" && GOARCH=$1 CGO_ENABLED=0 go build -ldflags='-s -w' -o "$bin/goprog.plain" goprog.go) || die "cannot build goprog"
	"$c2s" -q --for kernel "$bin/goprog.plain" -o "$bin/goprog.for-kernel" || die "cfi2sframe --for kernel goprog failed"
	printf '%s\n' "goprog.for-kernel $2" "goprog.plain $2" >>"$w/runs"
	mkdir -p "$bin/lib"
	cp "$sysroot/lib/$3" "$sysroot/lib/libc.so.6" "$bin/lib/" || die "no $sysroot/lib/$3 or libc.so.6 (apt-get install $4)"
}
# cross_damaged BASE N: the two damaged copies of BASE.ours, N loops.
cross_damaged() {
	local mode
	for mode in lookup validate; do
		cp "$bin/$1.ours" "$bin/$1.damaged-$mode"
		damage "$bin/$1.damaged-$mode" leaf "$mode" >>"$verify_log" || die "cannot damage $1.ours"
		echo "$1.damaged-$mode $2" >>"$w/runs"
	done
}
# verify_runs: verify --for kernel on every run's program but the plain
# ones and dyn's (verify_dyn), into verify.log: ours must pass, the
# damaged copies must not.
verify_runs() {
	local f
	while read -r f _; do
		case $f in *.plain | dyn.*) continue ;; esac
		if "$c2s" verify --for kernel "$bin/$f" >"$w/v.out" 2>&1; then
			printf 'verify %s pass %s\n' "$f" "$(tr '\n' ' ' <"$w/v.out")" >>"$verify_log"
		else
			printf 'verify %s fail %s\n' "$f" "$(tr '\n' ' ' <"$w/v.out")" >>"$verify_log"
		fi
	done <"$w/runs"
}
case $arch in
x86_64)
	cflags="-static -O2 -fomit-frame-pointer"
	gcc -static -O2 -Wall -o "$bin/reader" "$src/reader.c" || die "cannot build the reader"
	verify_log=$w/verify.log
	: >"$verify_log"
	for p in chain drap signal plt noreturn; do
		extra=
		[ $p != plt ] || extra=-fno-builtin # calls, not folded or inlined string functions
		# shellcheck disable=SC2086 # cflags and extra are lists of options
		gcc $cflags $extra -o "$bin/$p.plain" "$src/$p.c" || die "cannot build $p"
		# shellcheck disable=SC2086
		gcc $cflags $extra -B"$gnu_b" -Wa,--gsframe -o "$bin/$p.gnu" "$src/$p.c" || die "cannot build $p with GNU as --gsframe"
		"$c2s" -q "$bin/$p.plain" -o "$bin/$p.ours" || die "cfi2sframe $p failed"
		"$c2s" -q --for kernel "$bin/$p.plain" -o "$bin/$p.for-kernel" || die "cfi2sframe --for kernel $p failed"
	done
	# noreturn's layout (limit 4): pad_caller's and next_caller's last
	# instruction is their call of spin_pad and spin_next; alignment padding
	# follows pad_caller's, after_next starts right at next_caller's end.
	# noreturn_end FILE FUNC: FUNC's end (address + size, hex); fails unless
	# its last instruction is a call of CALLEE that ends there.
	noreturn_end() {
		local f=$1 fn=$2 callee=$3 addr size end last next
		read -r addr size < <(nm -S "$f" | awk -v s="$fn" '$4 == s && !n++ { print $1, $2 }')
		[ -n "$addr" ] && [ -n "$size" ] || die "noreturn layout: no sized symbol $fn in $f"
		end=$(printf '%x' $((0x$addr + 0x$size)))
		last=$(objdump -d --no-show-raw-insn --start-address=0x"$addr" --stop-address=0x"$end" "$f" | grep -E '^ +[0-9a-f]+:' | tail -n 1)
		case $last in
		*"call "*"<$callee>"*) ;;
		*) die "noreturn layout: $fn's last instruction in $f is not its call of $callee: $last (the compiler changed the layout limit 4 needs)" ;;
		esac
		# The next instruction starts at the end: the call is the last.
		next=$(objdump -d --no-show-raw-insn --start-address=0x"$end" --stop-address=$((0x$end + 16)) "$f" | awk '/^ +[0-9a-f]+:/ && !n++ { print $1 }')
		[ "${next%:}" = "$end" ] || die "noreturn layout: $fn's call in $f does not end at $fn's end 0x$end"
		echo "$end"
	}
	for v in plain gnu; do
		f=$bin/noreturn.$v
		pend=$(noreturn_end "$f" pad_caller spin_pad) || exit 1
		nend=$(noreturn_end "$f" next_caller spin_next) || exit 1
		after=$(nm "$f" | awk '$3 == "after_next" && !n++ { print $1 }')
		[ $((0x$after)) -eq $((0x$nend)) ] || die "noreturn layout: after_next at 0x$after, not right at next_caller's end 0x$nend in $f"
		following=
		while read -r a t _; do
			case $t in [tTwW]) ;; *) continue ;; esac
			if [ $((0x$a)) -ge $((0x$pend)) ]; then following=$a; break; fi
		done < <(nm -n "$f")
		[ -n "$following" ] && [ $((0x$following)) -gt $((0x$pend)) ] || die "noreturn layout: no padding after pad_caller's end 0x$pend in $f (the next function at 0x$following)"
		note "noreturn.$v: pad_caller ends at 0x$pend with its call, padding to 0x$(printf %x $((0x$following))); next_caller ends at 0x$nend with its call, after_next starts there"
	done
	# The Go program: static (no cgo) and stripped (no symbols, no DWARF: the
	# function table is its only call-frame information).
	(cd "$src" && CGO_ENABLED=0 go build -ldflags='-s -w' -o "$bin/goprog.plain" goprog.go) || die "cannot build goprog"
	"$c2s" -q --for kernel "$bin/goprog.plain" -o "$bin/goprog.for-kernel" || die "cfi2sframe --for kernel goprog failed"

	build_dyn ""

	for mode in lookup validate; do
		cp "$bin/chain.ours" "$bin/chain.damaged-$mode"
		damage "$bin/chain.damaged-$mode" leaf "$mode" >>"$verify_log" || die "cannot damage chain.ours"
	done

	# verify --for kernel: ours must pass, the damaged copies must not.
	verify_dyn
	for f in chain.ours drap.ours signal.ours plt.ours noreturn.ours chain.for-kernel drap.for-kernel signal.for-kernel plt.for-kernel noreturn.for-kernel goprog.for-kernel chain.gnu drap.gnu signal.gnu plt.gnu noreturn.gnu chain.damaged-lookup chain.damaged-validate; do
		if "$c2s" verify --for kernel "$bin/$f" >"$w/v.out" 2>&1; then
			printf 'verify %s pass %s\n' "$f" "$(tr '\n' ' ' <"$w/v.out")" >>"$verify_log"
		else
			printf 'verify %s fail %s\n' "$f" "$(tr '\n' ' ' <"$w/v.out")" >>"$verify_log"
		fi
	done

	# noreturn: verify's notes, each one (--json, on one line), for the
	# judge's limit 4: it takes a chain stopped at next_caller's end for a
	# known limit only where verify noted return-at-end there.
	for f in noreturn.ours noreturn.for-kernel noreturn.gnu; do
		"$c2s" verify --for kernel --json "$bin/$f" >"$w/v.out" 2>/dev/null || true
		printf 'limits %s %s\n' "$f" "$(tr -d '\n' <"$w/v.out")" >>"$verify_log"
	done

	# The runs: LABEL ARGS (the loop counts keep each phase near a second;
	# plt's twice that since a run of 2026-12-07 on a loaded host sampled
	# none of its .plt stubs in 42 chains).
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
plt.ours 6000000
plt.for-kernel 6000000
plt.gnu 6000000
plt.plain 6000000
goprog.for-kernel 300000000
goprog.plain 300000000
dyn.ours+pre 300000000 800000
dyn.for-kernel+pre 300000000 800000
dyn.gnu+pre 300000000 800000
dyn.plain+pre 300000000 800000
dyn.ours 300000000 800000
dyn.for-kernel 300000000 800000
dyn.gnu 300000000 800000
dyn.plain 300000000 800000
noreturn.ours 150000000
noreturn.for-kernel 150000000
noreturn.gnu 150000000
noreturn.plain 150000000
EOF
	;;
arm64)
	cross_setup
	# lld through gcc: the cross gcc looks for ld.lld next to its -B paths.
	mkdir -p "$w/lld"
	ln -sf "$(command -v ld.lld)" "$w/lld/ld.lld"
	# The builds: linker (GNU ld, lld), static or dynamic (PIE, the cross
	# gcc's default), and with PAC and BTI (-mbranch-protection=standard) or
	# without. The dynamic programs run with the cross libc's ld.so and
	# libc.so.6, which the initramfs has in /lib (staged in OUT's bin/lib;
	# the judge reads them from OUT's root/lib); neither has .sframe, and
	# the kernel registers only the program's and ld.so's.
	build_cross 1 ld-static ld-dyn lld-static lld-dyn ld-static-pac ld-dyn-pac lld-static-pac lld-dyn-pac
	# The Go program, as on x86-64.
	cross_go_libs arm64 75000000 ld-linux-aarch64.so.1 libc6-dev-arm64-cross
	# dyn, as on x86-64, with the cross libc.so.6 (a quarter of the loop
	# counts).
	build_dyn "$sysroot/lib/libc.so.6"
	for v in ours for-kernel gnu plain; do echo "dyn.$v+pre 75000000 200000"; done >>"$w/runs"
	for v in ours for-kernel gnu plain; do echo "dyn.$v 75000000 200000"; done >>"$w/runs"
	cross_damaged chain.ld-static 75000000
	# verify --for kernel: ours must pass, the damaged copies must not.
	verify_dyn
	verify_runs
	;;
s390x)
	# Debian's cross gcc and GNU ld, static and dynamic (PIE, the cross
	# gcc's default; the initramfs has the cross libc's ld64.so.1 and
	# libc.so.6 in /lib, and OUT too, in bin/lib); labels PROG.BUILD.VARIANT
	# as on arm64, BUILD static or dyn.
	cross_setup
	# Twice arm64's counts: under TCG a run here gave about a hundred
	# deferred chains at arm64's (the whole guest: 173 s).
	build_cross 2 static dyn
	cross_go_libs s390x 150000000 ld64.so.1 libc6-dev-s390x-cross
	cross_damaged chain.static 150000000
	verify_runs
	;;
esac

# The initramfs.
root=$w/root
mkdir -p "$root/bin" "$root/proc" "$root/sys" "$root/dev" "$root/tests"
cp "$BUSYBOX" "$root/bin/busybox"
# dyn's interpreter (x86-64: the host's; arm64's comes from bin/lib),
# sfreg.so and the libraries per variant.
if [ "$arch" = x86_64 ]; then
	mkdir -p "$root$(dirname "$interp")"
	cp "$interp" "$root$interp"
fi
if [ -f "$bin/sfreg.so" ]; then # dyn is built (x86-64, arm64)
	mkdir -p "$root/lib/v"
	cp "$bin/sfreg.so" "$root/lib/sfreg.so"
	for v in plain gnu ours for-kernel; do cp -r "$dl/$v" "$root/lib/v/$v"; done
fi
cp "$bin/reader" "$root/bin/reader"
while read -r label _; do cp "$bin/$label" "$root/tests/$label"; done <"$w/runs"
cp "$w/runs" "$root/tests/runs"
if [ -d "$bin/lib" ]; then
	mkdir -p "$root/lib"
	cp "$bin/lib/"* "$root/lib/"
fi
cat >"$root/init" <<EOF
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
exec >$datadev 2>&1
echo "boot \$(uname -r) \$(uname -v)"
echo "dyndbg enabled \$(grep -c 'kernel/unwind/.* =p' /proc/dynamic_debug/control) of \$(grep -c 'kernel/unwind/' /proc/dynamic_debug/control) kernel/unwind callsites"
dmesg | grep -i -E 'sframe|unwind' | sed 's/^/B /'
dmesg -c >/dev/null
while read -r label args; do
	case \$label in
	goprog.*) opts=-i ;; # every thread of the Go runtime
	*) opts= ;;
	esac
	# dyn.VARIANT[+pre]: the variant's libraries; +pre: sfreg.so preloaded
	env=
	case \$label in
	dyn.*+pre) v=\${label#dyn.}; env="LD_LIBRARY_PATH=/lib/v/\${v%+pre} LD_PRELOAD=/lib/sfreg.so" ;;
	dyn.*) env="LD_LIBRARY_PATH=/lib/v/\${label#dyn.}" ;;
	esac
	env \$env /bin/reader \$opts -p $PERIOD "\$label" "/tests/\$label" \$args 2>/stderr.log
	sed 's/^/R /' /stderr.log
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
if [ "$arch" != x86_64 ]; then
	[ -z "$accel" ] || [ "$accel" = tcg ] || die "KERNEL_ACCEPTANCE_ACCEL=$accel: an $arch kernel runs under TCG only here"
	accel=tcg
elif [ -z "$accel" ]; then
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

note "booting $image ($arch, $accel)"
console=$w/console.log data=$w/data.log
: >"$data"
case $arch in
x86_64)
	# shellcheck disable=SC2086 # accel_args is a list of options
	qemu-system-x86_64 $accel_args -m 512M -smp 1 -nographic -no-reboot -monitor none \
		-kernel "$image" -initrd "$w/initrd.gz" \
		-append 'console=ttyS0 loglevel=4 panic=-1 dyndbg="file kernel/unwind/* +p"' \
		-serial "file:$console" -serial "file:$data" >"$w/qemu.log" 2>&1 &
	;;
arm64)
	# The virt board has one PL011 (the console); the data go out on a
	# virtio console (hvc0). -cpu max has pointer authentication, which
	# the kernel enables for user space when built with ARM64_PTR_AUTH;
	# pauth-impdef=on makes TCG's PAC fast (an IMPLEMENTATION DEFINED
	# algorithm instead of QARMA). KERNEL_ACCEPTANCE_CPU overrides it
	# (cortex-a57: no PAC).
	qemu-system-aarch64 -M virt -cpu "${KERNEL_ACCEPTANCE_CPU:-max,pauth-impdef=on}" -accel tcg \
		-m 512M -smp 1 -nographic -no-reboot -monitor none \
		-kernel "$image" -initrd "$w/initrd.gz" \
		-append 'console=ttyAMA0 loglevel=4 panic=-1 dyndbg="file kernel/unwind/* +p"' \
		-serial "file:$console" \
		-device virtio-serial-device -chardev "file,id=data,path=$data" -device virtconsole,chardev=data \
		>"$w/qemu.log" 2>&1 &
	;;
s390x)
	# The s390-ccw-virtio machine: the first -serial is the SCLP VT220
	# console (ttysclp0), the data go out on a virtio console (hvc0) on
	# the CCW bus. -cpu max: what TCG emulates.
	qemu-system-s390x -M s390-ccw-virtio -cpu max -accel tcg \
		-m 512M -smp 1 -nographic -no-reboot -monitor none \
		-kernel "$image" -initrd "$w/initrd.gz" \
		-append 'console=ttysclp0 loglevel=4 panic=-1 dyndbg="file kernel/unwind/* +p"' \
		-serial "file:$console" \
		-device virtio-serial-ccw -chardev "file,id=data,path=$data" -device virtconsole,chardev=data \
		>"$w/qemu.log" 2>&1 &
	;;
esac
qemu=$!
# The guest writes "boot" first and "all done" last; give up when the
# first does not come within BOOT_TIMEOUT seconds or the runs take longer
# than RUN_TIMEOUT.
boot_timeout=${KERNEL_ACCEPTANCE_BOOT_TIMEOUT:-180} run_timeout=${KERNEL_ACCEPTANCE_RUN_TIMEOUT:-}
if [ -z "$run_timeout" ]; then
	# x86-64: 32 runs, arm64: 140, s390x: 38.
	case $arch in x86_64) run_timeout=900 ;; *) run_timeout=3600 ;; esac
fi
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
note "artefacts in $w: CFI2SFRAME_KERNEL_RUN=$w go test ./e2e -run Kernel -v judges them"
