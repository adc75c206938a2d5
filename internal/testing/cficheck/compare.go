package cficheck

import (
	"bytes"
	"debug/elf"
	"fmt"
	"os/exec"
	"sort"

	"github.com/cfi2sframe/cfi2sframe/arch"
	"github.com/cfi2sframe/cfi2sframe/cfi"
	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
)

// Summary counts the outcome for one file or many.
type Summary struct {
	Files       int
	FDEs        int            // FDEs readelf printed
	Agree       int            // FDEs whose every row agrees
	Differ      map[string]int // FDEs that differ, by first reason
	OnlyReadelf int            // FDEs readelf printed and we rejected or did not find
	OnlyOurs    int            // FDEs we found and readelf did not print
	Rows        int            // PCs compared
	SkippedCols map[string]int // columns not compared (register names we do not map)
	Examples    map[string]string
	FileErrors  []string
}

func NewSummary() *Summary {
	return &Summary{Differ: map[string]int{}, SkippedCols: map[string]int{}, Examples: map[string]string{}}
}

// Add merges o into s.
func (s *Summary) Add(o *Summary) {
	s.Files += o.Files
	s.FDEs += o.FDEs
	s.Agree += o.Agree
	s.OnlyReadelf += o.OnlyReadelf
	s.OnlyOurs += o.OnlyOurs
	s.Rows += o.Rows
	for k, v := range o.Differ {
		s.Differ[k] += v
	}
	for k, v := range o.SkippedCols {
		s.SkippedCols[k] += v
	}
	for k, v := range o.Examples {
		if _, ok := s.Examples[k]; !ok {
			s.Examples[k] = v
		}
	}
	s.FileErrors = append(s.FileErrors, o.FileErrors...)
}

func (s *Summary) String() string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "files %d, FDEs %d, agree %d, differ %d, only readelf %d, only ours %d, PCs compared %d\n",
		s.Files, s.FDEs, s.Agree, total(s.Differ), s.OnlyReadelf, s.OnlyOurs, s.Rows)
	for _, k := range keys(s.Differ) {
		fmt.Fprintf(&b, "  differ %-28s %6d  e.g. %s\n", k, s.Differ[k], s.Examples[k])
	}
	if s.OnlyReadelf > 0 {
		fmt.Fprintf(&b, "  only readelf e.g. %s\n", s.Examples["only-readelf"])
	}
	if len(s.SkippedCols) > 0 {
		fmt.Fprintf(&b, "  columns not compared: %v\n", s.SkippedCols)
	}
	for _, e := range s.FileErrors {
		fmt.Fprintf(&b, "  error: %s\n", e)
	}
	return b.String()
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func keys(m map[string]int) []string {
	var k []string
	for x := range m {
		k = append(k, x)
	}
	sort.Strings(k)
	return k
}

// regNames maps readelf's column names to DWARF register numbers.
func regNames(m elf.Machine) map[string]uint64 {
	n := map[string]uint64{}
	switch m {
	case elf.EM_X86_64:
		// rax, rdx, ..., r15, rip (the return-address column, 16).
		for i := uint64(0); i <= uint64(arch.AMD64.RA()); i++ {
			n[arch.AMD64.RegName(i)] = i
		}
		for i := 0; i < 16; i++ {
			n[fmt.Sprintf("xmm%d", i)] = uint64(17 + i)
		}
	case elf.EM_AARCH64:
		for i := 0; i <= 30; i++ {
			n[fmt.Sprintf("x%d", i)] = uint64(i)
		}
		n["sp"] = 31
		for i := 0; i < 32; i++ {
			n[fmt.Sprintf("v%d", i)] = uint64(64 + i)
		}
	case elf.EM_S390:
		// r0-r15, then the floating-point registers as readelf names
		// them (DWARF 16-31: f0, f2, f4, f6, f1, ...).
		for i := 0; i < 32; i++ {
			n[arch.S390X.RegName(uint64(i))] = uint64(i)
		}
	}
	return n
}

// CompareFile runs readelf on name and compares its rows with ours.
func CompareFile(readelf, name string) *Summary {
	s := NewSummary()
	s.Files = 1
	out, err := exec.Command(readelf, "--debug-dump=frames-interp", "-W", name).Output()
	if err != nil && len(out) == 0 {
		s.FileErrors = append(s.FileErrors, fmt.Sprintf("%s: readelf: %v", name, err))
		return s
	}
	dumps, err := ParseReadelf(bytes.NewReader(out))
	if err != nil {
		s.FileErrors = append(s.FileErrors, fmt.Sprintf("%s: %v", name, err))
		return s
	}
	f, err := elfread.Open(name)
	if err != nil {
		s.FileErrors = append(s.FileErrors, err.Error())
		return s
	}
	defer f.Close()
	cf, err := cfi.Open(f.ELF)
	if err != nil {
		s.FileErrors = append(s.FileErrors, fmt.Sprintf("%s: %v", name, err))
		return s
	}
	names := regNames(f.ELF.Machine)
	rev := map[uint64]string{}
	for k, v := range names {
		rev[v] = k
	}
	for _, sec := range cf.Sections() {
		var d *Dump
		for _, x := range dumps {
			if x.Section == sec.Name() {
				d = x
			}
		}
		if d == nil {
			continue
		}
		fdes, _ := cfi.Parse(sec)
		var ctx cfi.Context
		ours := map[int64]*cfi.FDE{}
		for _, fd := range fdes {
			ours[fd.Offset] = fd
		}
		for off, rf := range d.FDEs {
			s.FDEs++
			fd := ours[off]
			if fd == nil {
				s.OnlyReadelf++
				s.example("only-readelf", fmt.Sprintf("%s %s FDE at %#x", name, d.Section, off))
				continue
			}
			delete(ours, off)
			t := &cfi.Table{}
			err := ctx.Execute(fd, t)
			if err != nil {
				s.OnlyReadelf++
				s.example("only-readelf", fmt.Sprintf("%s %s FDE at %#x: %v", name, d.Section, off, err))
				continue
			}
			reason, ex := compareFDE(d, rf, t, names, rev, s)
			if reason == "" {
				s.Agree++
				continue
			}
			s.Differ[reason]++
			s.example(reason, fmt.Sprintf("%s %s FDE at %#x: %s", name, d.Section, off, ex))
		}
		s.OnlyOurs += len(ours)
	}
	return s
}

func (s *Summary) example(k, v string) {
	if _, ok := s.Examples[k]; !ok {
		s.Examples[k] = v
	}
}

func compareFDE(d *Dump, rf *Frame, t *cfi.Table, names map[string]uint64, rev map[uint64]string, s *Summary) (reason, example string) {
	rows, cols := rf.Rows, rf.Cols
	if len(rows) == 0 {
		// readelf prints nothing for an FDE without instructions; the
		// CIE's rows are in force.
		c := d.CIEs[rf.CIE]
		if c == nil || len(c.Rows) == 0 {
			return "readelf-no-rows", "no rows and no CIE rows"
		}
		last := c.Rows[len(c.Rows)-1]
		rows = []Row{{Loc: rf.Lo, CFA: last.CFA, Vals: last.Vals}}
		cols = c.Cols
	}
	if rf.Lo != t.FDE.Start || rf.Hi != t.FDE.End() {
		return "range", fmt.Sprintf("readelf %#x..%#x, ours %#x..%#x", rf.Lo, rf.Hi, t.FDE.Start, t.FDE.End())
	}
	raCol := t.FDE.CIE.RAColumn
	colReg := make([]int64, len(cols))
	for i, c := range cols {
		switch r, ok := names[c]; {
		case c == "ra":
			colReg[i] = int64(raCol)
		case ok:
			colReg[i] = int64(r)
		default:
			colReg[i] = -1
			s.SkippedCols[c]++
		}
	}
	// Every PC where either side starts a row (inside the FDE).
	var locs []uint64
	for _, r := range rows {
		if r.Loc < rf.Hi {
			locs = append(locs, r.Loc)
		}
	}
	for _, r := range t.Rows {
		locs = append(locs, r.Loc)
	}
	sort.Slice(locs, func(i, j int) bool { return locs[i] < locs[j] })
	for i, pc := range locs {
		if i > 0 && locs[i-1] == pc {
			continue
		}
		s.Rows++
		ri := sort.Search(len(rows), func(i int) bool { return rows[i].Loc > pc }) - 1
		oi := t.RowAt(pc)
		if ri < 0 || oi < 0 {
			return "first-row", fmt.Sprintf("pc %#x: readelf row %d, ours %d", pc, ri, oi)
		}
		rr, or := &rows[ri], &t.Rows[oi]
		if got := cfaString(or.CFA, rev); got != rr.CFA {
			return "cfa", fmt.Sprintf("pc %#x: readelf %s, ours %s", pc, rr.CFA, got)
		}
		seen := map[uint64]bool{}
		for ci, reg := range colReg {
			if reg < 0 || ci >= len(rr.Vals) {
				continue
			}
			seen[uint64(reg)] = true
			got := ruleString(or, uint64(reg), rev)
			if got != rr.Vals[ci] {
				what := "reg"
				if uint64(reg) == raCol {
					what = "ra"
				}
				return what, fmt.Sprintf("pc %#x: %s: readelf %s, ours %s", pc, cols[ci], rr.Vals[ci], got)
			}
		}
		for _, rr := range or.Regs {
			if !seen[rr.Reg] && rr.Rule.Kind != cfi.Undefined {
				if _, known := rev[rr.Reg]; known || rr.Reg == raCol {
					return "extra-rule", fmt.Sprintf("pc %#x: ours has a rule for register %d that readelf does not print", pc, rr.Reg)
				}
			}
		}
	}
	return "", ""
}

func regName(r uint64, rev map[uint64]string) string {
	if n, ok := rev[r]; ok {
		return n
	}
	return fmt.Sprintf("r%d", r)
}

func cfaString(c cfi.CFA, rev map[uint64]string) string {
	if c.Kind == cfi.CFAExpression {
		return "exp"
	}
	return fmt.Sprintf("%s%+d", regName(c.Reg, rev), c.Offset)
}

// ruleString renders our rule for reg the way readelf does: "u" for no
// rule (readelf's columns start as undefined), "s" for an explicit
// same_value, c±N, v±N, a register name, exp, vexp.
func ruleString(r *cfi.Row, reg uint64, rev map[uint64]string) string {
	for _, rr := range r.Regs {
		if rr.Reg != reg {
			continue
		}
		switch x := rr.Rule; x.Kind {
		case cfi.SameValue:
			return "s"
		case cfi.Undefined:
			return "u"
		case cfi.Offset:
			return fmt.Sprintf("c%+d", x.Offset)
		case cfi.ValOffset:
			return fmt.Sprintf("v%+d", x.Offset)
		case cfi.Register:
			return fmt.Sprintf("r%d (%s)", x.Reg, regName(x.Reg, rev))
		case cfi.Expression:
			return "exp"
		case cfi.ValExpression:
			return "vexp"
		}
	}
	return "u"
}
