package report

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
)

func pct(a, b uint64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(a)/float64(b))
}

func skips(f *File) string {
	var parts []string
	for _, r := range SkipReasons(f) {
		parts = append(parts, fmt.Sprintf("%d %s", f.Skipped[r], r))
	}
	return strings.Join(parts, ", ")
}

// sep puts two spaces before the last column (file and skipped would run
// together otherwise: tabwriter pads only the cells before it).
func sep(s string) string {
	if s == "" {
		return ""
	}
	return "  " + s
}

// WriteTable writes an aligned table, one line per file and the total.
func WriteTable(w io.Writer, files []*File) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "eh_frame\teh_frame_hdr\tsframe v3\tv2\tv3/eh\tv3/eh+hdr\tshared\tFDEs\tFREs\tfuncs\tcode\tall funcs\tall code\tfrom code\t\tfile\t  skipped")
	line := func(f *File) {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%.2f\t%.2f\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t\t%s\t%s\n", f.EHFrame, f.EHFrameHdr, f.SFrameV3, f.SFrameV2, f.RatioEH(), f.Ratio(),
			f.SFrameV3Unshared-f.SFrameV3, f.FDEs, f.FREs,
			pct(uint64(f.SFrameFuncs), uint64(f.CFIFuncs)), pct(f.SFrameBytes, f.CFIBytes),
			pct(uint64(f.SFrameCodeFuncs), uint64(f.CodeFuncs)), pct(f.SFrameCode, f.CodeBytes), pct(f.FromCodeBytes, f.CodeBytes), f.Path, sep(skips(f)))
	}
	for _, f := range files {
		line(f)
	}
	t := Total(files)
	line(t)
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, f := range files {
		if f.AgainstPath != "" && f.Against > 0 {
			fmt.Fprintf(w, "%s: sframe v3 %d bytes, %s's .sframe %d bytes: %.2fx\n", f.Path, f.SFrameV3, f.AgainstPath, f.Against, float64(f.SFrameV3)/float64(f.Against))
		}
	}
	_, err := fmt.Fprintf(w, "\n%d files. shared: bytes saved by pointing functions with the same FRE block at one copy (%d blocks for %d functions in total). FRE types addr1/2/4: %d/%d/%d functions; data words 1/2/4 bytes: %d/%d/%d FREs. funcs/code: share of the functions and code bytes the CFI describes that SFrame describes; all funcs/all code: share of every function (CFI, symbol tables) and of the executable sections' bytes.\n",
		len(files), t.Blocks, t.Functions, t.FREType[0], t.FREType[1], t.FREType[2], t.WordSize[0], t.WordSize[1], t.WordSize[2])
	return err
}

// WriteJSON writes {"files": [...], "total": {...}}.
func WriteJSON(w io.Writer, files []*File) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if files == nil {
		files = []*File{}
	}
	return enc.Encode(struct {
		Files []*File `json:"files"`
		Total *File   `json:"total"`
	}{files, Total(files)})
}

// WriteCSV writes one row per file, then the total.
func WriteCSV(w io.Writer, files []*File) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"file", "machine", "eh_frame", "eh_frame_hdr", "debug_frame", "sframe_v3", "sframe_v2", "sframe_existing", "ratio_v3", "ratio_v3_eh_frame", "sframe_v3_unshared", "sframe_v3_blocks", "sframe_against",
		"cfi_fdes", "sframe_functions", "sframe_fres", "fre_addr1", "fre_addr2", "fre_addr4", "word1", "word2", "word4",
		"cfi_functions", "cfi_code_bytes", "sframe_functions_from_cfi", "sframe_code_bytes_from_cfi",
		"code_functions", "sframe_covered_functions", "code_bytes", "sframe_covered_code_bytes", "go_table_code_bytes", "from_code_code_bytes", "skipped"})
	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	i := strconv.Itoa
	for _, f := range append(files, Total(files)) {
		cw.Write([]string{f.Path, f.Machine, u(f.EHFrame), u(f.EHFrameHdr), u(f.DebugFrame), u(f.SFrameV3), u(f.SFrameV2), u(f.Existing),
			strconv.FormatFloat(f.Ratio(), 'f', 4, 64), strconv.FormatFloat(f.RatioEH(), 'f', 4, 64), u(f.SFrameV3Unshared), i(f.Blocks), u(f.Against), i(f.FDEs), i(f.Functions), i(f.FREs),
			i(f.FREType[0]), i(f.FREType[1]), i(f.FREType[2]), i(f.WordSize[0]), i(f.WordSize[1]), i(f.WordSize[2]),
			i(f.CFIFuncs), u(f.CFIBytes), i(f.SFrameFuncs), u(f.SFrameBytes),
			i(f.CodeFuncs), i(f.SFrameCodeFuncs), u(f.CodeBytes), u(f.SFrameCode), u(f.GoBytes), u(f.FromCodeBytes), skips(f)})
	}
	cw.Flush()
	return cw.Error()
}
