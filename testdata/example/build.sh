#!/usr/bin/env bash
# Rebuilds the README's example program: gcc with the reference toolchain's
# sid binutils (scripts/reference-toolchain.sh), WITHOUT -Wa,--gsframe, so
# that it has .eh_frame but no .sframe.
set -euo pipefail
cd "$(dirname "$0")"
root=$(bash ../../scripts/reference-toolchain.sh --print)
gcc -O2 -B"$root/sid/gcc-x86_64/" -o hello hello.c
