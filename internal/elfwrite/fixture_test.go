package elfwrite

import (
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestFixtures inserts an empty SFrame section into the committed
// libc-free programs (testdata/build.sh) and, where the machine or
// qemu-user can, runs them. These need no compiler.
func TestFixtures(t *testing.T) {
	tests := []struct {
		file string
		arch string
		sf   []byte
		// refused: code follows the program header table in the first
		// PT_LOAD (these are linked without notes or .interp), so the
		// linker-like layout is refused and only the opt-in one is made.
		refused bool
	}{
		{"tiny-x86_64", "amd64", minimalSFrame(binary.LittleEndian, 3, -8), false},
		{"tiny-x86_64-pie", "amd64", minimalSFrame(binary.LittleEndian, 3, -8), false},
		{"tiny-aarch64", "arm64", minimalSFrame(binary.LittleEndian, 2, 0), true},
		{"tiny-aarch64-pie", "arm64", minimalSFrame(binary.LittleEndian, 2, 0), true},
		{"tiny-aarch64_be", "arm64be", minimalSFrame(binary.BigEndian, 1, 0), true},
		{"tiny-s390x", "s390x", minimalSFrame(binary.BigEndian, 4, 0), true},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			in, err := os.ReadFile(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			for _, opts := range []Options{{}, {AppendSegment: true, MaxPad: -1}} {
				p, err := NewPlan(in, uint64(len(tc.sf)), opts)
				var le *LayoutError
				if !opts.AppendSegment && errors.As(err, &le) != tc.refused {
					t.Fatalf("refused %v (%v), want %v", le != nil, err, tc.refused)
				}
				if le != nil {
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				out, err := p.Bytes(tc.sf)
				if err != nil {
					t.Fatal(err)
				}
				checkOutput(t, in, out, p, tc.sf)
				if opts.MaxPad < 0 {
					continue // compact placement needs a kernel that finds e_phoff in any PT_LOAD
				}
				var runner []string
				switch {
				case runtime.GOOS == "linux" && runtime.GOARCH == tc.arch:
				default:
					qemu := map[string]string{"amd64": "qemu-x86_64-static", "arm64": "qemu-aarch64-static", "arm64be": "qemu-aarch64_be-static", "s390x": "qemu-s390x-static"}[tc.arch]
					q, err := exec.LookPath(qemu)
					if err != nil {
						t.Skip("cannot run " + tc.arch + " code here: no " + qemu)
					}
					runner = []string{q}
				}
				bin := filepath.Join(t.TempDir(), tc.file)
				if err := os.WriteFile(bin, out, 0o755); err != nil {
					t.Fatal(err)
				}
				cmd := exec.Command(bin)
				if runner != nil {
					cmd = exec.Command(runner[0], bin)
				}
				got, err := cmd.CombinedOutput()
				if err != nil || string(got) != "tiny\n" {
					t.Errorf("modified %s: output %q, error %v; want \"tiny\\n\"", tc.file, got, err)
				}
				objdump := sidTool(map[string]string{"amd64": "x86_64", "arm64": "aarch64", "arm64be": "aarch64", "s390x": "s390x"}[tc.arch] + "-objdump")
				if objdump == "" {
					continue
				}
				dump, err := exec.Command(objdump, "--sframe", bin).CombinedOutput()
				if err != nil || !strings.Contains(string(dump), "SFRAME_VERSION_3") || !strings.Contains(string(dump), "Num FDEs: 0") {
					t.Errorf("objdump --sframe on modified %s (%v):\n%s", tc.file, err, dump)
				}
			}
		})
	}
}

// TestSectionAcrossImageEnd: a non-loaded section that starts inside the
// loaded image and runs past its end (a hostile layout the fuzzer made)
// moves behind the new segment whole, as the sections after the image
// do: its bytes are not cut where .sframe begins, and a symbol table so
// placed is not rewritten over .sframe.
func TestSectionAcrossImageEnd(t *testing.T) {
	in, err := os.ReadFile(filepath.Join("testdata", "tiny-x86_64"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := parse(in)
	if err != nil {
		t.Fatal(err)
	}
	sf := minimalSFrame(binary.LittleEndian, 3, -8)
	for i, s := range f.shs {
		if i == 0 || s.flags&shfAlloc != 0 || s.typ == shtNobits || i == f.shstrndx {
			continue
		}
		t.Run(f.sectionName(s), func(t *testing.T) {
			b := slices.Clone(in)
			// .rodata, the image's last bytes, ends at 0x2006.
			binary.LittleEndian.PutUint64(b[f.shoff+uint64(i)*shdrSize+24:], 0x2004)
			p, err := NewPlan(b, uint64(len(sf)), Options{})
			if err != nil {
				t.Fatal(err)
			}
			out, err := p.Bytes(sf)
			if err != nil {
				t.Fatal(err)
			}
			checkOutput(t, b, out, p, sf)
		})
	}
}

// TestDisjoint: a plan whose patch would write into .sframe, or whose
// pieces overlap, is refused rather than written.
func TestDisjoint(t *testing.T) {
	tests := []struct {
		name    string
		pieces  []piece
		patches []patch
		ok      bool
	}{
		{"apart", []piece{{off: 0, size: 0x100}, {off: 0x100, size: 0x40}}, []patch{{off: 0x10, zeros: 0xf0}, {off: 0x140, data: make([]byte, 8)}}, true},
		{"patch into .sframe", []piece{{off: 0, size: 0x100}, {off: 0x100, size: 0x40}}, []patch{{off: 0xf8, data: make([]byte, 0x10)}}, false},
		{"zeros over .sframe", []piece{{off: 0, size: 0x100}, {off: 0x100, size: 0x40}}, []patch{{off: 0x120, zeros: 1}}, false},
		{"pieces overlap", []piece{{off: 0, size: 0x108}, {off: 0x100, size: 0x40}}, nil, false},
	}
	for _, tc := range tests {
		p := &Plan{pieces: tc.pieces, patches: tc.patches, sfPiece: 1}
		if err := p.disjoint(); (err == nil) != tc.ok {
			t.Errorf("%s: disjoint() = %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}
