// Package judge judges what the acceptance harnesses record, for the e2e
// tests that run them: scripts/kernel-acceptance.sh boots a kernel with
// the SFrame user unwinder and records the call chains it wrote for the
// test programs (Kernel: each chain resolved with the program's symbols
// as nm lists them and compared with the true chain of its innermost
// function, KernelTruth); scripts/glibc-acceptance.sh runs a program
// under a glibc built with --enable-sframe and records the traces its
// backtrace() and libgcc_s's DWARF unwinder give (Glibc: the traces
// compared). Both return the report the harness prints and one Check per
// property, "ok", "FAIL" or "info". The rules are those the scripts' awk
// and shell applied before (docs/acceptance.md, "How a chain is judged").
package judge
