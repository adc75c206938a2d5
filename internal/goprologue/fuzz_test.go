package goprologue

import (
	"encoding/hex"
	"testing"
)

// FuzzAnalyze feeds arbitrary code and SP rows to the full analysis and
// to the fast path of the architecture: no panic, and rules in PC order
// inside the code. (QuickAMD64 and QuickARM64 are held equal to Analyze
// on compiler output, by TestQuickGoCommand; on arbitrary code they rely
// on what they do not read, as documented.)
func FuzzAnalyze(f *testing.F) {
	// Go 1.26's shape: stack check, PUSHQ BP; MOVQ SP, BP; SUBQ $16, SP;
	// body; ADDQ $16, SP; POPQ BP; RET; the morestack call.
	seed, _ := hex.DecodeString("493b6610760d554889e54883ec10904883c4105dc3e800000000ebe6")
	f.Add(seed, []byte{0, 0, 4, 8, 7, 24, 20, 8, 21, 0, 22, 0}, false)
	f.Add(seed, []byte{0, 0, 4, 8, 7, 24}, true)
	// Go 1.19's: CMPQ SP, 16(R14); JBE; SUBQ $24, SP; MOVQ BP, 16(SP);
	// LEAQ 16(SP), BP; body; MOVQ 16(SP), BP; ADDQ $24, SP; RET.
	go119, _ := hex.DecodeString("493b661076184883ec1848896c2410488d6c241090488b6c24104883c418c3")
	f.Add(go119, []byte{0, 0, 10, 6, 30, 0}, false)
	// arm64: MOVD.W R30, -32(RSP); MOVD R29, -8(RSP); SUB $8, RSP, R29;
	// NOP; MOVD -8(RSP), R29; MOVD.P 32(RSP), R30; RET.
	a64, _ := hex.DecodeString("fe0f1ef8fd831ff8fd2300d11f2003d5fd835ff8fe0742f8c0035fd6")
	f.Add(a64, []byte{0, 0, 4, 8, 24, 0}, true)
	f.Fuzz(func(t *testing.T, code, rows []byte, arm bool) {
		if len(code) == 0 || len(code) > 4096 {
			return
		}
		const entry = 0x401000
		// rows: pairs of (offset from the entry, delta/4), offsets rising.
		var sp []SPRange
		for i := 0; i+1 < len(rows); i += 2 {
			start := entry + uint64(rows[i])
			if len(sp) > 0 && start <= sp[len(sp)-1].Start {
				break
			}
			if len(sp) > 0 {
				sp[len(sp)-1].End = start
			}
			sp = append(sp, SPRange{Start: start, End: entry + uint64(len(code)), Delta: 4 * int64(rows[i+1])})
		}
		if len(sp) == 0 || sp[0].Start != entry || sp[len(sp)-1].Start >= entry+uint64(len(code)) {
			return
		}
		arch := AMD64
		if arm {
			arch = ARM64
		}
		check := func(what string, res Result) {
			if res.Kind != Described {
				return
			}
			for i, r := range res.Rules {
				if r.PC < entry || r.PC >= entry+uint64(len(code)) || (i > 0 && r.PC <= res.Rules[i-1].PC) {
					t.Fatalf("%s: rule %d at %#x: out of order or outside the code (%v)", what, i, r.PC, res.Rules)
				}
			}
		}
		if res, err := Analyze(arch, code, entry, sp); err == nil {
			check("Analyze", res)
		}
		quick, name := QuickAMD64, "QuickAMD64"
		if arch == ARM64 {
			quick, name = QuickARM64, "QuickARM64"
		}
		if q, ok := quick(code, entry, sp); ok {
			check(name, q)
		}
	})
}
