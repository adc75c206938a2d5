package libsframecheck

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
	"github.com/cfi2sframe/cfi2sframe/internal/sfsection"
	"github.com/cfi2sframe/cfi2sframe/internal/testing/toolchain"
	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// need returns the path of a program, or skips (fails when the toolchain
// is required, as in CI).
func need(t *testing.T, prog string) string {
	t.Helper()
	p, err := exec.LookPath(prog)
	if err != nil {
		if toolchain.Required() {
			t.Fatalf("%s not found (CI installs it)", prog)
		}
		t.Skipf("%s not found", prog)
	}
	return p
}

// readers builds the helper against both libsframes, or skips (fails when
// the toolchain is required).
func readers(t *testing.T) []Reader {
	t.Helper()
	if runtime.GOARCH != "amd64" || runtime.GOOS != "linux" {
		t.Skip("the reference libsframes are x86-64 Linux libraries")
	}
	cc := need(t, "gcc")
	root := toolchain.Root()
	if m := Missing(root); len(m) > 0 {
		msg := "libsframe not found: " + strings.Join(m, ", ") + "; run scripts/reference-toolchain.sh"
		if toolchain.Required() {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	rs, err := Build(cc, root, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func buildC2S(t *testing.T, dir string) string {
	t.Helper()
	c2s := filepath.Join(dir, "cfi2sframe")
	if out, err := exec.Command("go", "build", "-o", c2s, "../../../cmd/cfi2sframe").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return c2s
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// format is one output format and the cfi2sframe flags that write it.
type format struct {
	name  string
	flags []string
}

var formats = []format{
	{"V3", nil}, // shared FRE blocks (little-endian files)
	{"V3-plain", []string{"--shared-blocks=false"}},
	{"V2", []string{"--sframe-version", "2"}},
	{"V2+PCREL", []string{"--sframe-version", "2", "--pcrel"}},
}

// section reads the .sframe a loader finds in file.
func section(t *testing.T, file string) (*elfread.Section, *sframe.Header) {
	t.Helper()
	f, err := elfread.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := f.SFrame()
	if err != nil {
		t.Fatal(err)
	}
	sec, err := sfsection.Decode(s.Data, s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	return s, &sec.Header
}

// features counts what a section holds that the known mistakes and the
// test's coverage depend on.
func features(t *testing.T, s *elfread.Section) (pcmask, flex, signal, signalNoRows, signalOutermostRow int) {
	sec, err := sfsection.Decode(s.Data, s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range sec.FDEs {
		if d.PCType == sframe.PCMask {
			pcmask++
		}
		if d.Flex {
			flex++
		}
		if d.Signal {
			signal++
			switch {
			case len(d.FREs) == 0:
				signalNoRows++
			case d.FREs[0].NumWords == 0:
				signalOutermostRow++
			}
		}
	}
	return
}

// expect checks one reader's result on a section against what is known of
// that reader: every PC agrees, except exactly the known mistake's PCs, and
// 2.44 refuses V3 and FUNC_START_PCREL.
func expect(t *testing.T, res *Result, h *sframe.Header) {
	t.Helper()
	pcrel := h.Flags&sframe.FlagFDEFuncStartPCRel != 0
	is244 := res.Reader == "2.44"
	if is244 && (h.Version == sframe.Version3 || pcrel) {
		// 2.44's sframe_decode gives SFRAME_ERR_NOMEM (2001) for both,
		// and SFRAME_ERR_BUF_INVAL (2003) for both on s390x (big-endian):
		// the known refusal, asserted exactly.
		want := "2001 Out of Memory."
		if h.ABI == sframe.ABIS390XBE {
			want = "2003 Buffer does not contain SFrame data."
		}
		if res.DecodeErr != want {
			t.Errorf("libsframe 2.44 on V%d (flags %#x): want the known refusal %q, got %q", h.Version, h.Flags, want, res.DecodeErr)
		}
		return
	}
	if res.DecodeErr != "" {
		t.Errorf("libsframe %s refuses the section: %s", res.Reader, res.DecodeErr)
		return
	}
	for _, e := range res.Examples {
		t.Errorf("libsframe %s differs: %s", res.Reader, e)
	}
	known := res.V2AsPCRel + res.PCMaskFound + res.PCMaskMiss
	if known != res.Modelled {
		t.Errorf("libsframe %s: %d PCs with the known mistake's answer, but the model differs from ours at %d", res.Reader, known, res.Modelled)
	}
	if !is244 && h.Version == sframe.Version2 && !pcrel && res.V2AsPCRel == 0 {
		t.Errorf("libsframe %s on V2 without PCREL: the known PC-relative misreading shows at no PC", res.Reader)
	}
	if res.Agree+known+res.Other != res.PCs || res.PCs == 0 {
		t.Errorf("libsframe %s: counts do not add up: %s", res.Reader, res)
	}
}

// TestLibsframeAgrees compares libsframe 2.47.50 and 2.44 with
// Table.Lookup at every PC of programs built here (x86-64: PLT stubs with
// PCMASK FDEs, a DRAP function with flexible FDEs in V3, signal
// trampolines described by their CFI and by one RA-undefined row; AArch64
// with PAC; s390x with its PLT, signal trampolines and the frame pointer
// in floating-point registers: flexible FDEs in V3, V2's register-number
// form) and converted to V3, V2 and V2+PCREL, and of GNU's own V2 and V3
// output from testdata/sframe (a signal FDE without FREs among it).
func TestLibsframeAgrees(t *testing.T) {
	rs := readers(t)
	tmp := t.TempDir()
	c2s := buildC2S(t, tmp)
	src, _ := filepath.Abs("testdata/prog.c")
	type input struct {
		name string
		file string
	}
	var inputs []input
	progs := []struct {
		arch, cc string
		flags    []string
	}{
		{"x86_64", "gcc", []string{"-O2", "-mstackrealign", "-Wl,-z,lazy"}},
		{"aarch64", "aarch64-linux-gnu-gcc", []string{"-O2", "-mbranch-protection=standard"}},
		{"s390x", "s390x-linux-gnu-gcc", []string{"-O2", "-fno-omit-frame-pointer"}},
	}
	for _, p := range progs {
		cc := need(t, p.cc)
		bin := filepath.Join(tmp, "prog-"+p.arch)
		run(t, cc, append([]string{"-o", bin, src}, p.flags...)...)
		for _, f := range formats {
			out := bin + "." + f.name
			run(t, c2s, append(append([]string{"-q"}, f.flags...), bin, "-o", out)...)
			inputs = append(inputs, input{p.arch + "/ours-" + f.name, out})
		}
	}
	for _, g := range []string{"v2-x86_64-exe", "v2-x86_64-lib-lazy.so", "v2-aarch64-exe", "v3-x86_64-exe", "v3-x86_64-lib-lazy.so", "v3-aarch64-exe", "v3-s390x-lib.so"} {
		inputs = append(inputs, input{"gnu/" + g, filepath.Join("..", "..", "..", "testdata", "sframe", g)})
	}

	totals := map[string]*Result{}
	var keys []string
	var pcmask, flex, signal, signalOutermostRow, gnuSignalNoRows int
	var s390Mask, s390Flex, s390Signal int
	for _, in := range inputs {
		s, h := section(t, in.file)
		switch in.name {
		case "s390x/ours-V3":
			s390Mask, s390Flex, s390Signal, _, _ = features(t, s)
		case "x86_64/ours-V3":
			pcmask, flex, signal, _, signalOutermostRow = features(t, s)
		case "gnu/v3-x86_64-exe":
			_, _, _, gnuSignalNoRows, _ = features(t, s)
		}
		format := fmt.Sprintf("V%d", h.Version)
		if h.Flags&sframe.FlagFDEFuncStartPCRel != 0 {
			format += "+PCREL"
		}
		for _, rd := range rs {
			res, err := Check(rd, s.Data, s.Addr, tmp)
			if err != nil {
				t.Fatalf("%s: %v", in.name, err)
			}
			t.Logf("%s (%s): %s", in.name, format, res)
			t.Run(in.name+"/"+rd.Name, func(t *testing.T) { expect(t, res, h) })
			key := rd.Name + " " + format
			if totals[key] == nil {
				totals[key] = &Result{Reader: rd.Name, DecodeErr: res.DecodeErr}
				keys = append(keys, key)
			}
			totals[key].Add(res)
		}
	}
	// The x86-64 program must hold what the test claims to cover; the
	// signal FDE without FREs (GNU as 2.47's form for a trampoline whose
	// CFI cannot be described, ours being one RA-undefined FRE) comes
	// from GNU's V3 program.
	if pcmask == 0 || flex == 0 || signal < 2 || signalOutermostRow == 0 || gnuSignalNoRows == 0 {
		t.Errorf("x86-64 V3 output: %d PCMASK, %d flexible, %d signal (%d with an RA-undefined row) FDEs, GNU's V3 program %d signal FDEs without FREs; want PLT, DRAP, both kinds of signal trampoline and GNU's FRE-less form",
			pcmask, flex, signal, signalOutermostRow, gnuSignalNoRows)
	}
	// s390x: ld's PLT (PCMASK), leaves keeping the frame pointer in a
	// floating-point register (flexible FDEs), both signal trampolines.
	if s390Mask == 0 || s390Flex == 0 || s390Signal < 2 {
		t.Errorf("s390x V3 output: %d PCMASK, %d flexible, %d signal FDEs; want PLT, FP in an FPR and both signal trampolines", s390Mask, s390Flex, s390Signal)
	}
	for _, k := range keys {
		t.Logf("total %s: %s", k, totals[k])
	}
	if r := totals["2.44 V2"]; r != nil && r.PCMaskFound+r.PCMaskMiss == 0 {
		t.Errorf("libsframe 2.44 on V2: the known PCMASK mistake shows at no PC (x86-64 PLTs): %s", r)
	}
}

// TestLibsframeAgreesOnFiles does the same on bigger files:
// CFI2SFRAME_LIBSFRAME_FILES lists them (separated by spaces), each
// converted to V3, V2 and V2+PCREL (scripts/libsframe-agreement.sh sets
// it). Skipped when unset.
func TestLibsframeAgreesOnFiles(t *testing.T) {
	list := strings.Fields(os.Getenv("CFI2SFRAME_LIBSFRAME_FILES"))
	if len(list) == 0 {
		t.Skip("CFI2SFRAME_LIBSFRAME_FILES is not set")
	}
	rs := readers(t)
	tmp := t.TempDir()
	c2s := buildC2S(t, tmp)
	totals := map[string]*Result{}
	var keys []string
	for _, file := range list {
		for _, f := range formats {
			out := filepath.Join(tmp, filepath.Base(file)+"."+f.name)
			run(t, c2s, append(append([]string{"-q", "--force"}, f.flags...), file, "-o", out)...)
			s, h := section(t, out)
			for _, rd := range rs {
				res, err := Check(rd, s.Data, s.Addr, tmp)
				if err != nil {
					t.Fatalf("%s: %v", out, err)
				}
				t.Logf("%s %s: %s", file, f.name, res)
				t.Run(filepath.Base(file)+"/"+f.name+"/"+rd.Name, func(t *testing.T) { expect(t, res, h) })
				key := rd.Name + " " + f.name
				if totals[key] == nil {
					totals[key] = &Result{Reader: rd.Name, DecodeErr: res.DecodeErr}
					keys = append(keys, key)
				}
				totals[key].Add(res)
			}
			os.Remove(out)
		}
	}
	for _, k := range keys {
		t.Logf("total %s: %s", k, totals[k])
	}
}
