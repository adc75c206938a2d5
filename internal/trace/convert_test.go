package trace

import (
	"bytes"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/convert"
)

// convertSFrame is the command's converter.
func convertSFrame(name string, r io.ReaderAt, size int64) ([]byte, uint64, error) {
	f, err := convert.NewFile(name, r, size)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	res, err := f.Convert(convert.Options{FragileLayout: true})
	if err != nil {
		return nil, 0, err
	}
	return res.SFrame, res.Addr, nil
}

// An object without .sframe is walked with the section converted in
// memory, which is the one convert builds from the file; its _start is named
// from it when the file is stripped; a failed conversion says why; an
// object with .sframe is not converted.
func TestLoadObjectConverts(t *testing.T) {
	hello := filepath.Join("..", "..", "testdata", "example", "hello")
	if strip, err := exec.LookPath("strip"); err == nil {
		stripped := filepath.Join(t.TempDir(), "hello")
		if out, err := exec.Command(strip, "-o", stripped, hello).CombinedOutput(); err != nil {
			t.Fatalf("strip: %v\n%s", err, out)
		}
		hello = stripped
	}
	o, err := loadObject(hello, "/usr/bin/hello", false, convertSFrame)
	if err != nil {
		t.Fatal(err)
	}
	if o.Table == nil || o.NoSFrame != "" || o.Conversion == nil || o.Conversion.Err != "" {
		t.Fatalf("table %v, no-SFrame reason %q, conversion %+v", o.Table, o.NoSFrame, o.Conversion)
	}
	cf, err := convert.Open(hello)
	if err != nil {
		t.Fatal(err)
	}
	want, err := cf.Convert(convert.Options{FragileLayout: true})
	cf.Close()
	if err != nil {
		t.Fatal(err)
	}
	if o.Conversion.Bytes != len(want.SFrame) || o.Conversion.Path != "/usr/bin/hello" || o.Conversion.Time <= 0 {
		t.Errorf("conversion %+v, want %d bytes", o.Conversion, len(want.SFrame))
	}
	if got := o.Symbolize(0x10a0 + 4); got != "_start" {
		t.Errorf("entry+4 is %q, want _start", got)
	}
	r, err := o.Table.Lookup(0x1190 + 8) // fib
	if err != nil || r.FuncStart != 0x1190 {
		t.Errorf("lookup in fib: %+v, %v", r, err)
	}

	calls := 0
	fail := func(name string, r io.ReaderAt, size int64) ([]byte, uint64, error) {
		calls++
		return nil, 0, errors.New("no luck") // a Converter's errors do not name the file
	}
	o, err = loadObject(hello, "/usr/bin/hello", false, fail)
	if err != nil {
		t.Fatal(err)
	}
	if o.Table != nil || o.Conversion == nil || o.Conversion.Err != "no luck" || !strings.HasSuffix(o.NoSFrame, "converting its CFI failed: no luck") {
		t.Errorf("failed conversion: table %v, no-SFrame reason %q, conversion %+v", o.Table, o.NoSFrame, o.Conversion)
	}
	exe := filepath.Join("..", "..", "testdata", "sframe", "v3-x86_64-exe")
	if o, err := loadObject(exe, exe, false, fail); err != nil || o.Table == nil || o.Conversion != nil || calls != 1 {
		t.Errorf("object with .sframe: %v, conversion %+v, %d conversions", err, o.Conversion, calls)
	}
}

// The summary lists each conversion with its size and time, when it
// happened, and the total.
func TestWriteConversions(t *testing.T) {
	c := &Collector{Conversions: []*Conversion{
		{Path: "/usr/bin/lua5.4", Bytes: 40466, Time: 1100e3, CPU: 1200e3, Attach: true},
		{Path: "/usr/lib/libm.so.6", Bytes: 41387, Time: 1000e3, CPU: 1000e3},
		{Path: "/usr/lib/libodd.so", Time: 100e3, CPU: 100e3, Attach: true, Err: "no call-frame information"},
	}}
	var b bytes.Buffer
	c.writeConversions(&b)
	want := []string{
		"SFrame built in memory from CFI for 2 objects without .sframe (1 more failed): 81853 bytes in 2.2 ms (2.3 ms CPU); 2 at attach in 1.2 ms, 1 when first seen later",
		"/usr/bin/lua5.4 40466 bytes 1.1 ms (1.2 ms CPU) at attach",
		"/usr/lib/libm.so.6 41387 bytes 1.0 ms (1.0 ms CPU) when first seen",
		"/usr/lib/libodd.so failed at attach after 0.1 ms: no call-frame information",
	}
	got := strings.Split(strings.TrimSpace(b.String()), "\n")
	for i := range got {
		got[i] = strings.Join(strings.Fields(got[i]), " ")
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("summary:\n%s\nwant\n%s", b.String(), strings.Join(want, "\n"))
	}
	var none bytes.Buffer
	(&Collector{}).writeConversions(&none)
	if none.Len() != 0 {
		t.Errorf("no conversions: %q", none.String())
	}
}
