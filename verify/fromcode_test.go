package verify

import (
	"testing"

	"github.com/cfi2sframe/cfi2sframe/cfi"
	"github.com/cfi2sframe/cfi2sframe/convert"
	"github.com/cfi2sframe/cfi2sframe/internal/codeentry"
	"github.com/cfi2sframe/cfi2sframe/internal/codeflow"
	"github.com/cfi2sframe/cfi2sframe/internal/pltfind"
	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// checkCode runs Check as the verify command does for a file with code
// no CFI covers: the instructions loaded for the functions described
// from them.
func (c converted) checkCode(t *testing.T, data []byte) *Result {
	t.Helper()
	tb, err := sframe.Open(data, c.addr)
	if err != nil {
		t.Fatal(err)
	}
	st, err := cfi.Open(c.f.ELF)
	if err != nil {
		t.Fatal(err)
	}
	code, _, err := codeentry.Load(c.f, codeentry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	code = codeflow.InferNoReturn(code)
	return check(input{Machine: c.f.ELF.Machine, Order: c.f.ELF.ByteOrder, SFrame: tb, Stream: st, Symbol: c.f.Symbolizer(),
		PLTs: pltfind.Sections(c.f.ELF), List: 50, Code: func() *codeflow.Code { return code }})
}

// symbol is the address of the named function of c's symbol table.
func (c converted) symbol(t *testing.T, name string) uint64 {
	t.Helper()
	syms, err := c.f.ELF.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range syms {
		if s.Name == name {
			return s.Value
		}
	}
	t.Fatalf("no symbol %s", name)
	return 0
}

// TestFromCodeKinds: the functions of the hand-written corpus without
// CFI, converted with FromCode, are checked against their instructions.
// jump_table_far's table is bounded on a block placed after it, which
// the walk follows and the straight-line check does not: one Unproven
// finding at its jump, counted apart, and the file still agrees. A row
// made wrong (push_pop's CFA after its first push one word off) is a
// FromCode finding, and the file no longer agrees.
func TestFromCodeKinds(t *testing.T) {
	c := convertFile(t, "../testdata/fromcode/x86_64-nocfi", convert.Options{FromCode: true})
	far := c.symbol(t, "jump_table_far")
	res := c.checkCode(t, c.data)
	if n := count(res, FromCode); n != 0 || !res.Agree {
		t.Fatalf("as converted: %d from-code findings, agree %v: %v", n, res.Agree, res.Findings)
	}
	if res.FromCode < 15 {
		t.Errorf("%d functions checked against their instructions, want the corpus's 15 or more", res.FromCode)
	}
	var unproven []Finding
	for _, f := range res.Findings {
		if f.Kind == Unproven {
			unproven = append(unproven, f)
		}
	}
	if res.Unproven != 1 || len(unproven) != 1 || unproven[0].Func != far || unproven[0].PC <= far {
		t.Fatalf("unproven: count %d, listed %v; want one, in jump_table_far at %#x", res.Unproven, unproven, far)
	}

	pp := c.symbol(t, "push_pop")
	funcs := c.sec.Functions()
	broken := false
	for i := range funcs {
		if funcs[i].Start == pp && len(funcs[i].Rows) > 1 {
			funcs[i].Rows[1].CFA.Offset += 8
			broken = true
		}
	}
	if !broken {
		t.Fatalf("push_pop at %#x: no function with two rows", pp)
	}
	o := c.sec.Options()
	o.Addr = c.addr
	b, err := sframe.Encode(funcs, o)
	if err != nil {
		t.Fatal(err)
	}
	res = c.checkCode(t, b)
	if res.Agree || count(res, FromCode) == 0 {
		t.Fatalf("a wrong row in push_pop: agree %v, findings %v", res.Agree, res.Findings)
	}
	for _, f := range res.Findings {
		if f.Kind == FromCode && f.Func != pp {
			t.Errorf("finding outside push_pop: %+v", f)
		}
	}
}
