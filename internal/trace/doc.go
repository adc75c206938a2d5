// Package trace is the sampling profiler behind cfi2sframe trace: it
// seizes every thread of a process with ptrace, interrupts them at a
// fixed rate, reads their registers and walks each stack with the .sframe
// of the ELF files the process maps (unwind.Step, load bias per mapping;
// a file without .sframe gets one converted from its CFI in memory by
// Options.Convert, once per file), optionally checking every step against
// the files' DWARF CFI, and writes pprof profiles and folded stacks.
// Linux and x86-64 only.
package trace
