#!/usr/bin/env bash
# rootfs.sh — build, once, the Debian root file system tarball that the
# tree conversion is checked and timed on (e2e/rootfs_test.go,
# bench/rootfs.sh): bookworm, variant minbase, plus packages whose files
# carry metadata that a copy easily loses:
#   iputils-ping     usr/bin/ping with the file capability cap_net_raw=ep
#                    (xattr security.capability, set by its postinst
#                    with libcap2-bin's setcap)
#   passwd           usr/bin/chage and expiry setgid, group shadow (42);
#                    usr/sbin/unix_chkpwd (libpam-modules-bin) the same
#   dbus             usr/lib/dbus-1.0/dbus-daemon-launch-helper setuid,
#                    group messagebus, mode 04754
#   openssh-client   usr/bin/ssh-agent setgid _ssh, ssh-keysign setuid
#   libcap2-bin      getcap and setcap inside the root file system
# besides what any Debian system has: setuid programs (su, mount, passwd),
# files of group shadow, utmp and others (etc/shadow, var/log/wtmp), a
# 0700 root directory, ~680 symbolic links (bin -> usr/bin), hard links
# (usr/bin/perl, perl5.36.0), empty directories and, from mmdebstrap,
# the character devices of dev/. About 7200 regular files, ~800 of
# them ELF; no POSIX ACLs, no user.* attributes, whole-second times.
#
# It runs, as root,
#   mmdebstrap --mode=root --variant=minbase --include=PACKAGES bookworm TAR MIRROR
# (about 20 s and 190 MB here), writing to a temporary name in the cache
# directory and renaming it to TAR, so TAR is complete whenever it exists.
# mmdebstrap writes a pax tarball with the extended attributes; extract
# it with
#   tar --xattrs --xattrs-include='*' --acls --numeric-owner -xpf TAR
# or the capabilities are lost. The Debian package mmdebstrap is
# installed with apt-get when missing.
#
# Usage: scripts/rootfs.sh [--print | --force]
#   (none)    build TAR unless it exists; a quick no-op when it does
#   --print   print TAR if it exists, else fail with a message
#   --force   build TAR again even if it exists
# TAR is $CFI2SFRAME_ROOTFS, or
# ${XDG_CACHE_HOME:-$HOME/.cache}/cfi2sframe/rootfs/bookworm-minbase.tar.
# The archive is $CFI2SFRAME_DEBIAN_MIRROR (default http://deb.debian.org/debian).
#
# Debian's archive keeps only the current version of each bookworm package,
# so the tarball is not pinned; TAR.packages lists the name and version of
# every package in it (from its var/lib/dpkg/status, written at build time).
set -euo pipefail

prog=rootfs.sh
die() { printf '%s: %s\n' "$prog" "$*" >&2; exit 1; }
note() { printf '%s: %s\n' "$prog" "$*" >&2; }

SUITE=bookworm
TAR=${CFI2SFRAME_ROOTFS:-${XDG_CACHE_HOME:-$HOME/.cache}/cfi2sframe/rootfs/$SUITE-minbase.tar}
MIRROR=${CFI2SFRAME_DEBIAN_MIRROR:-http://deb.debian.org/debian}
INCLUDE=iputils-ping,openssh-client,libcap2-bin,passwd,dbus

installed() { [ -s "$TAR" ]; }

install_mmdebstrap() {
	command -v mmdebstrap >/dev/null && return 0
	command -v apt-get >/dev/null || die "mmdebstrap not found and no apt-get to install it"
	note "installing mmdebstrap (apt-get)"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends mmdebstrap >/dev/null 2>&1 || {
		apt-get update -qq || true
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends mmdebstrap >/dev/null ||
			die "apt-get install mmdebstrap failed"
	}
	command -v mmdebstrap >/dev/null || die "mmdebstrap still not found after installing it"
}

# The temporary tarball and log, removed on exit unless renamed into place.
tmp="" log=""
build() {
	local dir t0
	[ "$(id -u)" = 0 ] || die "building the root file system needs root (mmdebstrap --mode=root)"
	install_mmdebstrap
	dir=$(dirname "$TAR")
	mkdir -p "$dir"
	# mmdebstrap picks the format from the name: keep .tar at the end.
	tmp="$dir/.$(basename "$TAR" .tar).$$.tar"
	log="$tmp.log"
	trap 'rm -f "$tmp" "$log" "$tmp.packages"' EXIT
	note "building $TAR: mmdebstrap $SUITE minbase + $INCLUDE from $MIRROR"
	t0=$EPOCHREALTIME
	if ! mmdebstrap --mode=root --variant=minbase --format=tar --include="$INCLUDE" \
		"$SUITE" "$tmp" "$MIRROR" >"$log" 2>&1; then
		tail -40 "$log" >&2
		die "mmdebstrap failed (log above)"
	fi
	# The fixture is only worth its name with ping and its capability
	# inside (a pax header record, in the clear).
	tar -tf "$tmp" ./usr/bin/ping >/dev/null 2>&1 || die "the tarball has no ./usr/bin/ping"
	grep -aq 'SCHILY.xattr.security.capability' "$tmp" ||
		die "the tarball has no file capability (security.capability): iputils-ping's postinst did not setcap"
	tar -xOf "$tmp" ./var/lib/dpkg/status |
		awk '/^Package: /{p=$2} /^Version: /{print p, $2}' | sort >"$tmp.packages"
	mv "$tmp.packages" "$TAR.packages"
	mv "$tmp" "$TAR"
	rm -f "$log"
	trap - EXIT
	note "built $TAR ($(du -h "$TAR" | cut -f1), $(wc -l <"$TAR.packages") packages) in $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN {printf "%.0f", b - a}') s"
}

mode=install force=0
for arg in "$@"; do
	case $arg in
	--print) mode=print ;;
	--force) force=1 ;;
	-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown argument $arg (see --help)" ;;
	esac
done

case $mode in
print)
	installed || die "$TAR not found (run scripts/$prog as root)"
	echo "$TAR"
	;;
install)
	if [ "$force" = 1 ] || ! installed; then build; fi
	;;
esac
exit 0
