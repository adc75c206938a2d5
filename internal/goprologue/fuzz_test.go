package goprologue

import (
	"encoding/hex"
	"testing"
)

// FuzzAnalyze feeds arbitrary code and SP rows to both analyses: no
// panic, and rules in PC order inside the code. (QuickAMD64 is held
// equal to Analyze on compiler output, by TestQuickGoCommand; on
// arbitrary code it relies on what it does not read, as documented.)
func FuzzAnalyze(f *testing.F) {
	// Go 1.26's shape: stack check, PUSHQ BP; MOVQ SP, BP; SUBQ $16, SP;
	// body; ADDQ $16, SP; POPQ BP; RET; the morestack call.
	seed, _ := hex.DecodeString("493b6610760d554889e54883ec10904883c4105dc3e800000000ebe6")
	f.Add(seed, []byte{0, 0, 4, 8, 7, 24, 20, 8, 21, 0, 22, 0}, false)
	f.Add(seed, []byte{0, 0, 4, 8, 7, 24}, true)
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
		if arch == AMD64 {
			if q, ok := QuickAMD64(code, entry, sp); ok {
				check("QuickAMD64", q)
			}
		}
	})
}
