package codeflow

import (
	"runtime"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestNoReturnSet: the functions that never return are found as a least
// fixed point: a trap, a wrapper around it, a tail call to the wrapper
// (one round each), and only those; a recursion with a return, an
// indirect jump, a branch around the call, a tail call to a function
// that returns and a call to the named abort's neighbour all return.
// The set is the same on one CPU and on many.
func TestNoReturnSet(t *testing.T) {
	im := assemble(t, `
fn die
	ud2
fn wrap
	sub $8, %rsp
	call die
fn wrap2
	jmp wrap
fn spin
	jmp spin
fn m1
	call m2
	ret
fn m2
	call m1
	ret
fn ind
	jmp *%rax
fn cond
	test %edi, %edi
	je 1f
	call die
1:	ret
fn tailret
	jmp cond
fn named
	call abort
fn abort
	ret
`)
	abort := im.syms["abort"]
	im.code.NoReturn = func(a uint64) bool { return a == abort }
	want := map[uint64]bool{}
	for _, n := range []string{"die", "wrap", "wrap2", "spin", "named"} {
		want[im.syms[n]] = true
	}
	for _, procs := range []int{1, 4} {
		old := runtime.GOMAXPROCS(procs)
		got := noReturnSet(im.code, arches[im.code.Machine])
		runtime.GOMAXPROCS(old)
		if d := cmp.Diff(want, got); d != "" {
			names := map[uint64]string{}
			for n, a := range im.syms {
				names[a] = n
			}
			for a := range got {
				t.Logf("got %s", names[a])
			}
			t.Errorf("GOMAXPROCS %d: (-want +got)\n%s", procs, d)
		}
	}
	c := InferNoReturn(im.code)
	for _, n := range []string{"wrap2", "abort"} {
		if !c.NoReturn(im.syms[n]) {
			t.Errorf("InferNoReturn: %s taken to return", n)
		}
	}
	if c.NoReturn(im.syms["tailret"]) {
		t.Error("InferNoReturn: tailret taken not to return")
	}
}
