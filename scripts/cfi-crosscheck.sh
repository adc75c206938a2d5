#!/usr/bin/env bash
# Cross-check cfi's CFA-program interpreter against binutils' own,
# `readelf --debug-dump=frames-interp` (the reference toolchain's sid
# readelf), FDE by FDE and PC by PC: CFA and every register column readelf
# prints (the return address and callee-saved registers among them).
#
#   scripts/cfi-crosscheck.sh [PATH...]     default: /usr/bin /usr/lib/x86_64-linux-gnu
#                                           (x86-64, AArch64 and s390x files are
#                                           compared: /usr/s390x-linux-gnu/lib,
#                                           14,532 FDEs, all agree)
#   scripts/cfi-crosscheck.sh --arm64-pac   Debian trixie arm64 libraries built with
#                                           -mbranch-protection (negate_ra_state),
#                                           downloaded into the cache, plus
#                                           /usr/aarch64-linux-gnu/lib when present
#
# Prints: files, FDEs, agreeing, differing by reason (with an example),
# FDEs only one side could read. Exits 1 on any difference. Changes nothing
# on the system: packages are fetched with a private apt configuration.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(bash scripts/reference-toolchain.sh --print)
bash scripts/reference-toolchain.sh >/dev/null
readelf="$root/sid/bin/x86_64-readelf"
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/cficheck" ./internal/testing/cficheck/cmd/cficheck

paths=("$@")
if [ "${1:-}" = "--arm64-pac" ]; then
	cache="${CFI2SFRAME_TOOLCHAIN:-$HOME/.cache/cfi2sframe/toolchain}/arm64-pac"
	if [ ! -f "$cache/done" ]; then
		st="$cache/apt"
		mkdir -p "$st/lists/partial" "$st/cache/archives/partial" "$st/state" "$cache/debs" "$cache/root"
		echo "deb [arch=arm64] http://deb.debian.org/debian trixie main" >"$st/sources.list"
		APT=(-o "Dir::Etc::SourceList=$st/sources.list" -o Dir::Etc::SourceParts=/dev/null
			-o "Dir::State=$st/state" -o "Dir::State::Lists=$st/lists"
			-o Dir::State::Status=/dev/null -o "Dir::Cache=$st/cache"
			-o Dir::Etc::Preferences=/dev/null -o Dir::Etc::PreferencesParts=/dev/null
			-o APT::Architecture=arm64 -o APT::Architectures::=arm64
			-o Debug::NoLocking=1 -o APT::Sandbox::User="$(id -un)")
		apt-get "${APT[@]}" -q update >/dev/null
		(cd "$cache/debs" && apt-get "${APT[@]}" -q download \
			libc6 libstdc++6 libgcc-s1 zlib1g libssl3t64 libzstd1 liblzma5 libsqlite3-0 libcurl4t64 libxml2 >/dev/null)
		for d in "$cache"/debs/*.deb; do dpkg-deb -x "$d" "$cache/root"; done
		touch "$cache/done"
	fi
	paths=("$cache/root")
	[ -d /usr/aarch64-linux-gnu/lib ] && paths+=(/usr/aarch64-linux-gnu/lib)
	# How many FDEs use DW_CFA_AARCH64_negate_ra_state (0x2d)?
	n=0
	while IFS= read -r f; do
		if "$readelf" --debug-dump=frames "$f" 2>/dev/null | grep -q "DW_CFA_AARCH64_negate_ra_state\|DW_CFA_GNU_window_save"; then n=$((n + 1)); fi
	done < <(find "${paths[@]}" -type f -name '*.so*')
	echo "libraries using negate_ra_state: $n"
elif [ ${#paths[@]} -eq 0 ]; then
	paths=(/usr/bin /usr/lib/x86_64-linux-gnu)
fi
"$bin/cficheck" -readelf "$readelf" "${paths[@]}"
