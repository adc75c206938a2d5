package isa

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// memForms are the memory operands each corpus line holding M is written
// with: no displacement, disp8 (compressible by EVEX's N or not), disp32,
// SIB with index and scale, RBP/R13 (which need a displacement), RSP/R12
// (which need a SIB byte) and RIP-relative.
var memForms = []string{
	"(%rax)", "0x40(%rsp)", "-0x80(%rbp)", "0x12345(%r12,%r13,8)",
	"0x100(%rip)", "(%r13)", "0x7(%rsp,%rcx,2)", "-0x1000(%r8)", "0x20(%r9,%rax,4)",
}

// expandCorpus writes each template of the corpus once, or once per
// memory form if it has an M.
func expandCorpus(text string) []string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		if !strings.Contains(line, "M") {
			out = append(out, line)
			continue
		}
		for _, m := range memForms {
			out = append(out, strings.ReplaceAll(line, "M", m))
		}
	}
	return out
}

// disLine is one instruction objdump disassembled.
type disLine struct {
	code []byte
	text string // mnemonic and operands, AT&T syntax
}

// objdumpLines disassembles file (only section if not empty) with
// objdump, one instruction a line.
func objdumpLines(t *testing.T, file, section string) []disLine {
	t.Helper()
	args := []string{"-d", "--insn-width=16"}
	if section != "" {
		args = append(args, "-j", section)
	}
	out, err := exec.Command("objdump", append(args, file)...).Output()
	if err != nil {
		t.Fatalf("objdump %s: %v", file, err)
	}
	var lines []disLine
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		if len(f) < 3 || !strings.HasSuffix(strings.TrimSpace(f[0]), ":") {
			continue
		}
		code, err := hex.DecodeString(strings.ReplaceAll(strings.TrimSpace(f[1]), " ", ""))
		if err != nil || len(code) == 0 {
			continue
		}
		text := strings.Join(f[2:], " ")
		if i := strings.Index(text, "#"); i >= 0 {
			text = text[:i]
		}
		lines = append(lines, disLine{code: code, text: strings.TrimSpace(text)})
	}
	return lines
}

var gprNumber = func() map[string]int {
	m := map[string]int{}
	names := [][]string{
		{"rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi"},
		{"eax", "ecx", "edx", "ebx", "esp", "ebp", "esi", "edi"},
		{"ax", "cx", "dx", "bx", "sp", "bp", "si", "di"},
		{"al", "cl", "dl", "bl", "spl", "bpl", "sil", "dil"},
	}
	for _, set := range names {
		for i, n := range set {
			m[n] = i
		}
	}
	for i := 8; i < 16; i++ {
		for _, suf := range []string{"", "d", "w", "b"} {
			m["r"+strconv.Itoa(i)+suf] = i
		}
	}
	return m
}()

// splitOperands splits AT&T operands at the commas outside parentheses
// and braces, dropping the braces ({%k1}, {z}, {1to16}, {rn-sae}).
func splitOperands(s string) []string {
	var ops []string
	depth, start := 0, 0
	for i, c := range s {
		switch c {
		case '(', '{':
			depth++
		case ')', '}':
			depth--
		case ',':
			if depth == 0 {
				ops = append(ops, s[start:i])
				start = i + 1
			}
		}
	}
	ops = append(ops, s[start:])
	var out []string
	for _, op := range ops {
		for {
			i := strings.Index(op, "{")
			j := strings.Index(op, "}")
			if i < 0 || j < i {
				break
			}
			op = op[:i] + op[j+1:]
		}
		if op = strings.TrimSpace(op); op != "" {
			out = append(out, op)
		}
	}
	return out
}

func gprOf(op string) int {
	if n, ok := gprNumber[strings.TrimPrefix(op, "%")]; ok && strings.HasPrefix(op, "%") {
		return n
	}
	return -1
}

// memOf parses an AT&T memory operand: its base (-1 none or %rip) and
// displacement.
func memOf(op string) (base int, disp int64, ok bool) {
	i := strings.Index(op, "(")
	if i < 0 || strings.HasPrefix(op, "%") || strings.HasPrefix(op, "$") {
		return 0, 0, false
	}
	if i > 0 {
		d, err := strconv.ParseInt(op[:i], 0, 64)
		if err != nil {
			return 0, 0, false
		}
		disp = d
	}
	inner := strings.Split(strings.Trim(op[i:], "()"), ",")
	base = gprOf(inner[0])
	return base, disp, true
}

// oracle is what objdump's text says DecodeVec must give.
type oracle struct {
	gpr, gpr2 int
	store     bool
	mem       bool
	base      int
	disp      int64
}

func oracleOf(text string) oracle {
	o := oracle{gpr: -1, gpr2: -1, base: -1}
	f := strings.Fields(text)
	if len(f) > 0 && f[0] == "{vex}" || len(f) > 0 && f[0] == "{evex}" {
		f = f[1:]
	}
	if len(f) == 0 {
		return o
	}
	mn := f[0]
	ops := splitOperands(strings.Join(f[1:], " "))
	for _, op := range ops {
		if b, d, ok := memOf(op); ok {
			o.mem, o.base, o.disp = true, b, d
		}
	}
	if len(ops) > 0 {
		last := ops[len(ops)-1]
		o.gpr = gprOf(last)
		_, _, lastMem := memOf(last)
		o.store = lastMem
	}
	for _, p := range []string{"vgatherpf", "vscatterpf", "vldmxcsr", "ldtilecfg"} {
		if strings.HasPrefix(mn, p) {
			o.store = false
		}
	}
	switch {
	case mn == "vpcmpestri" || mn == "vpcmpistri":
		o.gpr = 1
	case strings.HasPrefix(mn, "cmp") && strings.HasSuffix(mn, "xadd") && len(ops) == 3:
		o.gpr = gprOf(ops[1])
	case mn == "mulx" && len(ops) == 3:
		o.gpr2 = gprOf(ops[1])
	case mn == "vmaskmovdqu":
		o.store, o.mem, o.base, o.disp = true, true, 7, 0
	}
	return o
}

// checkLine compares DecodeVec of l.code with objdump: the length, and
// the destinations the text shows.
func checkLine(l disLine) string {
	in, err := DecodeVec(l.code)
	if err != nil {
		return err.Error()
	}
	if in.Len != len(l.code) {
		return "length " + strconv.Itoa(in.Len) + ", objdump " + strconv.Itoa(len(l.code))
	}
	o := oracleOf(l.text)
	got := oracle{gpr: in.GPR, gpr2: in.GPR2, store: in.Store, mem: in.Mem, base: in.MemBase, disp: o.disp}
	if in.DispExact {
		got.disp = in.MemDisp
	}
	if !o.mem {
		got.disp = o.disp
	}
	if got != o {
		return strings.NewReplacer("{", "", "}", "").Replace(
			"got " + fmtOracle(got) + ", objdump says " + fmtOracle(o))
	}
	return ""
}

func fmtOracle(o oracle) string {
	return "gpr " + strconv.Itoa(o.gpr) + " gpr2 " + strconv.Itoa(o.gpr2) +
		" store " + strconv.FormatBool(o.store) + " mem " + strconv.FormatBool(o.mem) +
		" base " + strconv.Itoa(o.base) + " disp " + strconv.FormatInt(o.disp, 10)
}

// x86asmMisses counts, by mnemonic, the instructions AMD64 and
// LenAMD64 do not decode to objdump's length (to tell the walk which
// decoder to try first).
type x86asmMisses map[string]int

func (m x86asmMisses) add(l disLine) {
	if in, err := AMD64(l.code); err == nil && LenAMD64(in, l.code) == len(l.code) {
		return
	}
	mn := "?"
	if f := strings.Fields(l.text); len(f) > 0 {
		mn = f[0]
	}
	m[mn]++
}

func (m x86asmMisses) String() string {
	var ks []string
	for k, v := range m {
		ks = append(ks, k+" "+strconv.Itoa(v))
	}
	sort.Strings(ks)
	return strings.Join(ks, ", ")
}

func (m x86asmMisses) total() int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func needTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
}

// TestDecodeVecCorpus assembles testdata/veccorpus.txt and holds every
// instruction's DecodeVec to objdump's disassembly.
func TestDecodeVecCorpus(t *testing.T) {
	needTools(t, "as", "objdump")
	text, err := os.ReadFile("testdata/veccorpus.txt")
	if err != nil {
		t.Fatal(err)
	}
	lines := expandCorpus(string(text))
	dir := t.TempDir()
	src, obj := filepath.Join(dir, "c.s"), filepath.Join(dir, "c.o")
	if err := os.WriteFile(src, []byte(".text\n"+strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("as", "--64", "-o", obj, src).CombinedOutput(); err != nil {
		t.Fatalf("as: %v\n%s", err, out)
	}
	dis := objdumpLines(t, obj, ".text")
	if len(dis) != len(lines) {
		t.Fatalf("objdump gives %d instructions for %d lines", len(dis), len(lines))
	}
	var vex, evex, gprs, stores int
	miss := x86asmMisses{}
	for i, l := range dis {
		miss.add(l)
		switch l.code[0] {
		case 0xc4, 0xc5:
			vex++
		case 0x62:
			evex++
		default:
			t.Errorf("%s: assembled without VEX or EVEX: % x", lines[i], l.code)
			continue
		}
		if msg := checkLine(l); msg != "" {
			t.Errorf("%s (% x, %s): %s", lines[i], l.code, l.text, msg)
		}
		o := oracleOf(l.text)
		if o.gpr >= 0 {
			gprs++
		}
		if o.store {
			stores++
		}
	}
	t.Logf("corpus: %d instructions (%d VEX, %d EVEX), %d writing a general register, %d stores",
		len(dis), vex, evex, gprs, stores)
	t.Logf("corpus: x86asm gives objdump's length for %d; not for: %v", len(dis)-miss.total(), miss)
}

// TestDecodeVecLibs holds DecodeVec to objdump over every VEX and EVEX
// instruction of the system's libc (glibc's AVX2 and EVEX string
// functions) and libm (FMA, and AMD's FMA4), and measures how many of
// them x86asm (AMD64, LenAMD64) already decodes to objdump's length.
// Bytes objdump calls (bad) are data in .text, and skipped.
func TestDecodeVecLibs(t *testing.T) {
	needTools(t, "objdump")
	if testing.Short() {
		t.Skip("disassembles libraries")
	}
	for _, lib := range []string{
		"/usr/lib/x86_64-linux-gnu/libc.so.6",
		"/usr/lib/x86_64-linux-gnu/libm.so.6",
	} {
		t.Run(filepath.Base(lib), func(t *testing.T) {
			if _, err := os.Stat(lib); err != nil {
				t.Skip(lib, " not present")
			}
			checkLibrary(t, lib)
		})
	}
}

func checkLibrary(t *testing.T, lib string) {
	var vex, evex, prefixed, bad int
	miss := x86asmMisses{}
	for _, l := range objdumpLines(t, lib, ".text") {
		switch l.code[0] {
		case 0xc4, 0xc5, 0x62:
		default:
			if len(l.code) > 1 && (l.code[1] == 0xc4 || l.code[1] == 0xc5 || l.code[1] == 0x62) &&
				strings.HasPrefix(l.text, "v") {
				prefixed++
			}
			continue
		}
		if strings.Contains(l.text, "(bad)") {
			continue
		}
		if l.code[0] == 0x62 {
			evex++
		} else {
			vex++
		}
		if msg := checkLine(l); msg != "" {
			bad++
			if bad <= 20 {
				t.Errorf("% x (%s): %s", l.code, l.text, msg)
			}
		}
		miss.add(l)
	}
	if bad > 0 {
		t.Errorf("%d of %d instructions disagree with objdump", bad, vex+evex)
	}
	t.Logf("%d VEX, %d EVEX instructions; DecodeVec agrees on %d; %d more behind a prefix (not taken)",
		vex, evex, vex+evex-bad, prefixed)
	t.Logf("x86asm gives objdump's length for %d; not for: %v", vex+evex-miss.total(), miss)
}

// TestDecodeVecErrors: what DecodeVec refuses, and why.
func TestDecodeVecErrors(t *testing.T) {
	tests := []struct {
		name string
		code string
		kind VecErrorKind
	}{
		{"empty", "", VecTruncated},
		{"legacy", "48 89 e5", VecNotVec},
		{"prefix before VEX", "66 c5 f8 77", VecNotVec},
		{"c5 alone", "c5", VecTruncated},
		{"c4 cut", "c4 e2", VecTruncated},
		{"VEX no opcode", "c5 f8", VecTruncated},
		{"no ModRM", "c5 f8 58", VecTruncated},
		{"no SIB", "c5 f8 58 04", VecTruncated},
		{"disp32 cut", "c5 f8 58 80 00 00", VecTruncated},
		{"imm cut", "c4 e3 7d 39 c8", VecTruncated},
		{"VEX map 4", "c4 e4 78 58 c0", VecReserved},
		{"EVEX cut", "62 f1 7c", VecTruncated},
		{"EVEX map 4 (APX)", "62 f4 7c 48 58 c0", VecReserved},
		{"EVEX map 7", "62 f7 7c 48 58 c0", VecReserved},
		{"EVEX B4", "62 f9 7c 48 58 c0", VecReserved},
		{"VEX unknown opcode", "c5 f8 ff c0", VecUnknown},
		{"EVEX kmov (APX)", "62 f1 7c 08 93 c1", VecUnknown},
		{"EVEX BMI (APX)", "62 f2 7c 08 f2 c1", VecUnknown},
		{"VEX blsr /4", "c4 e2 78 f3 e1", VecUnknown},
		{"VEX mulx 66", "c4 e2 79 f6 c1", VecUnknown},
		{"vstmxcsr /4", "c5 f8 ae 20", VecUnknown},
		{"EVEX GPR dest R'", "62 e1 7f 08 2d c1", VecReserved},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := hex.DecodeString(strings.ReplaceAll(tt.code, " ", ""))
			if err != nil {
				t.Fatal(err)
			}
			_, err = DecodeVec(b)
			var ve *VecError
			if !errors.As(err, &ve) || ve.Kind != tt.kind {
				t.Fatalf("DecodeVec(% x) = %v, want kind %d", b, err, tt.kind)
			}
		})
	}
}

// TestDecodeVecKnown: a few decodings worked out by hand from the SDM.
func TestDecodeVecKnown(t *testing.T) {
	tests := []struct {
		code string
		want VecInst
	}{
		// vzeroupper
		{"c5 f8 77", VecInst{Len: 3, GPR: -1, GPR2: -1, MemBase: -1, DispExact: true}},
		// vmovdqu64 %zmm1,0x40(%rsp): disp8 1 times N 64
		{"62 f1 fe 48 7f 4c 24 01", VecInst{Len: 8, GPR: -1, GPR2: -1, Store: true, Mem: true, MemBase: 4, MemDisp: 64, DispExact: true}},
		// vmovdqu64 0x40(%rsp),%zmm1: a load, the disp8 left unscaled
		{"62 f1 fe 48 6f 4c 24 01", VecInst{Len: 8, GPR: -1, GPR2: -1, Mem: true, MemBase: 4, MemDisp: 1}},
		// mulx %rax,%rbx,%rcx: rcx high (reg), rbx low (vvvv)
		{"c4 e2 e3 f6 c8", VecInst{Len: 5, GPR: 1, GPR2: 3, MemBase: -1, DispExact: true}},
		// blsr %rcx,%rsp: the destination is vvvv
		{"c4 e2 d8 f3 c9", VecInst{Len: 5, GPR: 4, GPR2: -1, MemBase: -1, DispExact: true}},
		// vpcmpistri $0x1a,%xmm1,%xmm2
		{"c4 e3 79 63 d1 1a", VecInst{Len: 6, GPR: 1, GPR2: -1, MemBase: -1, DispExact: true}},
		// vmovups 0x10(%rip),%ymm1
		{"c5 fc 10 0d 10 00 00 00", VecInst{Len: 8, GPR: -1, GPR2: -1, Mem: true, MemBase: -1, MemDisp: 16, DispExact: true}},
	}
	for _, tt := range tests {
		b, err := hex.DecodeString(strings.ReplaceAll(tt.code, " ", ""))
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeVec(b)
		if err != nil || got != tt.want {
			t.Errorf("DecodeVec(% x) = %+v, %v; want %+v", b, got, err, tt.want)
		}
	}
}

func FuzzDecodeVec(f *testing.F) {
	for _, s := range []string{
		"c5f877", "62f1fe487f4c2401", "c4e2e3f6c8", "c4e3796 3d11a", "62f27d48a00c90",
		"c5fc100d10000000", "62f17c4858842412345678", "c4e27849c0",
	} {
		b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
		if err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		b = b[:len(b):len(b)]
		in, err := DecodeVec(b)
		if err != nil {
			var ve *VecError
			if !errors.As(err, &ve) {
				t.Fatalf("error %v is not a *VecError", err)
			}
			return
		}
		if in.Len < 1 || in.Len > 15 || in.Len > len(b) {
			t.Fatalf("Len %d for %d bytes", in.Len, len(b))
		}
		// The instruction's own bytes decode the same: nothing after
		// them was read.
		again, err := DecodeVec(b[:in.Len])
		if err != nil || again != in {
			t.Fatalf("% x: %+v; its own %d bytes give %+v, %v", b, in, in.Len, again, err)
		}
		if in.GPR < -1 || in.GPR > 15 || in.MemBase < -1 || in.MemBase > 15 {
			t.Fatalf("% x: register out of range: %+v", b, in)
		}
	})
}
