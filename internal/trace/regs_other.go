//go:build linux && !amd64

package trace

import (
	"errors"

	"github.com/cfi2sframe/cfi2sframe/unwind"
)

// supported says whether this build can sample processes: the sampler
// reads x86-64 registers only (the AArch64 unwinder is tested on captured
// stacks).
const supported = false

func topFrame(tid int) (unwind.Frame, error) {
	return unwind.Frame{}, errors.New("trace samples x86-64 processes only")
}
