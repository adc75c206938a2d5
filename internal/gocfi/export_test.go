package gocfi

import "debug/elf"

// Machine and Machines give the tests of package gocfi_test (which
// import cfi, which imports gocfi) the machine table.
type Machine struct {
	SP, RA uint64
	HasLR  bool
}

var Machines = func() map[elf.Machine]Machine {
	out := map[elf.Machine]Machine{}
	for m, d := range machines {
		out[m] = Machine{d.sp, d.ra, d.hasLR}
	}
	return out
}()
