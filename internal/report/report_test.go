package report

import (
	"bytes"
	"debug/elf"
	"encoding/csv"
	"encoding/json"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/internal/testing/toolchain"
)

func fixtures(t *testing.T) []*File {
	t.Helper()
	files, errs := Collect([]string{"../../testdata/sframe", "../../testdata/example"}, Options{}, nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if len(files) < 10 {
		t.Fatalf("%d files", len(files))
	}
	return files
}

// TestSizesMatchReadelf: the .eh_frame and .eh_frame_hdr byte counts are
// the section sizes readelf -S gives.
func TestSizesMatchReadelf(t *testing.T) {
	readelf := toolchain.Tool(t, "sid", "x86_64-readelf")
	files := fixtures(t)
	if _, err := os.Stat("/lib/x86_64-linux-gnu/libc.so.6"); err == nil {
		if f, err := Analyze("/lib/x86_64-linux-gnu/libc.so.6", Options{}); err == nil {
			files = append(files, f)
		}
	}
	for _, f := range files {
		out, err := exec.Command(readelf, "-SW", f.Path).Output()
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]uint64{}
		for _, line := range strings.Split(string(out), "\n") {
			fs := strings.Fields(strings.TrimLeft(strings.SplitN(line, "]", 2)[len(strings.SplitN(line, "]", 2))-1], " "))
			if len(fs) >= 5 && (fs[0] == ".eh_frame" || fs[0] == ".eh_frame_hdr") {
				n, _ := strconv.ParseUint(fs[4], 16, 64)
				want[fs[0]] = n
			}
		}
		if f.EHFrame != want[".eh_frame"] || f.EHFrameHdr != want[".eh_frame_hdr"] {
			t.Errorf("%s: ours %d/%d, readelf %d/%d", f.Path, f.EHFrame, f.EHFrameHdr, want[".eh_frame"], want[".eh_frame_hdr"])
		}
		// SFrame may cover one byte more than CFI per function: the return
		// address after a call that ends it (callsite.ReturnPad).
		if f.SFrameV3 == 0 || f.SFrameV2 == 0 || f.FDEs == 0 || f.SFrameFuncs > f.CFIFuncs || f.SFrameBytes > f.CFIBytes+uint64(f.SFrameFuncs) {
			t.Errorf("%s: implausible %+v", f.Path, f)
		}
	}
}

func TestOutputs(t *testing.T) {
	files := fixtures(t)
	var b bytes.Buffer
	if err := WriteJSON(&b, files); err != nil {
		t.Fatal(err)
	}
	var j struct {
		Files []File `json:"files"`
		Total File   `json:"total"`
	}
	if err := json.Unmarshal(b.Bytes(), &j); err != nil || len(j.Files) != len(files) || j.Total.FDEs != Total(files).FDEs {
		t.Fatalf("JSON: %v, %d files", err, len(j.Files))
	}
	b.Reset()
	if err := WriteCSV(&b, files); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&b).ReadAll()
	if err != nil || len(recs) != len(files)+2 || recs[len(recs)-1][0] != "TOTAL" {
		t.Fatalf("CSV: %v, %d rows", err, len(recs))
	}
	b.Reset()
	if err := WriteTable(&b, files); err != nil || !strings.Contains(b.String(), "TOTAL") || strings.Count(b.String(), "\n") < len(files)+2 {
		t.Fatalf("table: %v\n%s", err, b.String())
	}
	// The last two columns (file, skipped) stay apart.
	if head, _, _ := strings.Cut(b.String(), "\n"); !strings.HasSuffix(head, " file  skipped") {
		t.Errorf("table header %q: file and skipped columns run together", head)
	}
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if strings.Contains(l, "TOTAL") && !strings.Contains(l, " TOTAL ") && !strings.HasSuffix(l, " TOTAL") {
			t.Errorf("total line %q: no separator after the file column", l)
		}
	}
	tot := Total(files)
	if tot.FREType[0]+tot.FREType[1]+tot.FREType[2] != tot.Functions || tot.WordSize[0]+tot.WordSize[1]+tot.WordSize[2] > tot.FREs {
		t.Errorf("histograms do not add up: %+v", tot)
	}
}

// TestHTMLInChromium renders the page in headless Chromium and checks the
// screenshot shows the charts: enough pixels of each chart colour.
func TestHTMLInChromium(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CFI2SFRAME_REQUIRE_TOOLCHAIN") != "" {
			t.Fatal("chromium not found (CI installs it)")
		}
		t.Skip("chromium not found")
	}
	dir := t.TempDir()
	page := filepath.Join(dir, "report.html")
	var b bytes.Buffer
	if err := WriteHTML(&b, fixtures(t)); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b.Bytes(), []byte("<script")) || bytes.Contains(b.Bytes(), []byte("http://")) && !bytes.Contains(b.Bytes(), []byte("http://www.w3.org/2000/svg")) {
		t.Error("the page is not self-contained")
	}
	os.WriteFile(page, b.Bytes(), 0o644)
	shot := filepath.Join(dir, "shot.png")
	cmd := exec.Command(chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--user-data-dir="+filepath.Join(dir, "profile"),
		"--window-size=1200,1600", "--screenshot="+shot, "file://"+page)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, out)
	}
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][3]uint8{"CFI bars": {0x4a, 0x7d, 0xc4}, "SFrame bars": {0xe8, 0x83, 0x3a}, "ratio bars": {0x3a, 0x9e, 0x6e}}
	counts := map[string]int{}
	bounds := img.Bounds()
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			for name, c := range want {
				if near(r>>8, c[0]) && near(g>>8, c[1]) && near(bl>>8, c[2]) {
					counts[name]++
				}
			}
		}
	}
	for name := range want {
		if counts[name] < 500 {
			t.Errorf("screenshot has %d pixels of the %s colour; the chart did not render", counts[name], name)
		}
	}
	t.Logf("screenshot %dx%d, chart pixels %v", bounds.Dx(), bounds.Dy(), counts)
}

func near(a uint32, b uint8) bool { d := int(a) - int(b); return d > -6 && d < 6 }

// TestNoFDE: a program whose CFI sections hold no FDE gets a row (its
// code counts, uncovered), with no SFrame: cfi2sframe writes none for it.
func TestNoFDE(t *testing.T) {
	as := toolchain.Tool(t, "sid", "x86_64-as")
	ld := toolchain.Tool(t, "sid", "x86_64-ld")
	dir := t.TempDir()
	obj, exe := filepath.Join(dir, "cie-only.o"), filepath.Join(dir, "cie-only")
	for _, c := range [][]string{{as, "-o", obj, "testdata/cie-only.s"}, {ld, "-o", exe, obj}} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", c, err, out)
		}
	}
	f, err := Analyze(exe, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if f.EHFrame == 0 || f.FDEs != 0 || f.SFrameV3 != 0 || f.SFrameV2 != 0 || f.Functions != 0 || f.CFIFuncs != 0 {
		t.Errorf("%+v: want a row with .eh_frame, no FDE and no SFrame", f)
	}
}

// TestCodeCoverage: a program whose CFI describes one of its two
// functions reads 100% against its CFI and half against its code, the
// functions counted from the symbol table.
func TestCodeCoverage(t *testing.T) {
	as := toolchain.Tool(t, "sid", "x86_64-as")
	ld := toolchain.Tool(t, "sid", "x86_64-ld")
	dir := t.TempDir()
	obj, exe := filepath.Join(dir, "partial.o"), filepath.Join(dir, "partial")
	for _, c := range [][]string{{as, "-o", obj, "testdata/partial.s"}, {ld, "-o", exe, obj}} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", c, err, out)
		}
	}
	f, err := Analyze(exe, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if f.CFIFuncs != 1 || f.SFrameFuncs != 1 || f.SFrameBytes != f.CFIBytes {
		t.Errorf("CFI coverage: %d/%d functions, %d/%d bytes; want all of one", f.SFrameFuncs, f.CFIFuncs, f.SFrameBytes, f.CFIBytes)
	}
	ef, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	text := ef.Section(".text").Size
	if f.CodeFuncs != 2 || f.SFrameCodeFuncs != 1 || f.CodeBytes != text || f.SFrameCode != f.CFIBytes || f.SFrameCode >= f.CodeBytes {
		t.Errorf("code coverage: %d/%d functions, %d/%d bytes; want 1/2 and the first function's bytes of .text's %d", f.SFrameCodeFuncs, f.CodeFuncs, f.SFrameCode, f.CodeBytes, text)
	}
}

// TestFromCode: a file without CFI has none of its code described, and
// with --from-code its code described from the instructions is counted
// apart.
func TestFromCode(t *testing.T) {
	const file = "../../testdata/fromcode/x86_64-nocfi"
	if f, err := Analyze(file, Options{}); err != ErrSkip && (err != nil || f.SFrameCode != 0 || f.FromCodeBytes != 0) {
		t.Fatalf("without --from-code: %v, %+v: want no code described", err, f)
	}
	f, err := Analyze(file, Options{FromCode: true})
	if err != nil {
		t.Fatal(err)
	}
	if f.FromCodeFuncs == 0 || f.FromCodeBytes == 0 || f.FromCodeBytes > f.CodeBytes || f.SFrameCode == 0 {
		t.Errorf("from code: %d functions, %d of %d code bytes, %d covered", f.FromCodeFuncs, f.FromCodeBytes, f.CodeBytes, f.SFrameCode)
	}
	if f.Skipped["code-cfa-lost"] != 1 {
		t.Errorf("skipped %v, want realign_nofp as code-cfa-lost", f.Skipped)
	}
}
