package trace

import (
	"time"

	"golang.org/x/sys/unix"
)

// processRead reads another process's memory with process_vm_readv.
func processRead(pid int, dst []byte, addr uint64) (int, error) {
	local := []unix.Iovec{{Base: &dst[0], Len: uint64(len(dst))}}
	remote := []unix.RemoteIovec{{Base: uintptr(addr), Len: len(dst)}}
	return unix.ProcessVMReadv(pid, local, remote, 0)
}

// threadCPU is the CPU time of the calling OS thread (the tracer's, which
// is locked): unlike the wall clock it does not count time the thread
// waited for a CPU on a loaded machine.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// processCPU is the user and system CPU time of the whole tracer, every
// thread of it.
func processCPU() time.Duration {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
