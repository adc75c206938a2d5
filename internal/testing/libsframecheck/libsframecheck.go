// Package libsframecheck asks GNU libsframe, a real SFrame reader, what it
// finds at every PC of every function of a .sframe section, and compares
// its answers with package sframe's Table.Lookup.
//
// helper/findfre.c (committed with this package, embedded) is compiled against
// each libsframe the reference toolchain unpacks (scripts/
// reference-toolchain.sh): binutils 2.47.50's (Debian sid, libsframe-dev,
// linked statically with its header) and 2.44's (trixie's libsframe.so.1,
// which has no header in Debian; findfre.c declares the few functions it
// uses itself, as their ABI differs from 2.47's).
//
// libsframe's answer at a PC (its FRE's start, info byte and data words)
// is interpreted by sframe.Table.Interpret in the context of the FDE that
// covers the PC in our decoding, and compared with Table.Lookup's rule
// there; separately its FDE list (sframe_decoder_get_funcdesc_v2/v3) is
// compared with ours field by field.
//
// Two libsframe mistakes are known and modelled, so that each differing PC
// must be exactly the mistake's answer (any other difference is an error):
//
//   - 2.47.50 on V2 without FUNC_START_PCREL looks functions up as if the
//     flag were set (start field + its own offset): the model is our lookup
//     in a copy of the section with the flag set.
//   - 2.44 in a PCMASK FDE takes the PC's offset into the repeat block as
//     (section-relative PC) mod (repeat size), not (PC - function start)
//     mod (repeat size) (libsframe.so.1's sframe_find_fre divides the PC
//     itself by the FDE's repeat size, objdump -d at 0x34a0): the model
//     applies the FRE whose range holds that offset, after 2.44's check
//     that the PC is not before the first FRE.
//
// 2.44 also refuses V3 and V2 with FUNC_START_PCREL at sframe_decode
// ("Out of Memory."); that refusal is reported, not hidden.
package libsframecheck

import (
	"bufio"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cfi2sframe/cfi2sframe/arch"
	"github.com/cfi2sframe/cfi2sframe/internal/sfsection"
	"github.com/cfi2sframe/cfi2sframe/sframe"
)

//go:embed helper/findfre.c
var findfreC []byte

// Reader is one libsframe build of the findfre helper.
type Reader struct {
	Name string // "2.47.50" or "2.44"
	Bin  string // the helper program
}

// Is244 says whether the reader is binutils 2.44's libsframe.
func (r Reader) Is244() bool { return r.Name == "2.44" }

// Paths of the two libsframes under a reference toolchain root.
func sidDir(root string) string { return filepath.Join(root, "sid", "libsframe", "usr") }
func trixieSO(root string) string {
	return filepath.Join(root, "trixie", "root", "usr", "lib", "x86_64-linux-gnu", "libsframe.so.1")
}

// Missing lists the libsframe files under root that Build needs and that
// are absent.
func Missing(root string) []string {
	var m []string
	for _, p := range []string{
		filepath.Join(sidDir(root), "include", "sframe-api.h"),
		filepath.Join(sidDir(root), "include", "sframe.h"),
		filepath.Join(sidDir(root), "lib", "x86_64-linux-gnu", "libsframe.a"),
		trixieSO(root),
	} {
		if st, err := os.Stat(p); err != nil || st.IsDir() {
			m = append(m, p)
		}
	}
	return m
}

// Build compiles the helper with cc against both libsframes under the
// reference toolchain root, into dir. trixie's libsframe.so.1 is copied
// into dir and found there through the helper's RUNPATH, so that the rest
// of trixie's root (its libc) is not loaded.
func Build(cc, root, dir string) ([]Reader, error) {
	if m := Missing(root); len(m) > 0 {
		return nil, fmt.Errorf("libsframe not found: %s (run scripts/reference-toolchain.sh)", strings.Join(m, ", "))
	}
	src := filepath.Join(dir, "findfre.c")
	if err := os.WriteFile(src, findfreC, 0o644); err != nil {
		return nil, err
	}
	// libsframe's sframe.h includes libiberty's ansidecl.h, which
	// libsframe-dev does not ship; it needs two attribute macros from it.
	inc := filepath.Join(dir, "include")
	if err := os.MkdirAll(inc, 0o755); err != nil {
		return nil, err
	}
	shim := "#define ATTRIBUTE_PACKED __attribute__((packed))\n#define ATTRIBUTE_UNUSED __attribute__((unused))\n"
	if err := os.WriteFile(filepath.Join(inc, "ansidecl.h"), []byte(shim), 0o644); err != nil {
		return nil, err
	}
	lib244 := filepath.Join(dir, "lib244")
	if err := os.MkdirAll(lib244, 0o755); err != nil {
		return nil, err
	}
	so, err := os.ReadFile(trixieSO(root))
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(lib244, "libsframe.so.1"), so, 0o644); err != nil {
		return nil, err
	}
	sid := sidDir(root)
	builds := []struct {
		r    Reader
		args []string
	}{
		{Reader{Name: "2.47.50", Bin: filepath.Join(dir, "findfre-2.47")},
			[]string{"-I" + inc, "-I" + filepath.Join(sid, "include"), src, filepath.Join(sid, "lib", "x86_64-linux-gnu", "libsframe.a")}},
		{Reader{Name: "2.44", Bin: filepath.Join(dir, "findfre-2.44")},
			[]string{"-DLIBSFRAME_244", src, filepath.Join(lib244, "libsframe.so.1"), "-Wl,-rpath," + lib244}},
	}
	var rs []Reader
	for _, b := range builds {
		args := append([]string{"-O2", "-Wall", "-Werror", "-o", b.r.Bin}, b.args...)
		if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("building the libsframe %s helper: %v\n%s", b.r.Name, err, out)
		}
		rs = append(rs, b.r)
	}
	return rs, nil
}

// Result counts one reader's answers on one section.
type Result struct {
	Reader    string
	DecodeErr string // sframe_decode's refusal ("2001 Out of Memory."), "" when it decoded
	FDEs      int
	PCs       int
	Agree     int // same rule, or both without a row
	NoRow     int // of Agree: neither has a row (before the first FRE, or an FDE without FREs)
	// Known mistakes, each PC equal to the modelled wrong answer.
	V2AsPCRel   int // 2.47.50, V2 without FUNC_START_PCREL
	PCMaskFound int // 2.44, PCMASK: another FRE than ours
	PCMaskMiss  int // 2.44, PCMASK: no FRE where we have one
	// Modelled is the number of PCs where the known mistake's model
	// differs from our answer: V2AsPCRel or PCMaskFound+PCMaskMiss must
	// equal it for libsframe to give the mistake's answer at every PC.
	Modelled int
	// Other differences: each is an error; the first few are described.
	Other    int
	Examples []string
}

func (r *Result) String() string {
	if r.DecodeErr != "" {
		return fmt.Sprintf("libsframe %s: sframe_decode refuses it: %s", r.Reader, r.DecodeErr)
	}
	s := fmt.Sprintf("libsframe %s: %d FDEs, %d PCs: %d agree (%d without a row on both sides)", r.Reader, r.FDEs, r.PCs, r.Agree, r.NoRow)
	if r.V2AsPCRel > 0 {
		s += fmt.Sprintf(", %d looked up as if PC-relative (known)", r.V2AsPCRel)
	}
	if r.PCMaskFound+r.PCMaskMiss > 0 {
		s += fmt.Sprintf(", %d in PCMASK FDEs not found and %d given another FRE (known: PC mod repeat size)", r.PCMaskMiss, r.PCMaskFound)
	}
	if r.Other > 0 {
		s += fmt.Sprintf(", %d OTHER DIFFERENCES", r.Other)
	}
	return s
}

// Add adds o's counts to r.
func (r *Result) Add(o *Result) {
	r.FDEs += o.FDEs
	r.PCs += o.PCs
	r.Agree += o.Agree
	r.NoRow += o.NoRow
	r.V2AsPCRel += o.V2AsPCRel
	r.PCMaskFound += o.PCMaskFound
	r.PCMaskMiss += o.PCMaskMiss
	r.Modelled += o.Modelled
	r.Other += o.Other
	if len(r.Examples) < 10 {
		r.Examples = append(r.Examples, o.Examples...)
	}
}

func (r *Result) other(format string, args ...any) {
	r.Other++
	if len(r.Examples) < 10 {
		r.Examples = append(r.Examples, fmt.Sprintf(format, args...))
	}
}

// Check runs reader on the section sec (at address addr) and compares its
// FDE list and its answer at every PC of every function with ours.
func Check(rd Reader, sec []byte, addr uint64, tmp string) (*Result, error) {
	ours, err := sfsection.Decode(sec, addr)
	if err != nil {
		return nil, err
	}
	tab, err := sframe.Open(sec, addr)
	if err != nil {
		return nil, err
	}
	res := &Result{Reader: rd.Name}
	f, err := os.CreateTemp(tmp, "sframe-*.sec")
	if err != nil {
		return nil, err
	}
	name := f.Name()
	defer os.Remove(name)
	if _, err := f.Write(sec); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}

	// The FDE list.
	out, err := exec.Command(rd.Bin, "fdes", name).Output()
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) && ee.ExitCode() == 3 {
		res.DecodeErr = strings.TrimPrefix(strings.TrimSpace(string(out)), "decode: ")
		return res, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s fdes: %v\n%s", rd.Bin, err, out)
	}
	if err := compareFDEs(res, ours, string(out)); err != nil {
		return nil, err
	}

	// The known mistakes' models.
	var asPCRel *sframe.Table
	if !rd.Is244() && ours.Header.Version == sframe.Version2 && ours.Header.Flags&sframe.FlagFDEFuncStartPCRel == 0 {
		c := append([]byte(nil), sec...)
		c[3] |= sframe.FlagFDEFuncStartPCRel
		// Its starts need not stay sorted; Open then keeps its own order.
		if asPCRel, err = sframe.Open(c, addr); err != nil {
			return nil, fmt.Errorf("the section with FUNC_START_PCREL set: %v", err)
		}
	}

	// Every PC of every function, streamed through the helper.
	cmd := exec.Command(rd.Bin, "pcs", name)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	werr := make(chan error, 1)
	go func() {
		w := bufio.NewWriterSize(stdin, 1<<16)
		var b [16]byte
		for i := range ours.FDEs {
			d := &ours.FDEs[i]
			binary.LittleEndian.PutUint64(b[8:], uint64(fdeType(d)))
			for k := uint64(0); k < uint64(d.Size); k++ {
				binary.LittleEndian.PutUint64(b[:], d.Start+k-addr)
				if _, err := w.Write(b[:]); err != nil {
					werr <- err
					stdin.Close()
					return
				}
			}
		}
		err := w.Flush()
		stdin.Close()
		werr <- err
	}()
	r := bufio.NewReaderSize(stdout, 1<<16)
	var rec [64]byte
	var rerr error
	for i := range ours.FDEs {
		d := &ours.FDEs[i]
		for k := uint64(0); k < uint64(d.Size) && rerr == nil; k++ {
			if _, rerr = io.ReadFull(r, rec[:]); rerr != nil {
				break
			}
			res.PCs++
			comparePC(res, ours, tab, asPCRel, rd, d, ours.StartField(i), d.Start+k, addr, rec[:])
		}
	}
	if err := <-werr; err != nil && rerr == nil {
		rerr = err
	}
	if err := cmd.Wait(); err != nil {
		return nil, fmt.Errorf("%s pcs: %v\n%s", rd.Bin, err, stderr.String())
	}
	if rerr != nil {
		return nil, fmt.Errorf("%s pcs: %v\n%s", rd.Bin, rerr, stderr.String())
	}
	return res, nil
}

// compareFDEs compares libsframe's FDE list ("V version n", then
// "F index start size info info2 rep nfres" lines) with ours.
func compareFDEs(res *Result, s *sfsection.Section, out string) error {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var ver, n int
	if _, err := fmt.Sscanf(lines[0], "V %d %d", &ver, &n); err != nil {
		return fmt.Errorf("helper: bad first line %q", lines[0])
	}
	if ver != int(s.Header.Version) || n != len(s.FDEs) || len(lines) != n+1 {
		res.other("header: libsframe reads version %d and %d FDEs (%d lines), we %d and %d", ver, n, len(lines)-1, s.Header.Version, len(s.FDEs))
		return nil
	}
	res.FDEs = n
	for i, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) != 8 || f[0] != "F" {
			res.other("FDE %d: libsframe: %q", i, l)
			continue
		}
		var v [7]int64
		for j := range v {
			x, err := strconv.ParseInt(f[j+1], 10, 64)
			if err != nil {
				return fmt.Errorf("helper: bad line %q", l)
			}
			v[j] = x
		}
		d := &s.FDEs[i]
		info, info2 := infoBytes(d)
		want := [7]int64{int64(i), s.StartField(i), int64(d.Size), info, info2, int64(d.RepSize), int64(len(d.FREs))}
		if v != want {
			res.other("FDE %d: libsframe reads index/start/size/info/info2/rep/nfres %v, we %v", i, v, want)
		}
	}
	return nil
}

// infoBytes returns the FDE's info and info2 bytes as the format lays out
// what sframe decodes from them: FRE type (bits 0-3), PC type (bit 4),
// AArch64's B key (bit 5), V3's signal frame (bit 7); V3's FDE type.
func infoBytes(d *sframe.FDE) (info, info2 int64) {
	info = int64(bits.TrailingZeros8(d.AddrSize)) | int64(d.PCType)<<4
	if d.PauthKeyB {
		info |= 1 << 5
	}
	if d.Signal {
		info |= 1 << 7
	}
	return info, fdeType(d)
}

// fdeType is the FDE type's number: SFRAME_FDE_TYPE_FLEX for a flexible
// FDE, else SFRAME_FDE_TYPE_DEFAULT.
func fdeType(d *sframe.FDE) int64 {
	if d.Flex {
		return 1
	}
	return 0
}

// comparePC compares libsframe's answer rec at pc (in FDE d) with ours.
func comparePC(res *Result, s *sfsection.Section, tab *sframe.Table, asPCRel *sframe.Table, rd Reader, d *sframe.FDE, startField int64, pc, addr uint64, rec []byte) {
	ourRule, err := tab.Lookup(pc)
	ourRow := err == nil && !ourRule.NoFREs
	if err != nil && err != sframe.ErrNoFRE {
		res.other("pc %#x: our lookup: %v", pc, err)
		return
	}
	libRow := int32(binary.LittleEndian.Uint32(rec)) == 0
	var libRule sframe.Rule
	if libRow {
		libRule = tab.Interpret(d, freOf(rec))
	}
	// The known mistake's answer here, when one applies.
	model, mRow, mSame := 0, false, func(sframe.Rule) bool { return false }
	switch {
	case asPCRel != nil:
		m, err := asPCRel.Lookup(pc)
		model, mRow = 1, err == nil && !m.NoFREs
		mSame = func(r sframe.Rule) bool { return sameData(m, r) }
	case rd.Is244() && d.PCType == sframe.PCMask && d.RepSize != 0:
		mf := pcmask244(d, startField, pc-addr)
		model, mRow = 2, mf != nil
		if mRow {
			m := tab.Interpret(d, mf)
			mSame = func(r sframe.Rule) bool { return m == r }
		}
	}
	if model != 0 && (mRow != ourRow || (ourRow && !mSame(ourRule))) {
		res.Modelled++
	}
	if libRow == ourRow && (!ourRow || libRule == ourRule) {
		if ourRow {
			if bad := accessors(&s.Header, rd, ourRule, rec); bad != "" {
				res.other("pc %#x (FDE at %#x): libsframe %s's accessors read the same FRE differently: %s; ours: %+v", pc, d.Start, rd.Name, bad, ourRule)
				return
			}
		}
		res.Agree++
		if !ourRow {
			res.NoRow++
		}
		return
	}
	if model != 0 && mRow == libRow && (!libRow || mSame(libRule)) {
		switch {
		case model == 1:
			res.V2AsPCRel++
		case libRow:
			res.PCMaskFound++
		default:
			res.PCMaskMiss++
		}
		return
	}
	describe := func(row bool, r sframe.Rule) string {
		if !row {
			return "no row"
		}
		return fmt.Sprintf("%+v", r)
	}
	res.other("pc %#x (FDE at %#x): libsframe %s: %s; ours: %s", pc, d.Start, rd.Name, describe(libRow, libRule), describe(ourRow, ourRule))
}

// accessors compares what libsframe's accessor functions
// (sframe_fre_get_base_reg_id, _cfa_offset, _ra_offset, _fp_offset,
// _ra_mangled_p and, in 2.47.50, _ra_undefined_p) make of the FRE with our
// rule r for it, and describes the differences ("" when none). For a
// flexible FDE only the CFA offset is compared (the accessors do not say
// which register or whether to dereference). On s390x the accessors give
// the RA and FP words as stored (sframe-api.h): RA 0
// (SFRAME_FRE_RA_OFFSET_INVALID) where FP is saved without RA, and V2's
// register numbers shifted left with the low bit set; 2.47.50 decodes the
// CFA offset (offset*8+160), 2.44, which predates s390x, returns the
// stored (offset-160)/8.
func accessors(h *sframe.Header, rd Reader, r sframe.Rule, rec []byte) string {
	errs := rec[11]
	v := func(i int) int32 { return int32(binary.LittleEndian.Uint32(rec[36+4*i:])) }
	base, cfa, ra, fp := v(0), v(1), v(2), v(3)
	var bad []string
	check := func(what string, errBit byte, got int32, l sframe.Loc) {
		switch l.Kind {
		case sframe.LocUnsaved:
			if errs&errBit == 0 {
				bad = append(bad, fmt.Sprintf("%s offset %d where we have none", what, got))
			}
		case sframe.LocFixed, sframe.LocCFA:
			if errs&errBit != 0 || got != l.Offset {
				bad = append(bad, fmt.Sprintf("%s offset %d (error %v)", what, got, errs&errBit != 0))
			}
		default:
			bad = append(bad, fmt.Sprintf("%s rule kind %d in a default FDE", what, l.Kind))
		}
	}
	// s390x: the word as stored, when the FRE has one (words: CFA, RA or
	// padding, FP).
	nw := int(rec[9])
	checkS390 := func(what string, errBit byte, got int32, l sframe.Loc, present bool) {
		var want int32
		switch l.Kind {
		case sframe.LocUnsaved:
			want = 0 // the padding word of an FP saved without RA
		case sframe.LocCFA:
			want = l.Offset
		case sframe.LocReg:
			want = int32(l.Reg)<<1 | 1
		default:
			bad = append(bad, fmt.Sprintf("%s rule kind %d in a default FDE", what, l.Kind))
			return
		}
		switch {
		case !present && errs&errBit == 0:
			bad = append(bad, fmt.Sprintf("%s offset %d where the FRE has no %s word", what, got, what))
		case present && (errs&errBit != 0 || got != want):
			bad = append(bad, fmt.Sprintf("%s word %d (error %v), want %d", what, got, errs&errBit != 0, want))
		}
	}
	s390 := h.ABI == sframe.ABIS390XBE
	cfaWant := func(off int32) int32 {
		if rd.Is244() {
			w, _ := arch.ForSFrameABI(h.ABI).EncodeCFAOffset(int64(off))
			return int32(w)
		}
		return off
	}
	undef := errs&16 != 0
	switch {
	case r.RAUndefined:
		if errs&2 == 0 {
			bad = append(bad, fmt.Sprintf("a CFA offset %d in an FRE without data words", cfa))
		}
		if !rd.Is244() && !undef {
			bad = append(bad, "RA not undefined")
		}
	case r.Flex:
		if errs&2 != 0 || cfa != cfaWant(r.CFA.Offset) {
			bad = append(bad, fmt.Sprintf("CFA offset %d (error %v)", cfa, errs&2 != 0))
		}
	default:
		wantBase := int32(1) // the FRE base register SP
		if r.CFA.Reg == arch.ForSFrameABI(h.ABI).FP() {
			wantBase = 0 // FP
		}
		if errs&1 != 0 || base != wantBase {
			bad = append(bad, fmt.Sprintf("base register %d (error %v)", base, errs&1 != 0))
		}
		if errs&2 != 0 || cfa != cfaWant(r.CFA.Offset) {
			bad = append(bad, fmt.Sprintf("CFA offset %d (error %v)", cfa, errs&2 != 0))
		}
		if s390 {
			checkS390("RA", 4, ra, r.RA, nw >= 2)
			checkS390("FP", 8, fp, r.FP, nw >= 3)
		} else {
			check("RA", 4, ra, r.RA)
			check("FP", 8, fp, r.FP)
		}
		if undef {
			bad = append(bad, "RA undefined")
		}
	}
	if (rec[10] == 1) != r.MangledRA {
		bad = append(bad, fmt.Sprintf("RA mangled %v", rec[10] == 1))
	}
	return strings.Join(bad, ", ")
}

// sameData compares the parts of two rules an FRE carries (the FDE-level
// parts of a wrongly chosen FDE's rule are interpreted in the right FDE on
// libsframe's side).
func sameData(a, b sframe.Rule) bool {
	return a.Start == b.Start && a.CFA == b.CFA && a.RA == b.RA && a.FP == b.FP &&
		a.MangledRA == b.MangledRA && a.RAUndefined == b.RAUndefined
}

// freOf builds the FRE libsframe returned from the helper's record.
func freOf(rec []byte) *sframe.FRE {
	info := rec[8]
	f := &sframe.FRE{Start: binary.LittleEndian.Uint32(rec[4:])}
	f.BaseReg = info & 1
	f.NumWords = rec[9]
	f.WordSize = 1 << ((info >> 5) & 3)
	f.MangledRA = info&0x80 != 0
	for i := 0; i < int(f.NumWords) && i < 6 && i < len(f.Words); i++ {
		w := binary.LittleEndian.Uint32(rec[12+4*i:])
		switch f.WordSize {
		case 1:
			f.Words[i] = int32(int8(w))
		case 2:
			f.Words[i] = int32(int16(w))
		default:
			f.Words[i] = int32(w)
		}
	}
	return f
}

// pcmask244 is 2.44's answer in a PCMASK FDE at section-relative pc: the
// FRE whose range [start, next start - 1] (the last one's ending at the
// function's size - 1) holds pc mod the repeat size, unless pc is before
// the function start plus the first FRE's start.
func pcmask244(d *sframe.FDE, startField int64, pc uint64) *sframe.FRE {
	if len(d.FREs) == 0 {
		return nil
	}
	start := int64(int32(startField))
	p := int64(int32(pc))
	if start+int64(d.FREs[0].Start) > p {
		return nil
	}
	m := p % int64(d.RepSize)
	for j := range d.FREs {
		end := int64(d.Size) - 1
		if j+1 < len(d.FREs) {
			end = int64(d.FREs[j+1].Start) - 1
		}
		if int64(d.FREs[j].Start) <= m && m <= end {
			return &d.FREs[j]
		}
	}
	return nil
}
