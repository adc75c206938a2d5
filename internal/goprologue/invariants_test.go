package goprologue

import (
	"strings"
	"testing"
)

// written says whether g was compiled from Go (not assembly) and is a
// real function, not one of the linker's markers (go:textfipsstart...).
func written(g goFunc) bool {
	return !g.asm && !strings.HasPrefix(g.name, "go:")
}

// checkGoFuncs fails for every function compiled from Go that Analyze
// does not follow or cannot decode.
func checkGoFuncs(t *testing.T, s *survey) {
	t.Helper()
	bad := 0
	for i, g := range s.funcs {
		if !written(g) {
			continue
		}
		if s.errs[i] != nil || s.results[i].Kind == Unrecognized {
			if bad++; bad <= 10 {
				t.Errorf("%s %#x: %v %v", g.name, g.entry, s.results[i], s.errs[i])
			}
		}
	}
	if bad > 10 {
		t.Errorf("and %d more functions compiled from Go", bad-10)
	}
}

// programKinds are the kinds of the test program's own functions.
var programKinds = map[string]Kind{
	"main.leaf":              Frameless,
	"main.small":             Described,
	"main.big":               Described,
	"main.jump":              Described,
	"main.recovering":        Described,
	"main.recovering.func1":  Described,
	"main.index":             Described,
	"main.(*counter).add":    Described,
	"main.apply":             Described,
	"main.main":              Described,
	"main.main.func1":        Described,
	"main.(*counter).add-fm": Described,
}

// checkProgramFuncs checks the kinds of the test program's functions;
// built with -N -l, even the leaf has a frame.
func checkProgramFuncs(t *testing.T, s *survey, noOpt bool) {
	t.Helper()
	seen := map[string]bool{}
	for i, g := range s.funcs {
		want, ok := programKinds[g.name]
		if !ok {
			continue
		}
		if noOpt {
			want = Described
		}
		seen[g.name] = true
		if got := s.results[i].Kind; got != want || s.errs[i] != nil {
			t.Errorf("%s: %v %v, want %v", g.name, s.results[i], s.errs[i], want)
		}
	}
	for _, name := range []string{"main.leaf", "main.small", "main.big", "main.jump", "main.recovering", "main.main"} {
		if !seen[name] {
			t.Errorf("%s is not in the binary", name)
		}
	}
}

// checkInvariants checks, for every described function compiled from
// Go, what its frame layout implies whatever the shape of its code:
//   - the saved frame pointer's slot is CFA-16 on amd64 (below the return
//     address) and CFA-framesize-8 on arm64, the frame size being the
//     largest SP delta of the pcsp rows;
//   - at every RET the frame pointer is back in its register;
//   - at every call made with the whole frame in place (the largest SP
//     delta), the frame pointer is saved.
func checkInvariants(t *testing.T, s *survey) {
	t.Helper()
	bad := 0
	fail := func(g goFunc, format string, args ...any) {
		if bad++; bad <= 10 {
			t.Errorf("%s %#x: "+format, append([]any{g.name, g.entry}, args...)...)
		}
	}
	for i, g := range s.funcs {
		r := s.results[i]
		if !written(g) || s.errs[i] != nil || r.Kind != Described {
			continue
		}
		frame := int64(0)
		for _, row := range g.sp {
			frame = max(frame, row.Delta)
		}
		want := int64(-16)
		if s.arch == ARM64 {
			want = -frame - 8
		}
		for _, rl := range r.Rules {
			if rl.Saved && rl.Offset != want {
				fail(g, "saved at CFA%+d from %#x, want CFA%+d", rl.Offset, rl.PC, want)
			}
		}
		for _, in := range arches[s.arch].decode(g.code, g.entry, new(scratch)) {
			if in.err != nil || !spKnownAt(g.sp, in.pc) {
				continue
			}
			e := arches[s.arch].effect(in, spAt(g.sp, in.pc), map[int]value{})
			saved := ruleAt(r.Rules, in.pc).Saved
			switch {
			case e.flow == flowReturn && saved:
				fail(g, "%s at %#x with the frame pointer saved", in.text(), in.pc)
			case e.flow == flowCall && spAt(g.sp, in.pc) == frame && !saved:
				fail(g, "%s at %#x in the frame without the frame pointer saved", in.text(), in.pc)
			}
		}
	}
	if bad > 10 {
		t.Errorf("and %d more", bad-10)
	}
}

// ruleAt is the rule in force at pc.
func ruleAt(rules []Rule, pc uint64) Rule {
	var r Rule
	for _, rl := range rules {
		if rl.PC > pc {
			break
		}
		r = rl
	}
	return r
}

func spKnownAt(rows []SPRange, pc uint64) bool {
	for _, r := range rows {
		if r.Start <= pc && pc < r.End {
			return true
		}
	}
	return false
}

func spAt(rows []SPRange, pc uint64) int64 {
	for _, r := range rows {
		if r.Start <= pc && pc < r.End {
			return r.Delta
		}
	}
	return 0
}
