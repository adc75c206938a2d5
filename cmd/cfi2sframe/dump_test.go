package main

import (
	"bytes"
	"debug/elf"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
	"github.com/cfi2sframe/cfi2sframe/internal/sfsection"
	"github.com/cfi2sframe/cfi2sframe/internal/testing/toolchain"
	"github.com/cfi2sframe/cfi2sframe/sframe"
)

var spaces = regexp.MustCompile(` +`)

// normalize collapses runs of spaces, trims line ends and drops the
// "file format" line, which names the file differently.
func normalize(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, "file format") {
			continue
		}
		out = append(out, strings.TrimRight(spaces.ReplaceAllString(l, " "), " "))
	}
	return strings.TrimSpace(strings.Join(out, "\n"))
}

func goldens(t *testing.T) []string {
	t.Helper()
	m, err := filepath.Glob("../../testdata/sframe/*.objdump")
	if err != nil {
		t.Fatal(err)
	}
	if len(m) == 0 {
		t.Skip("no fixtures in testdata/sframe")
	}
	return m
}

// isV1 reports whether a fixture holds SFrame V1: its golden comes from
// binutils 2.40, which neither relocates .o files nor prints the fixed RA
// offset; sid objdump refuses V1, so there is no decoder of record to match.
func isV1(golden string) bool { return strings.HasPrefix(filepath.Base(golden), "v1-") }

func TestDumpMatchesGoldens(t *testing.T) {
	for _, g := range goldens(t) {
		name := strings.TrimSuffix(g, ".objdump")
		t.Run(filepath.Base(name), func(t *testing.T) {
			if isV1(g) {
				t.Skip("V1 golden is from binutils 2.40 (see isV1)")
			}
			want, err := os.ReadFile(g)
			if err != nil {
				t.Fatal(err)
			}
			var buf, stderr bytes.Buffer
			if err := dumpFile(&buf, &stderr, name, false); err != nil {
				t.Fatal(err)
			}
			if got, w := normalize(buf.String()), normalize(string(want)); got != w {
				t.Errorf("dump differs from golden\n--- got\n%s\n--- want\n%s", got, w)
			}
			if stderr.Len() > 0 {
				t.Errorf("GNU's layout, yet dump says: %s", stderr.String())
			}
		})
	}
}

// objdumpFor returns sid objdump for a fixture's architecture, from the
// reference toolchain or the oracle unpacked under /tmp/oracle.
func objdumpFor(t *testing.T, path string) string {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	arch := map[elf.Machine]string{elf.EM_X86_64: "x86_64", elf.EM_AARCH64: "aarch64", elf.EM_S390: "s390x"}[f.Machine]
	if arch == "" {
		t.Skipf("no objdump for machine %v", f.Machine)
	}
	tool := arch + "-objdump"
	if p, ok := toolchain.Path("sid", tool); ok {
		return p
	}
	if p := filepath.Join("/tmp/oracle/sid/bin", tool); fileExists(p) {
		return p
	}
	return toolchain.Tool(t, "sid", tool)
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

func TestDumpMatchesLiveObjdump(t *testing.T) {
	for _, g := range goldens(t) {
		name := strings.TrimSuffix(g, ".objdump")
		t.Run(filepath.Base(name), func(t *testing.T) {
			if isV1(g) {
				t.Skip("sid objdump does not decode V1")
			}
			objdump := objdumpFor(t, name)
			want, err := exec.Command(objdump, "--sframe", name).Output()
			if err != nil {
				t.Fatalf("%s --sframe %s: %v", objdump, name, err)
			}
			var buf bytes.Buffer
			if err := dumpFile(&buf, io.Discard, name, false); err != nil {
				t.Fatal(err)
			}
			if got, w := normalize(buf.String()), normalize(string(want)); got != w {
				t.Errorf("dump differs from live objdump\n--- got\n%s\n--- want\n%s", got, w)
			}
		})
	}
}

func TestDumpErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// A 30-byte raw section claiming 4 billion FDEs.
	huge := make([]byte, 30)
	copy(huge, []byte{0xe2, 0xde, 3, 4, 3, 0, 0xf8, 0, 0xff, 0xff, 0xff, 0xff})
	tests := []struct {
		name string
		path string
		want string
	}{
		{"missing", filepath.Join(dir, "nope"), "no such file"},
		{"not elf", write("text", []byte("hello, world\n")), "not an ELF file"},
		{"huge count", write("huge.sframe", huge), "FDEs"},
		{"truncated header", write("short.sframe", []byte{0xe2, 0xde, 3}), "too short"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := dumpFile(&buf, io.Discard, tt.path, false)
			if err == nil {
				t.Fatalf("no error, output:\n%s", buf.String())
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), tt.path) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q: want one line naming %s and containing %q", err, tt.path, tt.want)
			}
		})
	}
}

// TestEncoderOutputReadByObjdump swaps a linked fixture's .sframe for our
// re-encoding with the PCREL flag toggled (same size, so objcopy
// --update-section keeps the layout) and checks that sid objdump still
// prints the golden: V2 with PCREL is a form no packaged GNU as emits.
func TestEncoderOutputReadByObjdump(t *testing.T) {
	for _, g := range goldens(t) {
		name := strings.TrimSuffix(g, ".objdump")
		if isV1(g) || strings.HasSuffix(name, ".o") {
			continue
		}
		t.Run(filepath.Base(name), func(t *testing.T) {
			objdump := objdumpFor(t, name)
			objcopy := strings.TrimSuffix(objdump, "objdump") + "objcopy"
			if !fileExists(objcopy) {
				t.Skipf("%s not found", objcopy)
			}
			f, err := elfread.Open(name)
			if err != nil {
				t.Fatal(err)
			}
			es, err := f.SFrame()
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			sec, err := sfsection.Decode(es.Data, es.Addr)
			if err != nil {
				t.Fatal(err)
			}
			o := sec.Options()
			o.PCRel = !o.PCRel
			b, err := sframe.Encode(sec.Functions(), o)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			raw, out := filepath.Join(dir, "sframe.bin"), filepath.Join(dir, "out")
			if err := os.WriteFile(raw, b, 0o644); err != nil {
				t.Fatal(err)
			}
			if msg, err := exec.Command(objcopy, "--update-section", ".sframe="+raw, name, out).CombinedOutput(); err != nil {
				t.Fatalf("objcopy: %v\n%s", err, msg)
			}
			got, err := exec.Command(objdump, "--sframe", out).Output()
			if err != nil {
				t.Fatalf("objdump: %v", err)
			}
			want, err := os.ReadFile(g)
			if err != nil {
				t.Fatal(err)
			}
			// Only the flags line may change.
			drop := func(s string) string {
				s = normalize(s)
				s = strings.ReplaceAll(s, ",\n SFRAME_F_FDE_FUNC_START_PCREL", "")
				s = strings.ReplaceAll(s, "Flags: SFRAME_F_FDE_FUNC_START_PCREL", "Flags: NONE")
				s = strings.ReplaceAll(s, "Flags: SFRAME_F_FDE_SORTED,\n SFRAME_F_FDE_FUNC_START_PCREL", "Flags: SFRAME_F_FDE_SORTED")
				return s
			}
			if drop(string(got)) != drop(string(want)) {
				t.Errorf("objdump of our re-encoding differs\n--- got\n%s\n--- want\n%s", got, want)
			}
		})
	}
}
