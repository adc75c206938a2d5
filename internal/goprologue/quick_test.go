package goprologue

import (
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/arch/arm64/arm64asm"
	"golang.org/x/arch/x86/x86asm"
)

// checkQuick runs QuickAMD64 (QuickARM64 for arm64) over every function
// of s that is not assembly: where it describes one, its rules must be
// Analyze's. With
// wantMost (a binary of Go 1.19 or of 1.21 and later, whose shapes it
// knows) it must take most of them, or it saves nothing.
func checkQuick(t *testing.T, s *survey, wantMost bool) {
	t.Helper()
	quick := QuickAMD64
	if s.arch == ARM64 {
		quick = QuickARM64
	}
	taken, goFuncs := 0, 0
	for i, g := range s.funcs {
		if g.asm {
			continue
		}
		goFuncs++
		q, ok := quick(g.code, g.entry, g.sp)
		if !ok {
			continue
		}
		taken++
		if s.errs[i] != nil {
			t.Errorf("%s: the fast path describes it, Analyze fails: %v", g.name, s.errs[i])
			continue
		}
		if diff := cmp.Diff(s.results[i], q); diff != "" {
			t.Errorf("%s: the fast path differs from Analyze (-Analyze +Quick):\n%s", g.name, diff)
		}
	}
	t.Logf("the fast path took %d of %d Go functions", taken, goFuncs)
	if wantMost && taken < goFuncs/2 {
		t.Errorf("the fast path took %d of %d Go functions; want most", taken, goFuncs)
	}
}

// TestQuickGoCommand holds the fast paths to Analyze on whole binaries:
// the go command and compile of the Go running the tests and of Debian's
// older Go (Go 1.19's frames), and the go command built for arm64.
func TestQuickGoCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("reads a large binary")
	}
	roots := []string{goRoot(t)}
	// Debian's older Go (golang-1.19-go in CI): Go 1.19's frames.
	old, _ := filepath.Glob("/usr/lib/go-1.*")
	roots = append(roots, old...)
	for _, root := range roots {
		for _, p := range []string{filepath.Join(root, "bin", "go"), filepath.Join(root, "pkg", "tool", "linux_amd64", "compile")} {
			name := filepath.Base(root) + "/" + filepath.Base(p)
			t.Run(name, func(t *testing.T) { checkQuick(t, analyzeBinary(t, p), true) })
		}
	}
	t.Run("arm64/go", func(t *testing.T) {
		bin := filepath.Join(t.TempDir(), "go")
		cmd := exec.Command(filepath.Join(roots[0], "bin", "go"), "build", "-trimpath", "-o", bin, "cmd/go")
		cmd.Env = append(os.Environ(), "GOARCH=arm64", "CGO_ENABLED=0", "GOFLAGS=", "GOTOOLCHAIN=local")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("building the go command for arm64: %v\n%s", err, out)
		}
		checkQuick(t, analyzeBinary(t, bin), true)
	})
}

// TestQuickDecodeX86 holds quickDecodeX86 to x86asm on each encoding it
// reads itself, with displacements and immediates of every sign and
// size, followed by bytes that must not be read, and on a few others it
// passes on to x86asm.
func TestQuickDecodeX86(t *testing.T) {
	var imm8 = []byte{0x00, 0x10, 0x7f, 0x80, 0xf0, 0xff}
	var imm32 = [][]byte{{0, 0, 0, 0}, {0xd0, 0x27, 0, 0}, {0xb0, 0xfe, 0xff, 0xff}, {0xff, 0xff, 0xff, 0x7f}, {0, 0, 0, 0x80}}
	cases := [][]byte{{0x55}, {0x48, 0x89, 0xe5}, {0x49, 0x89, 0xe4}, {0x49, 0x3b, 0x66, 0x10}, {0x4d, 0x3b, 0x66, 0x10},
		{0x48, 0x89, 0x2c, 0x24}, {0x48, 0x8b, 0x2c, 0x24},
		{0x48, 0x89, 0xe0}, {0x49, 0x3b, 0x66, 0x18}, {0x4c, 0x8d, 0x64, 0x25, 0x10}, {0x41, 0x55}, {0x90}}
	for _, i := range imm8 {
		cases = append(cases, []byte{0x76, i}, []byte{0x72, i}, []byte{0x4c, 0x8d, 0x64, 0x24, i})
		for _, p := range [][]byte{{0x49, 0x83, 0xec}, {0x48, 0x83, 0xec}, {0x49, 0x83, 0xc4}, {0x48, 0x83, 0xc4},
			{0x48, 0x89, 0x6c, 0x24}, {0x48, 0x8b, 0x6c, 0x24}} {
			cases = append(cases, append(append([]byte{}, p...), i))
		}
	}
	for _, i := range imm32 {
		for _, p := range [][]byte{{0x0f, 0x86}, {0x0f, 0x82}, {0x4c, 0x8d, 0xa4, 0x24},
			{0x49, 0x81, 0xec}, {0x48, 0x81, 0xec}, {0x49, 0x81, 0xc4}, {0x48, 0x81, 0xc4},
			{0x48, 0x89, 0xac, 0x24}, {0x48, 0x8b, 0xac, 0x24}} {
			cases = append(cases, append(append([]byte{}, p...), i...))
		}
	}
	for _, c := range cases {
		b := append(append([]byte{}, c...), 0x0f, 0x0b) // UD2 after: not part of it
		want, werr := x86asm.Decode(b, 64)
		got, gerr := quickDecodeX86(b)
		if (werr != nil) != (gerr != nil) || got.Op != want.Op || got.Len != want.Len || got.Args != want.Args {
			t.Errorf("% x: quickDecodeX86 gives %v %#v len %d (%v), x86asm %v %#v len %d (%v)", c, got.Op, got.Args, got.Len, gerr, want.Op, want.Args, want.Len, werr)
		}
		// Cut short, it must not read past the end.
		if _, err := quickDecodeX86(c[:len(c)-1]); err == nil && len(c) > 1 {
			if in, _ := x86asm.Decode(c[:len(c)-1], 64); in.Len == 0 {
				t.Errorf("% x cut short: decoded", c)
			}
		}
	}
}

// TestQuickARM64Words holds the words QuickARM64 matches to what
// arm64asm decodes them to, in Go's syntax, for frame sizes of every
// width the encodings take.
func TestQuickARM64Words(t *testing.T) {
	text := func(w uint32) string {
		var b [4]byte
		binary.LittleEndian.PutUint32(b[:], w)
		in, err := arm64asm.Decode(b[:])
		if err != nil {
			return err.Error()
		}
		return arm64asm.GoSyntax(in, 0, nil, nil)
	}
	want := map[uint32]string{
		a64LoadGuard:   "MOVD 16(R28), R16",
		a64LoadGuard1:  "MOVD 24(R28), R16",
		a64CmpGuard:    "CMP R16, RSP",
		a64CmpGuardR17: "CMP R16, R17",
		a64StoreFP:     "MOVD R29, -8(RSP)",
		a64SetFP:       "SUB $8, RSP, R29",
		a64LoadFP:      "MOVD -8(RSP), R29",
		a64LoadFPLR:    "LDP -8(RSP), (R29, R30)",
		a64StoreFPLR:   "STP (R29, R30), -8(R20)",
		a64SetSPR20:    "MOVD R20, RSP",
		a64NOP:         "NOOP",
		a64RET:         "RET",
	}
	for _, fs := range []int64{8, 16, 144, 248, 256, 560, 4088} {
		if fs <= 256 {
			pre := uint32(0xf8000ffe) | uint32(-fs)&0x1ff<<12
			want[pre] = fmt.Sprintf("MOVD.W R30, -%d(RSP)", fs)
			if got, ok := a64PreIndexLR(pre); !ok || got != fs {
				t.Errorf("a64PreIndexLR(%#x) = %d, %v; want %d", pre, got, ok, fs)
			}
		}
		if fs < 256 {
			want[a64PostIndexLR(fs)] = fmt.Sprintf("MOVD.P %d(RSP), R30", fs)
		}
		want[a64AddSP(fs)] = fmt.Sprintf("ADD $%d, RSP, RSP", fs)
		for _, rd := range []uint32{17, 20} {
			w := uint32(0xd10003e0) | rd | uint32(fs)<<10
			want[w] = fmt.Sprintf("SUB $%d, RSP, R%d", fs, rd)
			if got := a64SubImm(w, rd); got != fs {
				t.Errorf("a64SubImm(%#x) = %d; want %d", w, got, fs)
			}
		}
	}
	for w, s := range want {
		if got := text(w); got != s {
			t.Errorf("%#08x decodes to %q; QuickARM64 takes it for %q", w, got, s)
		}
	}
	if got := text(a64BLS | 5<<5); !strings.HasPrefix(got, "BLS ") {
		t.Errorf("%#08x decodes to %q; QuickARM64 takes it for BLS", a64BLS|5<<5, got)
	}
	if got := text(a64B | 5); !strings.HasPrefix(got, "JMP ") {
		t.Errorf("%#08x decodes to %q; QuickARM64 takes it for B", a64B|5, got)
	}
}
