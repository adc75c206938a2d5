package main

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/convert"
	"github.com/cfi2sframe/cfi2sframe/internal/elfwrite"
	"github.com/cfi2sframe/cfi2sframe/internal/sfsection"
	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// withSFrame gives the linked file in a .sframe (replacing any it has)
// holding the functions of the V3 conversion of in for which keep is true,
// placed by elfwrite as the converter places one.
func withSFrame(t *testing.T, in []byte, keep func(sframe.Function) bool) []byte {
	t.Helper()
	cf, err := convert.NewFile("in", bytes.NewReader(in), int64(len(in)))
	if err != nil {
		t.Fatal(err)
	}
	res, err := cf.Convert(convert.Options{Force: true})
	cf.Close()
	if err != nil {
		t.Fatal(err)
	}
	sec, err := sfsection.Decode(res.SFrame, res.Addr)
	if err != nil {
		t.Fatal(err)
	}
	funcs := slices.DeleteFunc(sec.Functions(), func(fn sframe.Function) bool { return !keep(fn) })
	o := sec.Options()
	out, err := elfwrite.Insert(in, elfwrite.Options{Replace: true}, func(addr uint64) ([]byte, error) {
		o.Addr = addr
		return sframe.Encode(funcs, o)
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// debugOnly makes the file's .sframe SHT_NOBITS and its PT_GNU_SFRAME
// hold no file bytes, as objcopy --only-keep-debug leaves them.
func debugOnly(t *testing.T, b []byte) []byte {
	t.Helper()
	ef, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	b = slices.Clone(b)
	shoff, phoff := le.Uint64(b[0x28:]), le.Uint64(b[0x20:])
	for i, s := range ef.Sections {
		if s.Name == ".sframe" {
			le.PutUint32(b[shoff+uint64(i)*64+4:], uint32(elf.SHT_NOBITS))
		}
	}
	for i, p := range ef.Progs {
		if p.Type == elf.ProgType(0x6474e554) {
			le.PutUint64(b[phoff+uint64(i)*56+32:], 0) // p_filesz
		}
	}
	return b
}

// TestVerifyMissing: verify fails when .sframe leaves out a function the
// CFI describes that cfi2sframe would describe, names those functions
// (the first 10, then "and N more") and counts them all in the summary
// line and in --json; functions cfi2sframe skips too are reported with
// their reason and do not fail it.
func TestVerifyMissing(t *testing.T) {
	dir := t.TempDir()
	hello, err := os.ReadFile("../../testdata/example/hello")
	if err != nil {
		t.Fatal(err)
	}
	gnu, err := os.ReadFile("../../testdata/sframe/v3-x86_64-exe")
	if err != nil {
		t.Fatal(err)
	}
	file := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	syms := map[string]uint64{}
	if ef, err := elf.NewFile(bytes.NewReader(hello)); err == nil {
		ss, _ := ef.Symbols()
		for _, s := range ss {
			syms[s.Name] = s.Value
		}
	}
	all := func(sframe.Function) bool { return true }
	none := func(sframe.Function) bool { return false }
	converted := file("hello.v3", withSFrame(t, hello, all))
	if _, stderr, err := runCmd("-q", "--for", "glibc", "../../testdata/example/hello", "-o", filepath.Join(dir, "hello.glibc")); err != nil {
		t.Fatalf("--for glibc: %v\n%s", err, stderr)
	}
	tests := []struct {
		name    string
		args    []string
		fail    bool
		stdout  []string // lines (or their starts) expected in this order
		summary string
	}{
		{name: "correct conversion", args: []string{"verify", converted},
			summary: "6 functions, 1107 bytes checked: 0 disagreements, 0 ranges without CFI, 0 CFI functions missing from .sframe, 0 skipped as cfi2sframe skips them, 0 layout problems"},
		{name: "empty .sframe", args: []string{"verify", file("hello.empty", withSFrame(t, hello, none))}, fail: true,
			stdout:  []string{"(.plt) [0x1020,0x1050): described by CFI, not by .sframe", "(.plt.got) [0x1050,0x1058)", "main [0x1060,0x109b)", "_start [0x10a0,0x10c2)", "fib [0x1190,0x154e)"},
			summary: "0 functions, 0 bytes checked: 0 disagreements, 0 ranges without CFI, 5 CFI functions missing from .sframe, 0 skipped"},
		{name: "SHT_NOBITS .sframe", args: []string{"verify", file("hello.nobits", debugOnly(t, withSFrame(t, hello, all)))}, fail: true,
			stdout: []string{"(.plt) [0x1020,0x1050): described by CFI, not by .sframe", "(.plt.got)", "main", "_start", "fib",
				"layout: PT_GNU_SFRAME (offset 0x3310, size 0) holds no bytes: the kernel reads SFrame data only through PT_GNU_SFRAME and would find none", "layout: ", "layout: "},
			summary: "0 functions, 0 bytes checked: 0 disagreements, 0 ranges without CFI, 5 CFI functions missing from .sframe, 0 skipped"},
		{name: "main and fib removed", args: []string{"verify", "-q", file("hello.partial", withSFrame(t, hello, func(fn sframe.Function) bool {
			return fn.Start != syms["main"] && fn.Start != syms["fib"]
		}))}, fail: true,
			stdout:  []string{"main [0x1060,0x109b): described by CFI, not by .sframe", "fib [0x1190,0x154e): described by CFI, not by .sframe"},
			summary: "4 functions, 90 bytes checked: 0 disagreements, 0 ranges without CFI, 2 CFI functions missing from .sframe, 0 skipped"},
		{name: "glibc leaves _start out", args: []string{"verify", filepath.Join(dir, "hello.glibc")},
			stdout:  []string{"_start [0x10a0,0x10c2): not in .sframe, skipped as cfi2sframe skips it: outermost: "},
			summary: "5 functions, 1073 bytes checked: 0 disagreements, 0 ranges without CFI, 0 CFI functions missing from .sframe, 1 skipped as cfi2sframe skips them (1 outermost), 0 layout problems"},
		{name: "11 missing: 10 named", args: []string{"verify", "-q", file("gnu.empty", withSFrame(t, gnu, none))}, fail: true,
			stdout: []string{"(.plt) [", "_start", "sigtramp_simple", "sigtramp_expr", "fp_frame", "entry", "leaf", "caller", "frame_300", "frame_70000",
				"and 1 more CFI functions not in .sframe"},
			summary: ": 0 functions, 0 bytes checked: 0 disagreements, 0 ranges without CFI, 11 CFI functions missing from .sframe"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, err := runCmd(tt.args...)
			if (err != nil) != tt.fail {
				t.Errorf("error %v, want failure %v\n%s%s", err, tt.fail, stdout, stderr)
			}
			if tt.fail && (err == nil || !strings.Contains(err.Error(), "1 of 1 files disagree with their CFI, lack functions it describes or have a broken layout")) {
				t.Errorf("error %v", err)
			}
			lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
			if stdout == "" {
				lines = nil
			}
			if len(lines) != len(tt.stdout) {
				t.Errorf("%d lines, want %d:\n%s", len(lines), len(tt.stdout), stdout)
			}
			for i := range min(len(lines), len(tt.stdout)) {
				file := tt.args[len(tt.args)-1]
				if !strings.HasPrefix(lines[i], file+": "+tt.stdout[i]) {
					t.Errorf("line %d: %q, want it to start with %q", i+1, lines[i], file+": "+tt.stdout[i])
				}
			}
			if !strings.Contains(stderr, tt.summary) {
				t.Errorf("summary %q, want %q", stderr, tt.summary)
			}
		})
	}

	// --json: the counts, and as many Missing findings as text names.
	stdout, _, err := runCmd("verify", "--json", filepath.Join(dir, "gnu.empty"), filepath.Join(dir, "hello.glibc"))
	if err == nil {
		t.Error("--json: no failure")
	}
	var got []struct {
		File     string         `json:"file"`
		Missing  int            `json:"missing"`
		Skipped  map[string]int `json:"skipped"`
		Agree    bool           `json:"agree"`
		Findings []struct {
			Kind   string `json:"kind"`
			Symbol string `json:"symbol"`
			Reason string `json:"reason"`
		} `json:"findings"`
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil || len(got) != 2 {
		t.Fatalf("--json: %v\n%s", err, stdout)
	}
	if g := got[0]; g.Missing != 11 || g.Agree || len(g.Findings) != 10 || g.Findings[0].Kind != "missing" || g.Skipped != nil {
		t.Errorf("--json, 11 missing: %+v", g)
	}
	if g := got[1]; g.Missing != 0 || !g.Agree || len(g.Findings) != 1 || g.Findings[0].Kind != "skipped" || g.Findings[0].Reason != "outermost" ||
		g.Findings[0].Symbol != "_start" || g.Skipped["outermost"] != 1 {
		t.Errorf("--json, glibc: %+v", g)
	}
}
