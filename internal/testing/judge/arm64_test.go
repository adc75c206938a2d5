package judge

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A PIE program and a library as a run's mappings put them, and the
// vDSO: the program's functions move to its load address, the library's
// resolve by its symbols where it was mapped, the vDSO by its range
// alone; "@OBJ" matches any address of an object, "A|B" either frame.
func TestRunSymtabMappings(t *testing.T) {
	exe := filepath.Join("..", "..", "..", "testdata", "sframe", "v3-aarch64-exe")
	lib := filepath.Join("..", "..", "..", "testdata", "sframe", "v2-aarch64-lib.so")
	st, err := LoadSymtab(exe)
	if err != nil {
		t.Fatal(err)
	}
	const pie, so, vdso = 0xaaaaccc10000, 0xffff88770000, 0xffff99990000
	if err := st.RelocateProgram(exe, Mapping{Lo: pie, Hi: pie + 0x1000, Off: 0, Path: "/tests/v3-aarch64-exe"}); err != nil {
		t.Fatal(err)
	}
	if err := st.AddMapping(Mapping{Lo: so, Hi: so + 0x1000, Off: 0, Path: "/lib/v2-aarch64-lib.so"}, lib); err != nil {
		t.Fatal(err)
	}
	if err := st.AddMapping(Mapping{Lo: vdso, Hi: vdso + 0x1000, Off: 0, Path: "[vdso]"}, ""); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		ip   uint64
		name string
	}{
		{pie + 0x424, "leaf"},   // leaf at 0x420 in the file
		{0x424, "?424"},         // the file's address: nothing there now
		{pie + 0x3a0, "_start"}, // first function
		{so + 0x5a4, "call_weak_fn"},
		{vdso + 0x7c0, "[vdso]"}, // the vDSO by its range
		{vdso + 0x1000, "?ffff9999" + "1000"},
	} {
		if got := st.Name(c.ip); got != c.name {
			t.Errorf("Name(%#x) = %s, want %s", c.ip, got, c.name)
		}
	}
	for _, c := range []struct {
		ip   uint64
		want string
		ok   bool
	}{
		{pie + 0x424, "leaf", true},
		{pie + 0x424, "caller|leaf", true},
		{pie + 0x424, "@v2-aarch64-lib.so", false},
		{so + 0x10, "@v2-aarch64-lib.so", true}, // below its first symbol: in the object all the same
		{so + 0x5a4, "caller|@v2-aarch64-lib.so", true},
		{vdso + 4, "@[vdso]", true},
		{vdso + 4, "leaf", false},
	} {
		if got := st.match(c.ip, c.want); got != c.ok {
			t.Errorf("match(%#x, %s) = %v", c.ip, c.want, got)
		}
	}
	// The program's names moved with it: a truth naming them matches.
	truth, err := ParseTruth(`
p leaf caller _start ;
q entry @[vdso] caller|@v2-aarch64-lib.so _start ; @[vdso]+
`, "p")
	if err != nil {
		t.Fatal(err)
	}
	chain := []uint64{pie + 0x424, pie + 0x440, pie + 0x3a4}
	if v := Classify(st, truth, chain); v.Class != Equal {
		t.Errorf("p: %+v", v)
	}
	// A PAC-signed return address in a caller's slot that strips to the
	// right function: the kernel's limit (it does not strip), whatever
	// follows; one that strips elsewhere is wrong.
	signedRA := uint64(0x003c)<<48 | (pie + 0x440)
	if v := Classify(st, truth, []uint64{pie + 0x424, signedRA, 0x1234}); v.Class != Limit || v.Why != "frame 2 is a PAC-signed return address (3caaaaccc10440, into caller)" {
		t.Errorf("signed: %+v", v)
	}
	if v := Classify(st, truth, []uint64{pie + 0x424, uint64(0x003c)<<48 | (pie + 0x3a4)}); v.Class != Wrong {
		t.Errorf("signed elsewhere: %+v", v)
	}
	q, err := ParseTruth(`q entry @[vdso] caller|@v2-aarch64-lib.so _start ; @[vdso]+`, "q")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		chain []uint64
		class Class
		why   string
	}{
		{[]uint64{pie + 0x3e4, vdso + 8, so + 0x5a4, pie + 0x3a4}, Equal, ""},
		{[]uint64{pie + 0x3e4, vdso + 8, pie + 0x440, pie + 0x3a4}, Equal, ""},
		{[]uint64{pie + 0x3e4, vdso + 8}, Limit, "stops at @[vdso]"},
		{[]uint64{pie + 0x3e4, vdso + 8, pie + 0x3a4}, Limit, "past @[vdso] (1 frames after it not judged)"},
		{[]uint64{pie + 0x3e4, pie + 0x3a4}, Wrong, "frame 2 is _start, want @[vdso]"},
	} {
		v := Classify(st, q, c.chain)
		if v.Class != c.class || v.Why != c.why {
			t.Errorf("%x: %+v, want %v %q", c.chain, v, c.class, c.why)
		}
	}
}

// The AArch64 table has the programs the harness runs there, and the
// machine picks the table.
func TestKernelTruthARM64(t *testing.T) {
	for _, p := range []string{"chain", "drap", "signal", "plt", "goprog"} {
		ts, err := ParseTruth(KernelTruthARM64, p)
		if err != nil {
			t.Fatal(err)
		}
		if p == "signal" && (len(ts) != 2 || !slices.Equal(ts[1].Limits, []string{"@[vdso]+"})) {
			t.Errorf("signal: %+v", ts)
		}
	}
	if KernelTruthFor(183) != KernelTruthARM64 || KernelTruthFor(62) != KernelTruth { // EM_AARCH64, EM_X86_64
		t.Error("KernelTruthFor")
	}
}

// The mapping lines of a run, and a garbled one.
func TestParseGuestMaps(t *testing.T) {
	g, err := ParseGuest(strings.NewReader("run a\nM aaaaccc10000 aaaaccc11000 0 /tests/a\nM ffff99990000 ffff99991000 0 [vdso]\nend a\n"))
	if err != nil {
		t.Fatal(err)
	}
	if m := g.Runs["a"].Maps; len(m) != 2 || m[0] != (Mapping{0xaaaaccc10000, 0xaaaaccc11000, 0, "/tests/a"}) || m[1].Path != "[vdso]" {
		t.Errorf("%+v", m)
	}
	if _, err := ParseGuest(strings.NewReader("run a\nM 1 2 /x\nend a\n")); err == nil {
		t.Error("a short M line parsed")
	}
}

// A dynamic program's string functions are libc.so.6's: their true chain
// is of the dynamic builds only, judged through the libc frame; the
// static builds' names the functions.
func TestParseTruthForLinking(t *testing.T) {
	st, err := ParseTruthFor(KernelTruthARM64, "plt", false)
	if err != nil {
		t.Fatal(err)
	}
	dy, err := ParseTruthFor(KernelTruthARM64, "plt", true)
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != 4 || st[2].Frames[0] != "__strlen_asimd|__strlen_mte|__strnlen|strcpy^" || st[2].Optional() || len(dy) != 5 || dy[2].Frames[0] != "@libc.so.6" || !slices.Equal(dy[2].Limits, []string{"@libc.so.6+"}) || !dy[3].Optional() {
		t.Errorf("static %+v\ndynamic %+v", st, dy)
	}
}

// Of the true chains that start at the chain's innermost frame, the one
// that agrees longest decides, the first of those on a tie.
func TestClassifyLongestTruth(t *testing.T) {
	exe := filepath.Join("..", "..", "..", "testdata", "sframe", "v3-aarch64-exe")
	st, err := LoadSymtab(exe)
	if err != nil {
		t.Fatal(err)
	}
	truth, err := ParseTruth("x leaf caller _start ;\nx leaf entry _start ;", "x")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		chain []uint64
		v     Verdict
	}{
		{[]uint64{0x424, 0x440, 0x3a4}, Verdict{Class: Equal, Truth: 0}},
		{[]uint64{0x424, 0x3e4, 0x3a4}, Verdict{Class: Equal, Truth: 1}},
		{[]uint64{0x424, 0x3a4}, Verdict{Class: Wrong, Truth: 0, Why: "frame 2 is _start, want caller"}},
	} {
		if v := Classify(st, truth, c.chain); v != c.v {
			t.Errorf("%x: %+v, want %+v", c.chain, v, c.v)
		}
	}
}

// A chain from shared code ("NAME^") whose second frame is in no true
// chain is outside the spinning code; one whose second frame is in some
// true chain (skipping callers), or in no function, is judged.
func TestClassifySharedCode(t *testing.T) {
	exe := filepath.Join("..", "..", "..", "testdata", "sframe", "v3-aarch64-exe")
	st, err := LoadSymtab(exe)
	if err != nil {
		t.Fatal(err)
	}
	truth, err := ParseTruth("x leaf^ caller entry _start ;\nx caller entry ;", "x")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		chain []uint64
		v     Verdict
	}{
		{[]uint64{0x424, 0x440, 0x3e4, 0x3a4}, Verdict{Class: Equal, Truth: 0}},
		{[]uint64{0x424, 0x4b4, 0x3a4}, Verdict{Class: Other, Truth: -1, Why: "shared code called by frame_300"}},
		{[]uint64{0x424, 0x3e4, 0x3a4}, Verdict{Class: Wrong, Truth: 0, Why: "frame 2 is entry, want caller"}},
		{[]uint64{0x424, 0x3a4}, Verdict{Class: Wrong, Truth: 0, Why: "frame 2 is _start, want caller"}},
		{[]uint64{0x424, stackAddr}, Verdict{Class: Wrong, Truth: 0, Why: "frame 2 is ?7ffd12345678, want caller"}},
		{[]uint64{0x424, 0x440, 0x3a4}, Verdict{Class: Wrong, Truth: 0, Why: "frame 3 is _start, want entry"}},
	} {
		if v := Classify(st, truth, c.chain); v != c.v {
			t.Errorf("%x: %+v, want %+v", c.chain, v, c.v)
		}
	}
}
