package codeentry

import (
	"bytes"
	"debug/elf"
	"math/rand"
	"os"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/internal/isa"
)

// TestQuickDecode holds the sweep's decode with isa.QuickAMD64 to its
// decode by x86asm alone (the same insn, or both failing) at every
// instruction a sweep of libc's code starts, and at random bytes after
// every opcode (with and without a REX prefix) QuickAMD64 may read.
func TestQuickDecode(t *testing.T) {
	check := func(what string, b []byte) bool {
		got, ok := decodeAMD64(b, 0x1000)
		want, wok := decodeAMD64Full(b, 0x1000)
		if ok != wok || ok && got != want {
			t.Errorf("%s % x: quick %+v %v, x86asm %+v %v", what, b[:min(len(b), 16)], got, ok, want, wok)
			return false
		}
		return true
	}
	if raw, err := os.ReadFile("/usr/lib/x86_64-linux-gnu/libc.so.6"); err == nil {
		f, err := elf.NewFile(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		text, _ := f.Section(".text").Data()
		n, quick, bad := 0, 0, 0
		for off := 0; off < len(text) && bad < 10; {
			if !check("libc", text[off:]) {
				bad++
			}
			in, ok := decodeAMD64Full(text[off:], 0)
			if !ok {
				off++
				continue
			}
			if _, ok := isa.QuickAMD64(text[off:]); ok {
				quick++
			}
			off += in.len
			n++
		}
		t.Logf("libc: %d instructions, %d read by QuickAMD64", n, quick)
		if quick < n/3 {
			t.Errorf("QuickAMD64 read %d of libc's %d instructions: its forms are no longer the common ones", quick, n)
		}
	}
	rng := rand.New(rand.NewSource(2))
	b := make([]byte, 20)
	bad := 0
	for lead := 0; lead < 0x400 && bad < 20; lead++ {
		for k := 0; k < 300; k++ {
			rng.Read(b)
			pre := []byte{}
			if lead&0x100 != 0 {
				pre = append(pre, 0x40|byte(rng.Intn(16)))
			}
			if lead&0x200 != 0 {
				pre = append(pre, 0x0f)
			}
			in := append(append(pre, byte(lead)), b...)
			// Truncated too: a form cut short must not be read.
			if !check("random", in) || !check("truncated", in[:rng.Intn(len(in))]) {
				bad++
				break
			}
		}
	}
}
