//go:build linux

package trace

import (
	"golang.org/x/sys/unix"

	"github.com/cfi2sframe/cfi2sframe/arch"
	"github.com/cfi2sframe/cfi2sframe/unwind"
)

// supported says whether this build can sample processes.
const supported = true

// topFrame reads a stopped thread's registers into the topmost frame:
// every general register, for flexible FDEs whose rules name one.
func topFrame(tid int) (unwind.Frame, error) {
	var r unix.PtraceRegs
	if err := unix.PtraceGetRegs(tid, &r); err != nil {
		return unwind.Frame{}, err
	}
	f := unwind.Topmost(arch.AMD64, r.Rip, r.Rsp, r.Rbp, 0)
	for n, v := range [...]uint64{r.Rax, r.Rdx, r.Rcx, r.Rbx, r.Rsi, r.Rdi, r.Rbp, r.Rsp,
		r.R8, r.R9, r.R10, r.R11, r.R12, r.R13, r.R14, r.R15} {
		f.SetReg(uint32(n), v)
	}
	return f, nil
}
