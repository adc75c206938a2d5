package judge

import (
	"debug/elf"
	"fmt"
	"slices"
	"strings"
)

// KernelTruth is the true chain of every sample of the kernel harness's
// x86-64 programs whose innermost function is the first, innermost first, one
// line per chain: the program, its frames ("NAME*" is any function one of
// whose names starts with NAME; PLT is a stub of the .plt section), then
// after ";" the frames at which the kernel's unwinder is known to stop
// (docs/acceptance.md, "The kernel's limits"): __restore_rt, since it reads
// no signal frame; drapfn as a caller, since its rbp rule names a register
// and the kernel applies register rules only in the interrupted frame.
// A true chain whose limits say "?" need not be seen (Optional): a static
// program's .plt stubs are called from glibc's start-up code too
// (__libc_setup_tls calls memcpy through one), rarely sampled. The string
// functions are shared code ("NAME^", see KernelTruthARM64): glibc's
// start-up code calls them too (getenv calls strlen), so a chain from one
// whose second frame is a function no true chain names is Other.
// goprog is a Go program: its chain ends at runtime.goexit, the first
// frame of every goroutine, which its SFrame marks outermost. dyn is
// dynamically linked: its frames lie in the program, its library
// libchain.so and libc.so.6; "@OBJ+" is one or more frames in a row in the
// object OBJ the program had mapped (see KernelTruthARM64 for "@OBJ", one
// frame): Debian's libc.so.6 is stripped, so its internal functions have
// no name, and qsort's merge sort recurses to a depth that varies.
// noreturn's callers end with a call of a function that does not return
// (limit 4): the return address is the caller's end, which a frame
// matches as the caller (as for any true frame past the innermost); after
// pad_caller's end comes padding, after next_caller's directly the next
// function, whose rule the kernel applies to next_caller's frame, so that
// "next_caller@end" makes a chain right through spin_next and
// next_caller's return address a chain at a known limit, whatever follows
// (Kernel keeps it only where verify --for kernel noted return-at-end
// there).
const KernelTruth = `
chain leaf c8 c7 c6 c5 c4 c3 c2 c1 main __libc_start_call_main __libc_start_main _start ;
drap leaf d3 drapfn d2 d1 main __libc_start_call_main __libc_start_main _start ; drapfn
drap drapfn d2 d1 main __libc_start_call_main __libc_start_main _start ;
signal s3 s2 s1 main __libc_start_call_main __libc_start_main _start ;
signal hleaf h1 handler __restore_rt __kill s3 s2 s1 main __libc_start_call_main __libc_start_main _start ; __restore_rt
plt p2 p1 main __libc_start_call_main __libc_start_main _start ;
plt PLT p2 p1 main __libc_start_call_main __libc_start_main _start ;
plt __strlen_*^ p2 p1 main __libc_start_call_main __libc_start_main _start ;
plt __strnlen_*^ p2 p1 main __libc_start_call_main __libc_start_main _start ;
plt __strcpy_*^ p2 p1 main __libc_start_call_main __libc_start_main _start ;
plt PLT __libc_setup_tls __libc_start_main _start ; ?
goprog main.leaf main.c main.b main.a main.main runtime.main runtime.goexit ;
dyn lib_leaf lib_l2 p2 lib_l1 p1 main @libc.so.6+ _start ;
dyn lib_cmp @libc.so.6+ lib_sort p3 main @libc.so.6+ _start ;
noreturn spin_pad pad_caller pa1 main __libc_start_call_main __libc_start_main _start ;
noreturn spin_next next_caller na1 main __libc_start_call_main __libc_start_main _start ; next_caller@end
`

// KernelTruthARM64 is KernelTruth for the AArch64 programs, static and
// dynamic, written the same way, and: "A|B" is either frame; "@OBJ" any
// address in the object OBJ the program had mapped (the reader's M
// lines): a stripped libc.so.6 names only its exported functions, so
// __libc_start_call_main, the string functions and kill are "@libc.so.6"
// in a dynamic program. AArch64 glibc has no sigreturn trampoline: a
// handler returns to the vDSO's __kernel_rt_sigreturn ("@[vdso]"), which
// the kernel has no .sframe for; a limit written "FRAME+" is one the
// chain is judged through, whatever follows it: past the vDSO the kernel
// falls back to the frame pointer, which the kernel set to the frame
// record in the signal frame (the interrupted x29 and x30, not its PC), so
// what follows is the fallback's. drap's drapfn is no DRAP function here:
// gcc keeps a frame record and puts the CFA on x29, and its rules name no
// other register. Only the IFUNC strlen goes through .plt in a static
// program; its one true chain for the string functions covers the three.
// A line of "PROG:static" or "PROG:dynamic" is a true chain of the static
// or the dynamic builds only (ParseTruthFor): in a dynamic program the
// string functions are libc.so.6's, for which the kernel has no .sframe
// (binfmt_elf registers only the program and ld.so), so a sample there
// falls back to the frame pointer, which the -fomit-frame-pointer callers
// do not keep: judged through the libc frame, as a limit. An innermost
// frame written "NAME^" is shared code: the .plt stubs and the string
// functions are called by glibc's start-up and exit code too (getenv,
// __libc_setup_tls, malloc, _dl_new_object, __do_global_dtors_aux, ...),
// so a chain from it whose second frame is a function no true chain of
// the program has anywhere is outside the spinning code (Other), not
// wrong. A chain that skips callers (the frame-pointer fallback's
// "strlen __libc_start_main _start") is still judged, and a missing or
// wrong FDE of such code still shows: its chains from p2 would be wrong,
// or Other and the true chain never seen. A true chain whose limits say
// "?" need not be seen: the .plt stubs of __libc_start_main called by a
// PIE's _start and of strtoul called by main, start-up chains whose
// callers are in the true chains. dyn's chains are x86-64's.
const KernelTruthARM64 = `
chain leaf c8 c7 c6 c5 c4 c3 c2 c1 main __libc_start_call_main|@libc.so.6 __libc_start_main _start ;
drap leaf d3 drapfn d2 d1 main __libc_start_call_main|@libc.so.6 __libc_start_main _start ;
drap drapfn d2 d1 main __libc_start_call_main|@libc.so.6 __libc_start_main _start ;
signal s3 s2 s1 main __libc_start_call_main|@libc.so.6 __libc_start_main _start ;
signal hleaf h1 handler @[vdso] __kill|@libc.so.6 s3 s2 s1 main __libc_start_call_main|@libc.so.6 __libc_start_main _start ; @[vdso]+
plt p2 p1 main __libc_start_call_main|@libc.so.6 __libc_start_main _start ;
plt PLT^ p2 p1 main __libc_start_call_main|@libc.so.6 __libc_start_main _start ;
plt:static __strlen_asimd|__strlen_mte|__strnlen|strcpy^ p2 p1 main __libc_start_call_main __libc_start_main _start ;
plt:dynamic @libc.so.6 p2 p1 main @libc.so.6 __libc_start_main _start ; @libc.so.6+
plt:dynamic PLT _start ; ?
plt PLT main __libc_start_call_main|@libc.so.6 __libc_start_main _start ; ?
goprog main.leaf main.c main.b main.a main.main runtime.main runtime.goexit ;
dyn lib_leaf lib_l2 p2 lib_l1 p1 main @libc.so.6+ _start ;
dyn lib_cmp @libc.so.6+ lib_sort p3 main @libc.so.6+ _start ;
`

// KernelTruthS390X is KernelTruth for the s390x programs, static and
// dynamic, written as KernelTruthARM64 is. As on AArch64, a handler
// returns to the vDSO's __kernel_rt_sigreturn ("@[vdso]"), which has no
// .sframe; s390x has no frame-pointer fallback (no HAVE_UNWIND_USER_FP:
// its ABI fixes neither a frame pointer nor where a frame saves it), so a
// walk ends at the first address without .sframe: the vDSO, and in a
// dynamic program libc.so.6 (binfmt_elf registers only the program and
// ld64.so.1), whose __libc_start_call_main is then the last frame of every
// chain through main and a string function the only one of its chain.
// glibc 2.36's static s390x string functions are the z196 baseline's
// (__strlen_c, __strnlen_c, __strcpy_default), reached through .plt.
const KernelTruthS390X = `
chain:static leaf c8 c7 c6 c5 c4 c3 c2 c1 main __libc_start_call_main __libc_start_main _start ;
chain:dynamic leaf c8 c7 c6 c5 c4 c3 c2 c1 main __libc_start_call_main|@libc.so.6 __libc_start_main _start ; __libc_start_call_main|@libc.so.6
drap:static leaf d3 drapfn d2 d1 main __libc_start_call_main __libc_start_main _start ;
drap:dynamic leaf d3 drapfn d2 d1 main __libc_start_call_main|@libc.so.6 __libc_start_main _start ; __libc_start_call_main|@libc.so.6
drap:static drapfn d2 d1 main __libc_start_call_main __libc_start_main _start ;
drap:dynamic drapfn d2 d1 main __libc_start_call_main|@libc.so.6 __libc_start_main _start ; __libc_start_call_main|@libc.so.6
signal:static s3 s2 s1 main __libc_start_call_main __libc_start_main _start ;
signal:dynamic s3 s2 s1 main __libc_start_call_main|@libc.so.6 __libc_start_main _start ; __libc_start_call_main|@libc.so.6
signal hleaf h1 handler @[vdso] __kill|@libc.so.6 s3 s2 s1 main __libc_start_call_main|@libc.so.6 __libc_start_main _start ; @[vdso]
plt:static p2 p1 main __libc_start_call_main __libc_start_main _start ;
plt:dynamic p2 p1 main __libc_start_call_main|@libc.so.6 __libc_start_main _start ; __libc_start_call_main|@libc.so.6
plt:static PLT^ p2 p1 main __libc_start_call_main __libc_start_main _start ;
plt:dynamic PLT^ p2 p1 main __libc_start_call_main|@libc.so.6 __libc_start_main _start ; __libc_start_call_main|@libc.so.6
plt:static __strlen_c|__strnlen_c|__strcpy_default^ p2 p1 main __libc_start_call_main __libc_start_main _start ;
plt:dynamic @libc.so.6 p2 p1 main @libc.so.6 __libc_start_main _start ; @libc.so.6
plt:dynamic PLT _start ; ?
plt PLT main __libc_start_call_main|@libc.so.6 __libc_start_main _start ; ? __libc_start_call_main|@libc.so.6
goprog main.leaf main.c main.b main.a main.main runtime.main runtime.goexit ;
`

// KernelTruthFor is the table of true chains for programs of machine m.
func KernelTruthFor(m elf.Machine) string {
	switch m {
	case elf.EM_AARCH64:
		return KernelTruthARM64
	case elf.EM_S390:
		return KernelTruthS390X
	}
	return KernelTruth
}

// A Truth is one true chain: its frames, innermost first, and the frames
// at which an unwinder is known to stop.
type Truth struct {
	Frames []string
	Limits []string
	// AtEnd are the frames (written "NAME@end" among the limits) whose
	// function ends with a call and is followed directly by another
	// function: the kernel looks the return address up in that one
	// (docs/acceptance.md, limit 4), so a chain right up to such a frame's
	// return address is at a known limit, whatever follows.
	AtEnd []string
}

// Optional reports whether t need not be seen in a run (its limits say
// "?"): a chain of start-up code a sample catches now and then.
func (t Truth) Optional() bool { return slices.Contains(t.Limits, "?") }

// ParseTruth returns the true chains of prog from a table written as
// KernelTruth is, in their order: those of a static program (see
// ParseTruthFor).
func ParseTruth(table, prog string) ([]Truth, error) { return ParseTruthFor(table, prog, false) }

// ParseTruthFor returns the true chains of prog, dynamically linked or
// not, from a table written as KernelTruth is, in their order: the lines
// of prog, and those of "prog:dynamic" or "prog:static".
func ParseTruthFor(table, prog string, dynamic bool) ([]Truth, error) {
	kind := prog + ":static"
	if dynamic {
		kind = prog + ":dynamic"
	}
	var ts []Truth
	for _, l := range strings.Split(table, "\n") {
		f := strings.Fields(l)
		if len(f) == 0 || f[0] != prog && f[0] != kind {
			continue
		}
		var t Truth
		lim := false
		for _, w := range f[1:] {
			switch {
			case w == ";":
				lim = true
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

// Classify compares the chain ips (innermost first) with the true chains
// truth, resolved through st. Of the true chains whose innermost frame
// the chain's is, the one that agrees with it over the most frames (the
// first of those) decides: frames are compared in turn up to the first that
// differs (Wrong), a true frame "@OBJ+" taking every frame in a row (at
// least one) that lies in the object OBJ, and a frame past the innermost
// being its true frame also when it is that function's end (the return
// address of a call that ends the function); a chain that ends with the
// true one is Equal, a longer one Wrong; a shorter one is Limit if its
// last frame is one of the true chain's limits and Wrong otherwise. When
// a frame at its function's end is one of the true chain's AtEnd, a chain
// that is not Equal is Limit (the kernel unwound the caller by the next
// function's rule). An empty chain is Wrong; a chain whose innermost
// frame is in none of the true chains' is Other.
func Classify(st *Symtab, truth []Truth, ips []uint64) Verdict {
	if len(ips) == 0 {
		return Verdict{Class: Wrong, Why: "empty chain", Truth: -1}
	}
	n := len(ips)
	// The true chain with the chain's innermost frame that agrees with
	// it longest (the first of those): a stub or a library function may
	// be called from more than one place. i counts the chain's frames
	// that agree, j the true chain's.
	ti, i, j, atEnd := -1, 0, 0, ""
	for k, t := range truth {
		if !st.match(ips[0], strings.TrimSuffix(t.Frames[0], "^")) {
			continue
		}
		ci, cj, ce := agree(st, t, ips)
		if ti < 0 || ci > i {
			ti, i, j, atEnd = k, ci, cj, ce
		}
	}
	if ti < 0 {
		return Verdict{Class: Other, Why: "innermost frame " + st.Name(ips[0]), Truth: -1}
	}
	t := truth[ti]
	if j == 1 && n > 1 && strings.HasSuffix(t.Frames[0], "^") && st.find(ips[1]) != nil && !inTruth(st, truth, ips[1]) {
		return Verdict{Class: Other, Why: "shared code called by " + st.Name(ips[1]), Truth: -1}
	}
	v := Verdict{Truth: ti}
	if m := slices.IndexFunc(t.Frames, isMain); m >= 0 && j > m {
		v.ThroughMain = true
	}
	if atEnd != "" && (i < n || j < len(t.Frames)) {
		v.Class, v.Why = Limit, "return address at "+atEnd+"'s end (limit 4), then "+rest(st, ips[i:])
		return v
	}
	last := t.Frames[j-1]
	switch {
	case slices.Contains(t.Limits, last+"+") && i < n:
		v.Class, v.Why = Limit, fmt.Sprintf("past %s (%d frames after it not judged)", last, n-i)
	case i < n && j < len(t.Frames) && signed(ips[i]) && st.match(stripPAC(ips[i]), t.Frames[j]):
		v.Class, v.Why = Limit, fmt.Sprintf("frame %d is a PAC-signed return address (%x, into %s)", i+1, ips[i], st.Name(stripPAC(ips[i])))
	case i < n && j < len(t.Frames):
		v.Class, v.Why = Wrong, fmt.Sprintf("frame %d is %s, want %s", i+1, st.Name(ips[i]), t.Frames[j])
	case i == n && j == len(t.Frames):
		v.Class = Equal
	case i < n:
		v.Class, v.Why = Wrong, fmt.Sprintf("%d frames after %s", n-i, t.Frames[len(t.Frames)-1])
	case slices.Contains(t.Limits, last) || slices.Contains(t.Limits, last+"+"):
		v.Class, v.Why = Limit, "stops at "+last
	default:
		v.Class, v.Why = Wrong, fmt.Sprintf("stops after %s (frame %d of %d)", last, j, len(t.Frames))
	}
	return v
}

// agree compares the chain ips with the true chain t, whose innermost
// frame the chain's is, up to the first frame that differs: it returns how
// many of the chain's frames agree and how many of t's ("@OBJ+" takes
// every frame in a row that lies in OBJ; a frame at the end of its true
// function agrees), and the first of t's AtEnd the chain passed at its
// function's end, or "".
func agree(st *Symtab, t Truth, ips []uint64) (i, j int, atEnd string) {
	i, j = 1, 1
	for i < len(ips) && j < len(t.Frames) {
		w := t.Frames[j]
		switch {
		case st.match(ips[i], w):
		case st.matchEnd(ips[i], w):
			if atEnd == "" && slices.Contains(t.AtEnd, w) {
				atEnd = w
			}
		default:
			return i, j, atEnd
		}
		i++
		if isObjectRun(w) {
			for i < len(ips) && st.match(ips[i], w) {
				i++
			}
		}
		j++
	}
	return i, j, atEnd
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

// isObjectRun reports whether a true chain's frame is "@OBJ+": one or
// more frames in the object OBJ.
func isObjectRun(frame string) bool {
	return strings.HasPrefix(frame, "@") && strings.HasSuffix(frame, "+")
}

// inTruth reports whether ip is in a frame some true chain names.
func inTruth(st *Symtab, truth []Truth, ip uint64) bool {
	for _, t := range truth {
		for _, f := range t.Frames {
			if st.match(ip, strings.TrimSuffix(f, "^")) {
				return true
			}
		}
	}
	return false
}

// userVABits is the width of the user addresses of the harness's guests
// (48-bit virtual addresses, x86-64 and AArch64 alike).
const userVABits = 48

// signed reports whether ip has bits above the user address space set: on
// AArch64, a return address signed with pointer authentication (PAC),
// read from the stack as the function saved it, which the kernel's
// walk does not strip (the series has no PAC support).
func signed(ip uint64) bool { return ip>>userVABits != 0 }

// stripPAC is ip without the bits above the user address space.
func stripPAC(ip uint64) uint64 { return ip & (1<<userVABits - 1) }
