package acceptance

import (
	"encoding/binary"
	"slices"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/internal/sfsection"
	"github.com/cfi2sframe/cfi2sframe/sframe"
)

const secAddr = 0x2000

var (
	sp    = sframe.Loc{Kind: sframe.LocReg, Reg: 7, Offset: 8}
	sp16  = sframe.Loc{Kind: sframe.LocReg, Reg: 7, Offset: 16}
	fpC16 = sframe.Loc{Kind: sframe.LocCFA, Offset: -16}
)

// amd64Funcs is a small well-formed program: two functions, the second
// with an FP save.
func amd64Funcs() []sframe.Function {
	return []sframe.Function{
		{Start: 0x1000, Size: 0x10, Rows: []sframe.Row{{Start: 0, CFA: sp, RA: sframe.Loc{Kind: sframe.LocFixed, Offset: -8}}}},
		{Start: 0x1010, Size: 0x20, Rows: []sframe.Row{
			{Start: 0, CFA: sp, RA: sframe.Loc{Kind: sframe.LocFixed, Offset: -8}},
			{Start: 1, CFA: sp16, RA: sframe.Loc{Kind: sframe.LocFixed, Offset: -8}, FP: fpC16},
		}},
	}
}

func amd64Opts(v uint8, pcrel, sorted bool) sframe.Options {
	return sframe.Options{Version: v, ABI: sframe.ABIAMD64LE, Order: binary.LittleEndian, Addr: secAddr,
		PCRel: pcrel, Sort: sorted, CFAFixedRA: -8}
}

func encode(t *testing.T, funcs []sframe.Function, o sframe.Options) []byte {
	t.Helper()
	b, err := sframe.Encode(funcs, o)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var exec = []Range{{0x1000, 0x1100}}

func TestCheck(t *testing.T) {
	withOutermost := func() []sframe.Function {
		f := amd64Funcs()
		f[0].Rows = append(f[0].Rows, sframe.Row{Start: 8, RAUndefined: true})
		return f
	}
	tests := []struct {
		name   string
		reader Reader
		sec    func(t *testing.T) []byte
		exec   []Range
		// want is the first violation's rule, FDE, FRE, PC ("" = no violation).
		rule     string
		fde, fre int
		pc       uint64
		total    int
	}{
		{name: "v3 kernel ok", reader: Kernel, sec: func(t *testing.T) []byte { return encode(t, amd64Funcs(), amd64Opts(3, true, true)) }, exec: exec},
		{name: "v3 outermost kernel ok", reader: Kernel, sec: func(t *testing.T) []byte { return encode(t, withOutermost(), amd64Opts(3, true, true)) }, exec: exec},
		{name: "v2 kernel", reader: Kernel, sec: func(t *testing.T) []byte { return encode(t, amd64Funcs(), amd64Opts(2, true, true)) },
			rule: "version", fde: -1, fre: -1, total: 1},
		{name: "v3 unsorted kernel", reader: Kernel, sec: func(t *testing.T) []byte { return encode(t, amd64Funcs(), amd64Opts(3, true, false)) },
			rule: "sorted", fde: -1, fre: -1, total: 1},
		{name: "v3 aux header kernel", reader: Kernel, sec: func(t *testing.T) []byte {
			o := amd64Opts(3, true, true)
			o.AuxHdr = []byte{1, 2}
			return encode(t, amd64Funcs(), o)
		}, rule: "aux-header", fde: -1, fre: -1, total: 1},
		{name: "v3 no functions kernel", reader: Kernel, sec: func(t *testing.T) []byte { return encode(t, nil, amd64Opts(3, true, true)) },
			rule: "empty", fde: -1, fre: -1, total: 2}, // and the header fills the section
		{name: "v3 outside text kernel", reader: Kernel, sec: func(t *testing.T) []byte { return encode(t, amd64Funcs(), amd64Opts(3, true, true)) },
			exec: []Range{{0x1000, 0x1010}}, rule: "text", fde: 1, fre: -1, pc: 0x1010, total: 1},
		{name: "v3 same start kernel", reader: Kernel, sec: func(t *testing.T) []byte {
			f := amd64Funcs()
			f[1].Start = f[0].Start
			return encode(t, f, amd64Opts(3, true, true))
		}, rule: "fde-order", fde: 1, fre: -1, pc: 0x1000, total: 1},
		{name: "v3 FRE at the function's end kernel", reader: Kernel, sec: func(t *testing.T) []byte {
			f := amd64Funcs()
			f[1].Rows[1].Start = 0x20 // v13 took an FRE starting at func_size
			return encode(t, f, amd64Opts(3, true, true))
		}, rule: "fre-start", fde: 1, fre: 1, pc: 0x1030, total: 1},
		{name: "v3 FREs out of order kernel", reader: Kernel, sec: func(t *testing.T) []byte {
			f := amd64Funcs()
			f[1].Rows[1].Start = 0
			return encode(t, f, amd64Opts(3, true, true))
		}, rule: "fre-order", fde: 1, fre: 1, pc: 0x1010, total: 1},
		{name: "v3 extra data word kernel", reader: Kernel, sec: func(t *testing.T) []byte {
			b := encode(t, amd64Funcs(), amd64Opts(3, true, true))
			b[5] = 0xf0 // a fixed FP offset: the FP word of FDE 1 FRE 1 is now one too many
			return b
		}, rule: "extra-words", fde: 1, fre: 1, pc: 0x1011, total: 1},
		{name: "v2 glibc ok", reader: Glibc, sec: func(t *testing.T) []byte { return encode(t, amd64Funcs(), amd64Opts(2, false, true)) }},
		{name: "v2 pcrel glibc ok", reader: Glibc, sec: func(t *testing.T) []byte { return encode(t, amd64Funcs(), amd64Opts(2, true, true)) }},
		{name: "v3 glibc", reader: Glibc, sec: func(t *testing.T) []byte { return encode(t, amd64Funcs(), amd64Opts(3, true, true)) },
			rule: "version", fde: -1, fre: -1, total: 1},
		{name: "v2 unsorted glibc", reader: Glibc, sec: func(t *testing.T) []byte { return encode(t, amd64Funcs(), amd64Opts(2, false, false)) },
			rule: "sorted", fde: -1, fre: -1, total: 1},
		{name: "v2 outermost glibc", reader: Glibc, sec: func(t *testing.T) []byte { return encode(t, withOutermost(), amd64Opts(2, false, true)) },
			rule: "no-data-words", fde: 0, fre: 1, pc: 0x1008, total: 1},
		{name: "v2 aarch64 leaf glibc", reader: Glibc, sec: func(t *testing.T) []byte {
			f := []sframe.Function{{Start: 0x1000, Size: 8, Rows: []sframe.Row{{CFA: sframe.Loc{Kind: sframe.LocReg, Reg: 31}}}}}
			return encode(t, f, sframe.Options{Version: 2, ABI: sframe.ABIAArch64LE, Order: binary.LittleEndian, Addr: secAddr, Sort: true})
		}, rule: "no-ra-word", fde: 0, fre: 0, pc: 0x1000, total: 1},
		{name: "v3 libsframe ok", reader: Libsframe, sec: func(t *testing.T) []byte { return encode(t, withOutermost(), amd64Opts(3, true, true)) }},
		{name: "v2 pcrel libsframe ok", reader: Libsframe, sec: func(t *testing.T) []byte { return encode(t, amd64Funcs(), amd64Opts(2, true, true)) }},
		{name: "v2 libsframe", reader: Libsframe, sec: func(t *testing.T) []byte { return encode(t, amd64Funcs(), amd64Opts(2, false, true)) },
			rule: "v2-start-not-pcrel", fde: 0, fre: -1, pc: 0x1000, total: 1},
		{name: "v2 libsframe 2.44 ok", reader: Libsframe244, sec: func(t *testing.T) []byte { return encode(t, amd64Funcs(), amd64Opts(2, false, true)) }},
		{name: "v2 pcrel libsframe 2.44", reader: Libsframe244, sec: func(t *testing.T) []byte { return encode(t, amd64Funcs(), amd64Opts(2, true, true)) },
			rule: "pcrel", fde: -1, fre: -1, total: 1},
		{name: "v3 libsframe 2.44", reader: Libsframe244, sec: func(t *testing.T) []byte { return encode(t, amd64Funcs(), amd64Opts(3, true, true)) },
			rule: "version", fde: -1, fre: -1, total: 1},
		{name: "v2 pcmask libsframe 2.44", reader: Libsframe244, sec: func(t *testing.T) []byte {
			f := amd64Funcs()
			f[1].PCType, f[1].RepSize = sframe.PCMask, 16
			return encode(t, f, amd64Opts(2, false, true))
		}, rule: "pcmask-lookup", fde: 1, fre: -1, pc: 0x1010, total: 1},
		{name: "pcmask without repeat size", reader: Libsframe, sec: func(t *testing.T) []byte {
			f := amd64Funcs()
			f[1].PCType = sframe.PCMask
			return encode(t, f, amd64Opts(3, true, true))
		}, rule: "pcmask-rep-size", fde: 1, fre: -1, pc: 0x1010, total: 1},
		{name: "truncated", reader: Kernel, sec: func(t *testing.T) []byte {
			b := encode(t, amd64Funcs(), amd64Opts(3, true, true))
			return b[:len(b)-1]
		}, rule: "malformed", fde: -1, fre: -1, total: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := Check(tt.reader, Input{Section: tt.sec(t), Addr: secAddr, Exec: tt.exec})
			if tt.rule == "" {
				if !res.OK() {
					t.Fatalf("violations %v, want none", res.Violations)
				}
				return
			}
			v := res.First()
			if v == nil {
				t.Fatalf("no violation, want %s", tt.rule)
			}
			if v.Rule != tt.rule || v.FDE != tt.fde || v.FRE != tt.fre || v.PC != tt.pc || res.Total != tt.total {
				t.Fatalf("first = %v (total %d), want rule %s FDE %d FRE %d pc %#x (total %d); all: %v",
					v, res.Total, tt.rule, tt.fde, tt.fre, tt.pc, tt.total, res.Violations)
			}
		})
	}
}

// TestKernelRules generates sections that break each rule of the kernel
// unwinder's newest revisions (see kernel.go) and requires every violation
// found, in order, with its FDE and FRE index and PC.
func TestKernelRules(t *testing.T) {
	opts := amd64Opts(3, true, true)
	flexFunc := func(rows ...sframe.Row) sframe.Function {
		return sframe.Function{Start: 0x1030, Size: 0x10, Flex: true, Rows: rows}
	}
	// DRAP-like: CFA = r10 + 0, RA at the fixed slot, FP at CFA-16; words
	// CFA control, CFA offset, RA padding, FP control, FP offset.
	drap := sframe.Row{CFA: sframe.Loc{Kind: sframe.LocReg, Reg: 10}, RA: sframe.Loc{Kind: sframe.LocFixed, Offset: -8}, FP: fpC16}
	withFlex := func(rows ...sframe.Row) []sframe.Function {
		return append(amd64Funcs(), flexFunc(rows...))
	}
	type want struct {
		rule     string
		kind     Kind
		fde, fre int
		pc       uint64
	}
	reject := func(rule string, fde, fre int, pc uint64) want { return want{rule, Reject, fde, fre, pc} }
	// The body of a function gcc compiles with a DRAP register (realigned
	// stack and alloca): CFA = *(rbp-8), RA at the fixed slot, rbp saved at
	// rbp+0.
	fpDeref := func(off int32) sframe.Loc { return sframe.Loc{Kind: sframe.LocRegDeref, Reg: 6, Offset: off} }
	drapBody := sframe.Row{Start: 2, CFA: fpDeref(-8), RA: sframe.Loc{Kind: sframe.LocFixed, Offset: -8}, FP: fpDeref(0)}
	limit := func(fde, fre int, pc uint64) want { return want{"innermost-register", InnermostOnly, fde, fre, pc} }
	tests := []struct {
		name   string
		funcs  func() []sframe.Function
		patch  func(t *testing.T, b []byte) // applied to the encoded section
		exec   []Range
		calls  []uint64 // starts of the functions that end with a call (Input.CallEnds)
		want   []want
		limits []want // Result.Limits
	}{
		{name: "ok", funcs: amd64Funcs, exec: exec},
		// CFA = r10: the kernel reads r10 only in the interrupted frame
		// (the prologue of a DRAP function, where no call is).
		{name: "ok flex", funcs: func() []sframe.Function { return withFlex(drap) }, exec: exec,
			limits: []want{limit(2, 0, 0x1030)}},
		// rbp's rule names rbp: in a caller frame the kernel stops there
		// (a kernel booted with the unwinder did, at gcc's drapfn).
		{name: "DRAP body", funcs: func() []sframe.Function { return withFlex(drap, drapBody) }, exec: exec,
			limits: []want{limit(2, 0, 0x1030), limit(2, 1, 0x1032)}},

		// A call that ends a function returns to its end, which the
		// kernel looks up as it is (a booted kernel's chain through
		// glibc's exit ended there).
		{name: "call at the end into a function whose entry rule is the caller's", funcs: amd64Funcs, exec: exec, calls: []uint64{0x1000}},
		{name: "call at the end into padding", funcs: amd64Funcs, exec: exec, calls: []uint64{0x1010},
			limits: []want{{"return-at-end", CallerLookup, 1, 1, 0x1030}}},
		{name: "call at the end into another function's rule", funcs: func() []sframe.Function { return withFlex(drap) }, exec: exec, calls: []uint64{0x1010},
			limits: []want{{"return-at-end", CallerLookup, 1, 1, 0x1030}, limit(2, 0, 0x1030)}},
		{name: "function past its segment", funcs: amd64Funcs, exec: []Range{{0x1000, 0x1028}},
			want: []want{reject("text-end", 1, -1, 0x1010)}},
		{name: "functions in two executable segments", funcs: amd64Funcs, exec: []Range{{0x1010, 0x1100}, {0x1000, 0x1010}},
			want: []want{reject("exec-segments", 1, -1, 0x1010)}},
		{name: "segment above the functions without one at its start", funcs: amd64Funcs, exec: []Range{{0x1000, 0x1040}, {0x2000, 0x2100}},
			want: []want{reject("segment-start", 1, -1, 0x2000)}},
		{name: "more FREs than bytes", funcs: func() []sframe.Function {
			f := amd64Funcs()
			f[0].Size = 1
			f[0].Rows = append(f[0].Rows, sframe.Row{Start: 1, CFA: sp16, RA: sframe.Loc{Kind: sframe.LocFixed, Offset: -8}})
			return f
		}, exec: exec, want: []want{reject("fres-num", 0, -1, 0x1000), reject("fre-start", 0, 1, 0x1001)}},
		{name: "PCMASK without repeat size or FREs", funcs: func() []sframe.Function {
			f := amd64Funcs()
			f[0].PCType, f[0].Rows = sframe.PCMask, nil
			return f
		}, exec: exec, want: []want{reject("pcmask-rep-size", 0, -1, 0x1000), reject("no-fre", 0, -1, 0x1000)}},
		{name: "PCMASK FRE at the repeat size", funcs: func() []sframe.Function {
			f := amd64Funcs()
			f[1].PCType, f[1].RepSize, f[1].Rows[1].Start = sframe.PCMask, 16, 16
			return f
		}, exec: exec, want: []want{reject("fre-start", 1, 1, 0x1020)}},
		{name: "FDE without FREs", funcs: func() []sframe.Function {
			f := amd64Funcs()
			f[0].Rows = nil
			return f
		}, exec: exec, want: []want{reject("no-fre", 0, -1, 0x1000)}},
		{name: "signal FDE without FREs", funcs: func() []sframe.Function {
			f := amd64Funcs()
			f[1].Rows, f[1].Signal = nil, true
			return f
		}, exec: exec, want: []want{reject("no-fre", 1, -1, 0x1010)}},
		{name: "signal FDE with an outermost FRE", funcs: func() []sframe.Function {
			f := amd64Funcs()
			f[1].Rows, f[1].Signal = []sframe.Row{{RAUndefined: true}}, true
			return f
		}, exec: exec},
		{name: "first FRE after the start", funcs: func() []sframe.Function {
			f := amd64Funcs()
			f[1].Rows = f[1].Rows[1:]
			return f
		}, exec: exec, want: []want{reject("first-fre", 1, 0, 0x1010)}},
		{name: "flex CFA control word without a register", funcs: func() []sframe.Function { return withFlex(drap) },
			patch: func(t *testing.T, b []byte) { b[wordOffset(t, b, 2, 0, 0)] &^= 1 },
			exec:  exec, want: []want{reject("flex-cfa-reg", 2, 0, 0x1030)}},
		{name: "flex CFA control word with the reserved bit", funcs: func() []sframe.Function { return withFlex(drap) },
			patch: func(t *testing.T, b []byte) { b[wordOffset(t, b, 2, 0, 0)] |= 4 },
			exec:  exec, want: []want{reject("flex-reserved", 2, 0, 0x1030)}},
		{name: "flex FP control word with the reserved bit", funcs: func() []sframe.Function {
			r := drap
			r.Start = 2
			return withFlex(drap, r)
		}, patch: func(t *testing.T, b []byte) { b[wordOffset(t, b, 2, 1, 3)] |= 4 },
			exec: exec, want: []want{reject("flex-reserved", 2, 1, 0x1032)}, limits: []want{limit(2, 0, 0x1030), limit(2, 1, 0x1032)}},
		{name: "flex padding word never has the reserved bit checked", funcs: func() []sframe.Function { return withFlex(drap) }, exec: exec,
			limits: []want{limit(2, 0, 0x1030)}},
		{name: "flex register above 31", funcs: func() []sframe.Function {
			r := drap
			r.CFA.Reg = 40
			return withFlex(r)
		}, exec: exec, want: []want{{"flex-regnum", LookupFails, 2, 0, 0x1030}}, limits: []want{limit(2, 0, 0x1030)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := encode(t, tt.funcs(), opts)
			if tt.patch != nil {
				tt.patch(t, b)
			}
			in := Input{Section: b, Addr: secAddr, Exec: tt.exec}
			if tt.calls != nil {
				in.CallEnds = func(lo, hi, from uint64) bool {
					if from < lo || from >= hi {
						t.Errorf("CallEnds(%#x, %#x, %#x): from outside the function", lo, hi, from)
					}
					return slices.Contains(tt.calls, lo)
				}
			}
			res := Check(Kernel, in)
			// expect compares the violations (or limits) found with those
			// wanted, in order, and their total.
			expect := func(what string, vs []Violation, total int, ws []want) {
				t.Helper()
				var got []want
				for _, v := range vs {
					got = append(got, want{v.Rule, v.Kind, v.FDE, v.FRE, v.PC})
				}
				if len(got) != len(ws) || total != len(ws) {
					t.Fatalf("%ss %v, want %v", what, vs, ws)
				}
				for i := range got {
					if got[i] != ws[i] {
						t.Errorf("%s %d: %v, want %+v", what, i, vs[i], ws[i])
					}
				}
			}
			expect("violation", res.Violations, res.Total, tt.want)
			expect("limit", res.Limits, res.TotalLimits, tt.limits)
			if fns := map[int]bool{}; len(tt.limits) > 0 {
				for _, l := range tt.limits {
					fns[l.fde] = true
				}
				if res.LimitFunctions != len(fns) {
					t.Errorf("LimitFunctions %d, want %d", res.LimitFunctions, len(fns))
				}
			}
		})
	}
}

// wordOffset returns the section offset of data word k of FDE i's FRE j
// (V3).
func wordOffset(t *testing.T, b []byte, i, j, k int) int {
	t.Helper()
	sec, err := sfsection.Decode(b, secAddr)
	if err != nil {
		t.Fatal(err)
	}
	d := &sec.FDEs[i]
	off := sec.Header.Size() + int(sec.Header.FREOff) + int(d.FREOff) + 5 // past the V3 attribute
	asz := int(d.AddrSize)
	for n := 0; n < j; n++ {
		off += asz + 1 + int(d.FREs[n].NumWords)*int(d.FREs[n].WordSize)
	}
	return off + asz + 1 + k*int(d.FREs[j].WordSize)
}

// A shared object's section is registered through sframe_register, a
// program's at exec; either way sframe_add_section wants the section
// inside one mapping (limit 5 of docs/acceptance.md, lifted by the system
// call: the rules are the same).
func TestKernelRegistration(t *testing.T) {
	sec := encode(t, amd64Funcs(), amd64Opts(sframe.Version3, true, true))
	end := uint64(secAddr + len(sec))
	for _, c := range []struct {
		name   string
		in     Input
		reg    string
		reject string
	}{
		{"program", Input{Section: sec, Addr: secAddr, Exec: exec, Loads: []Range{{0x1000, 0x1100}, {0x2000, end}}}, RegisteredAtExec, ""},
		{"library", Input{Section: sec, Addr: secAddr, Exec: exec, Loads: []Range{{0x1000, 0x1100}, {0x2000, end}}, Shared: true}, RegisteredBySyscall, ""},
		{"library, section over two segments", Input{Section: sec, Addr: secAddr, Exec: exec, Loads: []Range{{0x1000, 0x1100}, {0x2000, 0x2010}, {0x2010, end}}, Shared: true}, RegisteredBySyscall, "sframe-mapping"},
		{"program, section outside every segment", Input{Section: sec, Addr: secAddr, Exec: exec, Loads: []Range{{0x1000, 0x1100}}}, RegisteredAtExec, "sframe-mapping"},
		{"no segments known", Input{Section: sec, Addr: secAddr, Exec: exec}, RegisteredAtExec, ""},
	} {
		r := Check(Kernel, c.in)
		if r.Registration != c.reg {
			t.Errorf("%s: registration %q, want %q", c.name, r.Registration, c.reg)
		}
		got := ""
		if v := r.FirstReject(); v != nil {
			got = v.Rule
		}
		if got != c.reject {
			t.Errorf("%s: rejected by %q, want %q (%+v)", c.name, got, c.reject, r.Violations)
		}
	}
	// Other readers say nothing about registration.
	if r := Check(Libsframe, Input{Section: encode(t, amd64Funcs(), amd64Opts(sframe.Version3, true, true)), Addr: secAddr, Shared: true}); r.Registration != "" {
		t.Errorf("libsframe: registration %q", r.Registration)
	}
}
