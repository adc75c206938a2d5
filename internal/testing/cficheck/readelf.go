// Package cficheck compares the rows of package cfi with those of GNU
// readelf --debug-dump=frames-interp, binutils' own CFI interpreter, FDE by
// FDE and PC by PC.
package cficheck

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Dump is readelf's view of one call-frame section.
type Dump struct {
	Section string           // ".eh_frame" or ".debug_frame"
	CIEs    map[int64]*Frame // by section offset
	FDEs    map[int64]*Frame
}

// Frame is one CIE or FDE as readelf prints it.
type Frame struct {
	Off    int64
	CIE    int64 // FDE: its CIE's offset
	Lo, Hi uint64
	RA     int // CIE: return-address column
	Cols   []string
	Rows   []Row
}

// Row is one printed row: LOC, CFA and the value of each column.
type Row struct {
	Loc  uint64
	CFA  string
	Vals []string
}

// ParseReadelf reads the output of readelf --debug-dump=frames-interp.
func ParseReadelf(r io.Reader) ([]*Dump, error) {
	var dumps []*Dump
	var d *Dump
	var cur *Frame
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	line := 0
	for sc.Scan() {
		line++
		s := sc.Text()
		switch {
		case strings.HasPrefix(s, "Contents of the "):
			// "Contents of the .eh_frame section:", or with " (loaded from
			// FILE):" when the file has a .gnu_debuglink.
			name, _, _ := strings.Cut(strings.TrimPrefix(s, "Contents of the "), " section")
			cur = nil
			if name != ".eh_frame" && name != ".debug_frame" {
				d = nil
				continue
			}
			d = &Dump{Section: name, CIEs: map[int64]*Frame{}, FDEs: map[int64]*Frame{}}
			dumps = append(dumps, d)
		case d == nil:
		case strings.HasPrefix(s, "   LOC"):
			if cur == nil {
				return nil, fmt.Errorf("line %d: LOC header outside a frame", line)
			}
			f := strings.Fields(s)
			cur.Cols = f[2:]
		case len(s) > 0 && s[0] != ' ':
			f := strings.Fields(s)
			if len(f) >= 4 && (f[3] == "CIE" || f[3] == "FDE") {
				off, err := strconv.ParseInt(f[0], 16, 64)
				if err != nil {
					return nil, fmt.Errorf("line %d: %v", line, err)
				}
				cur = &Frame{Off: off}
				if f[3] == "CIE" {
					d.CIEs[off] = cur
					for _, x := range f {
						if strings.HasPrefix(x, "ra=") {
							cur.RA, _ = strconv.Atoi(x[3:])
						}
					}
				} else {
					d.FDEs[off] = cur
					for _, x := range f[4:] {
						switch {
						case strings.HasPrefix(x, "cie="):
							cur.CIE, _ = strconv.ParseInt(x[4:], 16, 64)
						case strings.HasPrefix(x, "pc="):
							lo, hi, _ := strings.Cut(x[3:], "..")
							cur.Lo, _ = strconv.ParseUint(lo, 16, 64)
							cur.Hi, _ = strconv.ParseUint(hi, 16, 64)
						}
					}
				}
				continue
			}
			if len(f) >= 2 && f[1] == "ZERO" {
				cur = nil // "ZERO terminator"
				continue
			}
			if cur != nil && cur.Cols != nil && len(f) >= 2 {
				loc, err := strconv.ParseUint(f[0], 16, 64)
				if err != nil {
					continue // "ZERO terminator" and the like
				}
				cur.Rows = append(cur.Rows, Row{Loc: loc, CFA: f[1], Vals: joinRegs(f[2:])})
			}
		}
	}
	return dumps, sc.Err()
}

// joinRegs merges readelf's two-token register rule "r12 (r12)" into one
// value.
func joinRegs(f []string) []string {
	out := f[:0:0]
	for _, x := range f {
		if n := len(out); n > 0 && strings.HasPrefix(x, "(") && strings.HasSuffix(x, ")") {
			out[n-1] += " " + x
			continue
		}
		out = append(out, x)
	}
	return out
}
