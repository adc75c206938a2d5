package codeentry

import (
	"bufio"
	"bytes"
	"debug/elf"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/internal/codeflow"
	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
)

// toolchain is one way of building testdata/fixture.c.
type toolchain struct {
	name                  string
	cc, strip, objdump    string
	flags                 []string
	asm                   string   // an extra assembly source, "" for none
	callees, pointedTo    []string // functions a call or a pointer must find once stripped
	wantNoReturnStubNames []string // PLT stubs that must be NoReturn
}

var toolchains = []toolchain{
	{name: "amd64-pie", cc: "gcc", strip: "strip", objdump: "objdump", flags: []string{"-O2", "-fpie", "-pie"},
		callees: []string{"helper", "twice", "work"}, pointedTo: []string{"op_add", "op_mul", "op_neg", "_start"},
		wantNoReturnStubNames: []string{"abort", "exit"}},
	{name: "amd64-relr", cc: "gcc", strip: "strip", objdump: "objdump", flags: []string{"-O2", "-fpie", "-pie", "-Wl,-z,pack-relative-relocs"},
		callees: []string{"helper", "twice", "work"}, pointedTo: []string{"op_add", "op_mul", "op_neg", "_start"},
		wantNoReturnStubNames: []string{"abort", "exit"}},
	{name: "amd64-nopie", cc: "gcc", strip: "strip", objdump: "objdump", flags: []string{"-O2", "-fno-pie", "-no-pie"},
		callees: []string{"helper", "twice", "work"}, pointedTo: []string{"_start"},
		wantNoReturnStubNames: []string{"abort", "exit"}},
	{name: "amd64-sections", cc: "gcc", strip: "strip", objdump: "objdump", flags: []string{"-O2", "-fpie", "-pie", "-ffunction-sections", "-fcf-protection=full", "-Wl,-z,ibtplt"},
		callees: []string{"helper", "twice", "work"}, pointedTo: []string{"op_add", "op_mul", "op_neg", "_start"},
		wantNoReturnStubNames: []string{"abort", "exit"}},
	{name: "arm64-pie", cc: "aarch64-linux-gnu-gcc", strip: "aarch64-linux-gnu-strip", objdump: "aarch64-linux-gnu-objdump",
		flags: []string{"-O2", "-fpie", "-pie"}, asm: "data_arm64.S",
		callees: []string{"helper", "twice", "work"}, pointedTo: []string{"op_add", "op_mul", "op_neg", "_start"},
		wantNoReturnStubNames: []string{"abort", "exit"}},
	{name: "arm64-nopie-bti", cc: "aarch64-linux-gnu-gcc", strip: "aarch64-linux-gnu-strip", objdump: "aarch64-linux-gnu-objdump",
		flags: []string{"-O2", "-fno-pie", "-no-pie", "-mbranch-protection=standard"}, asm: "data_arm64.S",
		callees: []string{"helper", "twice", "work"}, pointedTo: []string{"_start"},
		wantNoReturnStubNames: []string{"abort", "exit"}},
}

func needTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
}

func run(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}

// build compiles the fixture and returns the unstripped and stripped
// files' paths.
func build(t *testing.T, tc toolchain) (full, stripped string) {
	t.Helper()
	needTools(t, tc.cc, tc.strip, tc.objdump)
	dir := t.TempDir()
	full = filepath.Join(dir, "prog")
	args := append([]string{}, tc.flags...)
	args = append(args, "-o", full, filepath.Join("testdata", "fixture.c"))
	if tc.asm != "" {
		args = append(args, filepath.Join("testdata", tc.asm))
	}
	run(t, tc.cc, args...)
	stripped = filepath.Join(dir, "prog.stripped")
	run(t, tc.strip, "-o", stripped, full)
	return full, stripped
}

// truth is the unstripped file's functions in its text, but for the PLT:
// starts (what must be found) and cold parts (what must not be).
type truth struct {
	starts map[uint64]string
	cold   map[uint64]string
	byName map[string]uint64
	// labels are untyped symbols in the text: assembly functions
	// written without .type (glibc's __wrap_main), or labels in one.
	labels map[uint64]string
}

func readTruth(t *testing.T, path string) truth {
	t.Helper()
	ef, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	syms, err := ef.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	tr := truth{labels: map[uint64]string{}, starts: map[uint64]string{}, cold: map[uint64]string{}, byName: map[string]uint64{}}
	for _, s := range syms {
		typ := elf.ST_TYPE(s.Info)
		if (typ != elf.STT_FUNC && typ != elf.STT_NOTYPE) || s.Section == elf.SHN_UNDEF || int(s.Section) >= len(ef.Sections) {
			continue
		}
		sec := ef.Sections[s.Section]
		if sec.Flags&elf.SHF_EXECINSTR == 0 || strings.HasPrefix(sec.Name, ".plt") {
			continue
		}
		if typ == elf.STT_NOTYPE {
			if !isMapping(s.Name) {
				tr.labels[s.Value] = s.Name
			}
			continue
		}
		if coldName.MatchString(s.Name) {
			tr.cold[s.Value] = s.Name
			continue
		}
		tr.starts[s.Value] = s.Name
		tr.byName[s.Name] = s.Value
	}
	return tr
}

func loadPath(t *testing.T, path string, opt Options) (*codeflow.Code, Notes, *collector) {
	t.Helper()
	f, err := elfread.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	code, notes, c, err := load(f, opt)
	if err != nil {
		t.Fatal(err)
	}
	return code, notes, c
}

// pltStubNames reads objdump's names of the PLT stubs: "<abort@plt>".
func pltStubNames(t *testing.T, objdump, path string) map[uint64]string {
	t.Helper()
	out := run(t, objdump, "-d", "-j", ".plt", "-j", ".plt.sec", "-j", ".plt.got", path)
	re := regexp.MustCompile(`^([0-9a-f]+) <([^@>]+)@plt>:`)
	m := map[uint64]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if g := re.FindStringSubmatch(sc.Text()); g != nil {
			a, _ := strconv.ParseUint(g[1], 16, 64)
			m[a] = g[2]
		}
	}
	return m
}

var srcNames = [...]string{"symbol", "debug-file", "gap", "call", "tail-call", "pointer", "padding"}

func TestFixtures(t *testing.T) {
	for _, tc := range toolchains {
		t.Run(tc.name, func(t *testing.T) {
			full, stripped := build(t, tc)
			tr := readTruth(t, full)
			checkUnstripped(t, tc, full, tr)
			checkStripped(t, tc, stripped, tr)
			checkNoReturn(t, tc, full, stripped)
		})
	}
}

// checkUnstripped: with its symbols, every function is an entry from
// them and no cold part is one.
func checkUnstripped(t *testing.T, tc toolchain, path string, tr truth) {
	code, notes, _ := loadPath(t, path, Options{DebugDirs: []string{}})
	got := map[uint64]codeflow.Entry{}
	for _, e := range code.Entries {
		got[e.Addr] = e
		if name, ok := tr.cold[e.Addr]; ok {
			t.Errorf("unstripped: cold part %s at %#x is an entry (%s)", name, e.Addr, srcNames[e.Source])
		}
		if _, ok := tr.starts[e.Addr]; !ok {
			t.Errorf("unstripped: entry %#x (%s) is no function's start", e.Addr, srcNames[e.Source])
		}
	}
	for a, name := range tr.starts {
		if e, ok := got[a]; !ok || e.Source != codeflow.FromSymbol {
			t.Errorf("unstripped: %s at %#x: entry %+v, want one from its symbol", name, a, e)
		}
	}
	if tc.asm != "" {
		p := tr.byName["pooled"]
		if !inSpans(notes.Data, p+8) || inSpans(notes.Data, p) {
			t.Errorf("data ranges %#x: want pooled's literal at %#x, not its code at %#x", notes.Data, p+8, p)
		}
	}
}

// checkStripped: every entry found without symbols is a function's
// start, and the functions each source must find are found by it.
func checkStripped(t *testing.T, tc toolchain, path string, tr truth) {
	code, notes, c := loadPath(t, path, Options{DebugDirs: []string{}})
	var hit, miss [len(srcNames)]int
	for _, e := range code.Entries {
		if name, ok := tr.cold[e.Addr]; ok {
			t.Errorf("stripped: cold part %s at %#x is an entry (%s)", name, e.Addr, srcNames[e.Source])
			continue
		}
		if _, ok := tr.starts[e.Addr]; !ok && e.Source >= codeflow.FromGap && afterLeadingPad(code, tr, e.Addr) {
			// Documented cases: the entry is an assembly function
			// without .type, or past the nops a function starts with
			// (AArch64's BTI placeholder): the state there is the
			// entry's, so its rows are right; the nops get none.
			hit[e.Source]++
			t.Logf("stripped: entry %#x (%s) is an untyped label or after a function's leading padding", e.Addr, srcNames[e.Source])
			continue
		}
		if _, ok := tr.starts[e.Addr]; !ok {
			miss[e.Source]++
			t.Errorf("stripped: entry %#x (%s, sources %08b) is no function's start", e.Addr, srcNames[e.Source], c.cands[e.Addr].srcs)
			continue
		}
		hit[e.Source]++
	}
	for s := range srcNames {
		found := 0
		for a := range tr.starts {
			if k := c.cands[a]; k != nil && k.srcs&(1<<s) != 0 {
				found++
			}
		}
		if hit[s]+miss[s]+found > 0 {
			t.Logf("%s: kept %d right, %d wrong; recall of this source %d/%d", srcNames[s], hit[s], miss[s], found, len(tr.starts))
		}
	}
	t.Logf("found %v, rejected %v, problems %v", notes.Found, notes.Rejected, notes.Problems)
	want := func(names []string, src codeflow.Source) {
		for _, n := range names {
			a, ok := tr.byName[n]
			if !ok {
				t.Errorf("fixture has no function %s", n)
				continue
			}
			if k := c.cands[a]; k == nil || k.srcs&(1<<src) == 0 {
				t.Errorf("stripped: %s at %#x not found by %s", n, a, srcNames[src])
			}
		}
	}
	want(tc.callees, codeflow.FromCall)
	want(tc.pointedTo, codeflow.FromPointer)
	all := 0
	for a := range tr.starts {
		if c.cands[a] != nil {
			all++
		}
	}
	t.Logf("recall of all sources: %d/%d functions", all, len(tr.starts))
}

// checkNoReturn: the PLT stubs of functions that do not return are
// NoReturn, and the others are not.
func checkNoReturn(t *testing.T, tc toolchain, full, stripped string) {
	stubs := pltStubNames(t, tc.objdump, full)
	code, _, _ := loadPath(t, stripped, Options{DebugDirs: []string{}})
	seen := map[string]bool{}
	for a, name := range stubs {
		if got, want := code.NoReturn(a), isNoReturn(name); got != want {
			t.Errorf("NoReturn(%#x, %s@plt) = %v, want %v", a, name, got, want)
		}
		seen[name] = true
	}
	for _, n := range tc.wantNoReturnStubNames {
		if !seen[n] {
			t.Errorf("objdump shows no %s@plt stub: the fixture does not test it", n)
		}
	}
}

// TestDebugFile: a stripped file's functions come back from its debug
// file, found by build-id under a .build-id tree, or by .gnu_debuglink.
func TestDebugFile(t *testing.T) {
	tc := toolchains[0]
	needTools(t, "objcopy")
	full, stripped := build(t, tc)
	tr := readTruth(t, full)
	ef, err := elfread.Open(full)
	if err != nil {
		t.Fatal(err)
	}
	id := buildID(ef)
	ef.Close()
	if len(id) < 2 {
		t.Skip("the toolchain gives no build-id")
	}
	h := hex.EncodeToString(id)
	root := t.TempDir()
	dbg := filepath.Join(root, ".build-id", h[:2], h[2:]+".debug")
	if err := os.MkdirAll(filepath.Dir(dbg), 0o755); err != nil {
		t.Fatal(err)
	}
	run(t, "objcopy", "--only-keep-debug", full, dbg)

	linkRoot := t.TempDir()
	linked := filepath.Join(filepath.Dir(stripped), "linked")
	absDir, _ := filepath.Abs(filepath.Dir(linked))
	linkDbg := filepath.Join(linkRoot, absDir, "prog.debug")
	if err := os.MkdirAll(filepath.Dir(linkDbg), 0o755); err != nil {
		t.Fatal(err)
	}
	run(t, "objcopy", "--only-keep-debug", "--remove-section=.note.gnu.build-id", full, linkDbg)
	run(t, "objcopy", "--remove-section=.note.gnu.build-id", "--add-gnu-debuglink="+linkDbg, stripped, linked)

	for _, c := range []struct {
		name, path string
		dirs       []string
		want       string // the debug file, "" for none
	}{
		{"build-id", stripped, []string{t.TempDir(), root}, dbg},
		{"none there", stripped, []string{t.TempDir()}, ""},
		{"debuglink", linked, []string{linkRoot}, linkDbg},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, notes, _ := loadPath(t, c.path, Options{DebugDirs: c.dirs})
			if notes.DebugFile != c.want {
				t.Fatalf("debug file %q (%s), want %q", notes.DebugFile, notes.DebugNote, c.want)
			}
			n := 0
			for _, e := range code.Entries {
				if e.Source == codeflow.FromDebugFile {
					n++
					if _, ok := tr.starts[e.Addr]; !ok {
						t.Errorf("entry %#x from the debug file is no function's start", e.Addr)
					}
				}
			}
			if c.want != "" && n != len(tr.starts) {
				t.Errorf("%d entries from the debug file, want %d", n, len(tr.starts))
			}
			if c.want == "" && (n != 0 || notes.DebugNote == "") {
				t.Errorf("%d entries from no debug file; note %q", n, notes.DebugNote)
			}
		})
	}
}

// afterLeadingPad says only padding lies between the function start (or
// untyped label: an assembly function) nearest below or at addr and
// addr.
func afterLeadingPad(code *codeflow.Code, tr truth, addr uint64) bool {
	start, ok := uint64(0), false
	for _, m := range []map[uint64]string{tr.starts, tr.labels} {
		for a := range m {
			if a <= addr && (!ok || a > start) {
				start, ok = a, true
			}
		}
	}
	if !ok {
		return false
	}
	for _, r := range code.Text {
		if start < r.Addr || addr > r.Addr+uint64(len(r.Data)) {
			continue
		}
		for a := start; a < addr; {
			n := padLen(code.Machine, r.Data[a-r.Addr:], a)
			if n == 0 {
				return false
			}
			a += uint64(n)
		}
		return true
	}
	return false
}
