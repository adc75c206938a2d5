package judge

import (
	"fmt"
	"slices"
	"strings"
)

// KernelTruth is the true chain of every sample of the kernel harness's
// programs whose innermost function is the first, innermost first, one
// line per chain: the program, its frames ("NAME*" is any function one of
// whose names starts with NAME; PLT is a stub of the .plt section), then
// after ";" the frames at which the kernel's unwinder is known to stop
// (docs/acceptance.md, "The kernel's limits"), and "?" when the chain is
// seen too rarely to be required in every run: __restore_rt, since it reads
// no signal frame; drapfn as a caller, since its rbp rule names a register
// and the kernel applies register rules only in the interrupted frame.
// A static program's .plt stubs are called from glibc's start-up code
// too (__libc_setup_tls calls memcpy through one), rarely sampled.
// goprog is a Go program: its chain ends at runtime.goexit, the first
// frame of every goroutine, which its SFrame marks outermost. dyn is
// dynamically linked: its frames lie in the program, its library
// libchain.so and libc.so.6; "@OBJ+" is one or more frames in the object
// whose file is named OBJ (Debian's libc.so.6 is stripped, so its internal
// functions have no name, and qsort's merge sort recurses to a depth that
// varies). noreturn's callers end with a call of a function that does not
// return (limit 4): the return address is the caller's end, which a frame
// matches as the caller (as for any true frame past the innermost); after
// pad_caller's end comes padding, after next_caller's directly the next
// function, whose rule the kernel applies to next_caller's frame, so that
// "next_caller@end" makes a chain right through spin_next and next_caller's
// return address a chain at a known limit, whatever follows (Kernel keeps
// it only where verify --for kernel noted return-at-end there).
const KernelTruth = `
chain leaf c8 c7 c6 c5 c4 c3 c2 c1 main __libc_start_call_main __libc_start_main _start ;
drap leaf d3 drapfn d2 d1 main __libc_start_call_main __libc_start_main _start ; drapfn
drap drapfn d2 d1 main __libc_start_call_main __libc_start_main _start ;
signal s3 s2 s1 main __libc_start_call_main __libc_start_main _start ;
signal hleaf h1 handler __restore_rt __kill s3 s2 s1 main __libc_start_call_main __libc_start_main _start ; __restore_rt
plt p2 p1 main __libc_start_call_main __libc_start_main _start ;
plt PLT p2 p1 main __libc_start_call_main __libc_start_main _start ;
plt __strlen_* p2 p1 main __libc_start_call_main __libc_start_main _start ;
plt __strnlen_* p2 p1 main __libc_start_call_main __libc_start_main _start ;
plt __strcpy_* p2 p1 main __libc_start_call_main __libc_start_main _start ;
plt PLT __libc_setup_tls __libc_start_main _start ; ?
goprog main.leaf main.c main.b main.a main.main runtime.main runtime.goexit ;
dyn lib_leaf lib_l2 p2 lib_l1 p1 main @libc.so.6+ _start ;
dyn lib_cmp @libc.so.6+ lib_sort p3 main @libc.so.6+ _start ;
noreturn spin_pad pad_caller pa1 main __libc_start_call_main __libc_start_main _start ;
noreturn spin_next next_caller na1 main __libc_start_call_main __libc_start_main _start ; next_caller@end
`

// A Truth is one true chain: its frames, innermost first, and the frames
// at which an unwinder is known to stop.
type Truth struct {
	Frames []string
	Limits []string
	// Optional: a chain seldom sampled, not required to be seen.
	Optional bool
	// AtEnd are the frames (written "NAME@end" among the limits) whose
	// function ends with a call and is followed directly by another
	// function: the kernel looks the return address up in that one
	// (docs/acceptance.md, limit 4), so a chain right up to such a frame's
	// return address is at a known limit, whatever follows.
	AtEnd []string
}

// ParseTruth returns the true chains of prog from a table written as
// KernelTruth is, in their order.
func ParseTruth(table, prog string) ([]Truth, error) {
	var ts []Truth
	for _, l := range strings.Split(table, "\n") {
		f := strings.Fields(l)
		if len(f) == 0 || f[0] != prog {
			continue
		}
		var t Truth
		lim := false
		for _, w := range f[1:] {
			switch {
			case w == ";":
				lim = true
			case lim && w == "?":
				t.Optional = true
			case lim && strings.HasSuffix(w, "@end"):
				t.AtEnd = append(t.AtEnd, strings.TrimSuffix(w, "@end"))
			case lim:
				t.Limits = append(t.Limits, w)
			default:
				t.Frames = append(t.Frames, w)
			}
		}
		if len(t.Frames) == 0 {
			return nil, fmt.Errorf("true chain of %s without frames: %q", prog, l)
		}
		ts = append(ts, t)
	}
	if len(ts) == 0 {
		return nil, fmt.Errorf("no true chain of %s", prog)
	}
	return ts, nil
}

// Class is the verdict on one recorded chain.
type Class int

const (
	// Other: its innermost frame is in none of the true chains' innermost
	// functions (outside the spinning code).
	Other Class = iota
	// Equal: frame for frame the true chain, no frame more or less.
	Equal
	// Limit: a prefix of the true chain ending at one of its known limits.
	Limit
	// Wrong: anything else whose innermost frame is right, and an empty
	// chain.
	Wrong
)

func (c Class) String() string {
	switch c {
	case Other:
		return "other"
	case Equal:
		return "equal"
	case Limit:
		return "limit"
	case Wrong:
		return "wrong"
	}
	return fmt.Sprintf("Class(%d)", int(c))
}

// A Verdict is how one chain compares with the true chains.
type Verdict struct {
	Class Class
	// Why says what is wrong, where the chain stops, or which innermost
	// frame it has, for reports; empty for Equal.
	Why string
	// Truth is the index of the true chain whose innermost frame the
	// chain has, or -1 (Other, and an empty chain).
	Truth int
	// ThroughMain: the chain is the true one from its innermost frame
	// through main, whatever follows.
	ThroughMain bool
}

// isMain reports whether a true chain's frame is the program's main
// function: main in C, main.main in Go.
func isMain(frame string) bool { return frame == "main" || frame == "main.main" }

// objectRun reports whether a true chain's frame is "@OBJ+" (one or more
// frames in the object named OBJ) and returns OBJ.
func objectRun(frame string) (string, bool) {
	if o, ok := strings.CutPrefix(frame, "@"); ok {
		return strings.CutSuffix(o, "+")
	}
	return "", false
}

// Classify compares the chain ips (innermost first) with the true chains
// truth, resolved through st. The true chains whose innermost frame the
// chain's is are tried in turn: the first the chain equals decides, else
// the first it stops at a limit of, else the first of them. Against one,
// frames are compared in turn up to the first that
// differs (Wrong), a true frame "@OBJ+" taking every frame in a row (at
// least one) that lies in the object OBJ; a chain that ends with the true
// one is Equal, a longer one Wrong; a shorter one is Limit if its last
// frame is one of the true chain's limits and Wrong otherwise. A frame
// past the innermost is also its true frame when it is that function's
// end (the return address of a call that ends the function); when that
// frame is one of the true chain's AtEnd, a chain that is not Equal is
// Limit (the kernel unwound the caller by the next function's rule). An empty
// chain is Wrong; a chain whose innermost frame is in none of the true
// chains' is Other.
func Classify(st *Symtab, truth []Truth, ips []uint64) Verdict {
	if len(ips) == 0 {
		return Verdict{Class: Wrong, Why: "empty chain", Truth: -1}
	}
	top := st.find(ips[0])
	var first, limit *Verdict
	for ti, t := range truth {
		if !st.is(top, t.Frames[0]) {
			continue
		}
		v := classifyAgainst(st, t, ti, ips)
		switch {
		case v.Class == Equal:
			return v
		case v.Class == Limit && limit == nil:
			limit = &v
		}
		if first == nil {
			first = &v
		}
	}
	if limit != nil {
		return *limit
	}
	if first != nil {
		return *first
	}
	return Verdict{Class: Other, Why: "innermost frame " + st.Name(ips[0]), Truth: -1}
}

// classifyAgainst compares the chain ips with the true chain t, the
// ti-th, whose innermost frame the chain's is (see Classify).
func classifyAgainst(st *Symtab, t Truth, ti int, ips []uint64) Verdict {
	n := len(ips)
	v := Verdict{Truth: ti}
	i, j := 0, 0 // the next frame of the chain, of the true chain
	atEnd := ""  // an AtEnd frame the chain passed at its function's end
	for i < n && j < len(t.Frames) {
		if obj, ok := objectRun(t.Frames[j]); ok {
			if !st.inObject(ips[i], obj) {
				break
			}
			for i < n && st.inObject(ips[i], obj) {
				i++
			}
		} else if st.is(st.find(ips[i]), t.Frames[j]) {
			i++
		} else if i > 0 && st.endOf(ips[i], t.Frames[j]) {
			if atEnd == "" && slices.Contains(t.AtEnd, t.Frames[j]) {
				atEnd = t.Frames[j]
			}
			i++
		} else {
			break
		}
		j++
	}
	if m := slices.IndexFunc(t.Frames, isMain); m >= 0 && j > m {
		v.ThroughMain = true
	}
	if atEnd != "" && (i < n || j < len(t.Frames)) {
		v.Class, v.Why = Limit, "return address at "+atEnd+"'s end (limit 4), then "+rest(st, ips[i:])
		return v
	}
	switch {
	case i < n && j < len(t.Frames):
		v.Class, v.Why = Wrong, fmt.Sprintf("frame %d is %s, want %s", i+1, st.Name(ips[i]), t.Frames[j])
	case i == n && j == len(t.Frames):
		v.Class = Equal
	case i < n:
		v.Class, v.Why = Wrong, fmt.Sprintf("%d frames after %s", n-i, t.Frames[len(t.Frames)-1])
	case slices.Contains(t.Limits, t.Frames[j-1]):
		v.Class, v.Why = Limit, "stops at "+t.Frames[j-1]
	default:
		v.Class, v.Why = Wrong, fmt.Sprintf("stops after %s (frame %d of %d)", t.Frames[j-1], j, len(t.Frames))
	}
	return v
}

// rest names the frames ips for a report: "nothing" when there are none.
func rest(st *Symtab, ips []uint64) string {
	if len(ips) == 0 {
		return "nothing"
	}
	names := make([]string, len(ips))
	for i, ip := range ips {
		names[i] = st.Name(ip)
	}
	return strings.Join(names, " ")
}
