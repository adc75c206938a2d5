#!/usr/bin/env bash
# libsframe as a second reader on big inputs: converts each FILE to SFrame
# V3, V2 and V2+PCREL and compares libsframe 2.47.50's and 2.44's
# sframe_find_fre with our Table.Lookup at every PC of every function
# (go test ./internal/testing/libsframecheck -run TestLibsframeAgreesOnFiles).
# Prints per file and in total, per libsframe version and format: PCs,
# agreements and each known libsframe mistake's count; exit status 1 on
# any other difference.
#
#   scripts/libsframe-agreement.sh [FILE...]
#   default: libc.so.6, libstdc++.so.6 and the largest libLLVM*.so* present
set -euo pipefail
cd "$(dirname "$0")/.."
files=("$@")
if [ ${#files[@]} -eq 0 ]; then
	for f in /lib/x86_64-linux-gnu/libc.so.6 /usr/lib/x86_64-linux-gnu/libstdc++.so.6 \
		"$(ls -S /usr/lib/x86_64-linux-gnu/libLLVM*.so* 2>/dev/null | head -1 || true)"; do
		[ -n "$f" ] && [ -f "$f" ] && files+=("$(readlink -f "$f")")
	done
fi
[ ${#files[@]} -gt 0 ] || { echo "libsframe-agreement.sh: no input files" >&2; exit 2; }
bash scripts/reference-toolchain.sh >/dev/null
CFI2SFRAME_TOOLCHAIN="$(bash scripts/reference-toolchain.sh --print)"
export CFI2SFRAME_TOOLCHAIN CFI2SFRAME_REQUIRE_TOOLCHAIN=1
CFI2SFRAME_LIBSFRAME_FILES="${files[*]}" go test -count=1 -timeout 0 -v \
	-run '^TestLibsframeAgreesOnFiles$' ./internal/testing/libsframecheck |
	grep -E 'libsframecheck_test|^(---|FAIL|ok|PASS)' | grep -v -- '--- PASS'
