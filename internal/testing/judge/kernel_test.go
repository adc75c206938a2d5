package judge

import (
	"debug/elf"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// stackAddr stands for a frame an unwinder read from the wrong slot: an
// address on the stack, in no function.
const stackAddr = 0x7ffd12345678

func truthOf(t *testing.T, prog string) []Truth {
	t.Helper()
	ts, err := ParseTruth(KernelTruth, prog)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// The true chains of each program, as the harness's table had them.
func TestParseTruth(t *testing.T) {
	ts := truthOf(t, "drap")
	if len(ts) != 2 || strings.Join(ts[0].Frames, " ") != "leaf d3 drapfn d2 d1 main __libc_start_call_main __libc_start_main _start" ||
		!slices.Equal(ts[0].Limits, []string{"drapfn"}) || len(ts[1].Limits) != 0 || ts[1].Frames[0] != "drapfn" {
		t.Errorf("drap: %+v", ts)
	}
	if ts := truthOf(t, "plt"); len(ts) != 6 || ts[1].Frames[0] != "PLT" || ts[4].Frames[0] != "__strcpy_*^" ||
		ts[5].Frames[0] != "PLT" || !ts[5].Optional() || ts[1].Optional() {
		t.Errorf("plt: %+v", ts)
	}
	if ts := truthOf(t, "signal"); len(ts) != 2 || !slices.Equal(ts[1].Limits, []string{"__restore_rt"}) {
		t.Errorf("signal: %+v", ts)
	}
	if ts := truthOf(t, "noreturn"); len(ts) != 2 || len(ts[0].AtEnd) != 0 || !slices.Equal(ts[1].AtEnd, []string{"next_caller"}) ||
		len(ts[1].Limits) != 0 || ts[1].Frames[1] != "next_caller" {
		t.Errorf("noreturn: %+v", ts)
	}
	if _, err := ParseTruth(KernelTruth, "nosuch"); err == nil {
		t.Error("a program without true chains has some")
	}
}

// classifyCase is one chain derived from a real one and its verdict.
type classifyCase struct {
	what string
	ips  []uint64
	want Verdict
}

func with(ips []uint64, i int, v uint64) []uint64 {
	c := slices.Clone(ips)
	c[i] = v
	return c
}

// realCases are the chains of prog's variant built in dir, as gdb finds
// them, and chains made from them as the kernel's walks are seen to end:
// cut short (at a known limit or not), one frame too many, a frame from
// the wrong stack slot, from a caller's frame on.
func realCases(t *testing.T, prog string) []classifyCase {
	chains := realChains(t, prog)
	one := func(tag string) []uint64 {
		if len(chains[tag]) == 0 {
			t.Fatalf("%s: gdb gave no %s chain", prog, tag)
		}
		return chains[tag][0]
	}
	var cs []classifyCase
	switch strings.Split(filepath.Base(prog), ".")[0] {
	case "chain":
		leaf := one("leaf")
		cs = []classifyCase{
			{"true", leaf, Verdict{Class: Equal, ThroughMain: true}},
			{"to c5", leaf[:5], Verdict{Class: Wrong, Why: "stops after c5 (frame 5 of 13)"}},
			{"to main", leaf[:10], Verdict{Class: Wrong, Why: "stops after main (frame 10 of 13)", ThroughMain: true}},
			{"one more", append(slices.Clone(leaf), stackAddr), Verdict{Class: Wrong, Why: "1 frames after _start", ThroughMain: true}},
			{"c6 wrong", with(leaf, 3, stackAddr), Verdict{Class: Wrong, Why: "frame 4 is ?7ffd12345678, want c6"}},
			{"c2 is c3", with(leaf, 7, leaf[6]), Verdict{Class: Wrong, Why: "frame 8 is c3, want c2"}},
			{"leaf alone", leaf[:1], Verdict{Class: Wrong, Why: "stops after leaf (frame 1 of 13)"}},
			{"from c8", leaf[1:], Verdict{Class: Other, Why: "innermost frame c8", Truth: -1}},
			{"from nowhere", []uint64{stackAddr, leaf[1]}, Verdict{Class: Other, Why: "innermost frame ?7ffd12345678", Truth: -1}},
		}
	case "drap":
		leaf, drapfn := one("leaf"), one("drapfn")
		cs = []classifyCase{
			{"drapfn true", drapfn, Verdict{Class: Equal, Truth: 1, ThroughMain: true}},
			{"leaf true", leaf, Verdict{Class: Equal, ThroughMain: true}},
			{"leaf to drapfn", leaf[:3], Verdict{Class: Limit, Why: "stops at drapfn"}},
			{"leaf to d3", leaf[:2], Verdict{Class: Wrong, Why: "stops after d3 (frame 2 of 9)"}},
			{"leaf, drapfn wrong", with(leaf, 3, stackAddr), Verdict{Class: Wrong, Why: "frame 4 is ?7ffd12345678, want d2"}},
			{"drapfn to d1", drapfn[:3], Verdict{Class: Wrong, Why: "stops after d1 (frame 3 of 7)", Truth: 1}},
			{"leaf from drapfn", leaf[2:], Verdict{Class: Equal, Truth: 1, ThroughMain: true}},
			{"leaf from d3", leaf[1:], Verdict{Class: Other, Why: "innermost frame d3", Truth: -1}},
		}
	case "signal":
		s3, hleaf := one("s3"), one("hleaf")
		cs = []classifyCase{
			{"s3 true", s3, Verdict{Class: Equal, ThroughMain: true}},
			{"hleaf true", hleaf, Verdict{Class: Equal, Truth: 1, ThroughMain: true}},
			{"hleaf to __restore_rt", hleaf[:4], Verdict{Class: Limit, Why: "stops at __restore_rt", Truth: 1}},
			{"hleaf, __restore_rt, a stack address", append(slices.Clone(hleaf[:4]), stackAddr), Verdict{Class: Wrong, Why: "frame 5 is ?7ffd12345678, want __kill", Truth: 1}},
			{"hleaf to handler", hleaf[:3], Verdict{Class: Wrong, Why: "stops after handler (frame 3 of 12)", Truth: 1}},
			{"from __kill", hleaf[4:], Verdict{Class: Other, Why: "innermost frame __kill", Truth: -1}},
		}
	case "noreturn":
		// gdb's chains have the callers' return addresses at
		// pad_caller's and next_caller's ends; the kernel's walks end
		// after pad_caller's (GNU: no FDE there, the frame pointer) or
		// go on from next_caller's with after_next's rule.
		pad, next := one("spin_pad"), one("spin_next")
		cs = []classifyCase{
			{"spin_pad true", pad, Verdict{Class: Equal, ThroughMain: true}},
			{"spin_pad to pad_caller's end", pad[:2], Verdict{Class: Wrong, Why: "stops after pad_caller (frame 2 of 7)"}},
			{"spin_pad, pad_caller's end, a stack address", append(slices.Clone(pad[:2]), stackAddr), Verdict{Class: Wrong, Why: "frame 3 is ?7ffd12345678, want pa1"}},
			{"spin_pad, pad_caller's end less one", with(pad, 1, pad[1]-1), Verdict{Class: Equal, ThroughMain: true}},
			{"spin_pad, pad_caller's end plus one", with(pad, 1, pad[1]+1), Verdict{Class: Wrong, Why: fmt.Sprintf("frame 2 is ?%x, want pad_caller", pad[1]+1)}},
			{"spin_next true", next, Verdict{Class: Equal, Truth: 1, ThroughMain: true}},
			{"spin_next, next_caller's end, a stack address", append(slices.Clone(next[:2]), stackAddr), Verdict{Class: Limit, Why: "return address at next_caller's end (limit 4), then ?7ffd12345678", Truth: 1}},
			{"spin_next to next_caller's end", next[:2], Verdict{Class: Limit, Why: "return address at next_caller's end (limit 4), then nothing", Truth: 1}},
			{"spin_next, next_caller's end, na1, a stack address", append(slices.Clone(next[:3]), stackAddr), Verdict{Class: Limit, Why: "return address at next_caller's end (limit 4), then ?7ffd12345678", Truth: 1}},
			{"spin_next, in after_next", append(with(next[:2], 1, next[1]+1), stackAddr), Verdict{Class: Wrong, Why: "frame 2 is after_next, want next_caller", Truth: 1}},
			{"spin_next alone", next[:1], Verdict{Class: Wrong, Why: "stops after spin_next (frame 1 of 7)", Truth: 1}},
			{"from pad_caller's end", pad[1:], Verdict{Class: Other, Why: "innermost frame " + fmt.Sprintf("?%x", pad[1]), Truth: -1}},
		}
	case "goprog":
		leaf := one("leaf")
		cs = []classifyCase{
			{"true", leaf, Verdict{Class: Equal, ThroughMain: true}},
			{"to main.main", leaf[:5], Verdict{Class: Wrong, Why: "stops after main.main (frame 5 of 7)", ThroughMain: true}},
			{"to runtime.main", leaf[:6], Verdict{Class: Wrong, Why: "stops after runtime.main (frame 6 of 7)", ThroughMain: true}},
			// The frame-pointer walk from the leaf, which saves none:
			// its caller is skipped.
			{"c skipped", slices.Delete(slices.Clone(leaf), 1, 2), Verdict{Class: Wrong, Why: "frame 2 is main.b, want main.c"}},
			{"one more", append(slices.Clone(leaf), stackAddr), Verdict{Class: Wrong, Why: "1 frames after runtime.goexit", ThroughMain: true}},
			{"from main.c", leaf[1:], Verdict{Class: Other, Why: "innermost frame main.c", Truth: -1}},
		}
	case "plt":
		p2 := one("p2")
		cs = []classifyCase{
			{"p2 true", p2, Verdict{Class: Equal, ThroughMain: true}},
			{"p2 to main", p2[:3], Verdict{Class: Wrong, Why: "stops after main (frame 3 of 6)", ThroughMain: true}},
		}
		for i, c := range chains["PLT"] {
			cs = append(cs, classifyCase{fmt.Sprintf("PLT %d", i), c, Verdict{Class: Equal, Truth: 1, ThroughMain: true}},
				classifyCase{fmt.Sprintf("PLT %d, p2 wrong", i), with(c, 1, stackAddr), Verdict{Class: Wrong, Why: "frame 2 is ?7ffd12345678, want p2", Truth: 1}})
		}
		for i, c := range chains["impl"] {
			// strlen's, strnlen's, strcpy's implementation, whichever
			// this CPU gets.
			cs = append(cs, classifyCase{fmt.Sprintf("impl %d", i), c, Verdict{Class: Equal, Truth: 2 + i, ThroughMain: true}},
				classifyCase{fmt.Sprintf("impl %d to p1", i), c[:3], Verdict{Class: Wrong, Why: "stops after p1 (frame 3 of 7)", Truth: 2 + i}})
		}
		// A stub called from glibc's start-up code: the PLT chain's stub,
		// then __libc_setup_tls's return address, as the kernel walked it
		// on 2026-12-07 (__libc_setup_tls calls memcpy through .plt). Cut,
		// it is judged against the true chain that agrees with it longest.
		if c := chains["PLT"]; len(c) > 0 {
			f, err := elf.Open(prog)
			if err != nil {
				t.Fatal(err)
			}
			syms, _ := f.Symbols()
			f.Close()
			addr := map[string]uint64{}
			for _, s := range syms {
				addr[s.Name] = s.Value + 1
			}
			tls := []uint64{c[0][0], addr["__libc_setup_tls"], addr["__libc_start_main"], addr["_start"]}
			cs = append(cs, classifyCase{"PLT from __libc_setup_tls", tls, Verdict{Class: Equal, Truth: 5}},
				classifyCase{"PLT from __libc_setup_tls, cut", tls[:2], Verdict{Class: Wrong, Why: "stops after __libc_setup_tls (frame 2 of 4)", Truth: 5}})
			// A string function called from glibc's start-up code, as
			// the kernel walked __strlen_sse2 from getenv on 2026-12-07:
			// shared code, outside the spinning functions; from a
			// frame of a true chain it is still judged.
			if impl := chains["impl"]; len(impl) > 0 {
				env := []uint64{impl[0][0], addr["getenv"], addr["_dl_non_dynamic_init"], addr["__libc_init_first"], addr["__libc_start_main"], addr["_start"]}
				cs = append(cs, classifyCase{"impl from getenv", env, Verdict{Class: Other, Why: "shared code called by getenv", Truth: -1}},
					classifyCase{"impl from __libc_start_main", []uint64{impl[0][0], addr["__libc_start_main"], addr["_start"]}, Verdict{Class: Wrong, Why: "frame 2 is __libc_start_main, want p2", Truth: 2}})
			}
		}
		if len(chains["PLT"]) != 3 || len(chains["impl"]) != 3 {
			t.Errorf("%s: %d chains in .plt, %d in what it calls, want 3 of each", prog, len(chains["PLT"]), len(chains["impl"]))
		}
	}
	return cs
}

// Chains gdb finds in the four programs (each variant the harness runs),
// and chains made from them, get the verdicts the harness's rules give:
// equal, at a known limit (drapfn as a caller, __restore_rt), wrong (cut
// short elsewhere, too long, a wrong frame), other (innermost frame in no
// true chain), through main or not.
func TestClassifyRealChains(t *testing.T) {
	dir := programs(t)
	for _, p := range kernelProgs {
		truth := truthOf(t, p)
		for _, v := range variants() {
			prog := filepath.Join(dir, p+"."+v)
			st, err := LoadSymtab(prog)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range realCases(t, prog) {
				if got := Classify(st, truth, c.ips); got != c.want {
					t.Errorf("%s.%s, %s: %+v, want %+v", p, v, c.what, got, c.want)
				}
			}
			if got := Classify(st, truth, nil); got != (Verdict{Class: Wrong, Why: "empty chain", Truth: -1}) {
				t.Errorf("%s.%s, empty chain: %+v", p, v, got)
			}
		}
	}
	truth := truthOf(t, "goprog")
	for _, v := range goVariants {
		prog := filepath.Join(dir, "goprog."+v)
		st, err := LoadSymtab(prog)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range realCases(t, prog) {
			if got := Classify(st, truth, c.ips); got != c.want {
				t.Errorf("goprog.%s, %s: %+v, want %+v", v, c.what, got, c.want)
			}
		}
	}
}

// scriptRuns are the labels of the runs scripts/kernel-acceptance.sh
// makes, read from its "runs" list.
func scriptRuns(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "scripts", "kernel-acceptance.sh"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "cat >\"$w/runs\" <<'EOF'\n")
	list, _, ok2 := strings.Cut(rest, "\nEOF\n")
	if !ok || !ok2 {
		t.Fatal("no runs list in scripts/kernel-acceptance.sh")
	}
	var labels []string
	for _, l := range strings.Split(list, "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			labels = append(labels, f[0])
		}
	}
	return labels
}

func chainLine(kind string, count int, ips []uint64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %d %d", kind, count, len(ips))
	for _, ip := range ips {
		fmt.Fprintf(&b, " %x", ip)
	}
	return b.String()
}

// kernelRecords writes into dir what scripts/kernel-acceptance.sh leaves
// there after a run in which the kernel behaved as docs/acceptance.md
// says, with the chains gdb finds in the programs built here: our outputs
// walked right through (drap's leaf and signal's handler to their limits;
// our default output of signal adding a stack address after
// __restore_rt), GNU's to main and a frame more, the programs without
// .sframe one frame deep, the damaged copies removed or refused by the
// kernel. Each run also has chains outside the spinning code (in _start)
// and ordinary samples. bad, when not empty, is a label whose deferred
// chains are all cut short after their second frame.
func kernelRecords(t *testing.T, dir, bad string) {
	t.Helper()
	progs := programs(t)
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	labels := scriptRuns(t)
	var runs, data, verify strings.Builder
	data.WriteString("boot 7.3.4 #1 SMP PREEMPT_DYNAMIC\r\ndyndbg enabled 12 of 12 kernel/unwind callsites\r\nB unwind_user: deferred unwinding enabled\r\n")
	chains := map[string]map[string][][]uint64{}
	for i, label := range labels {
		prog, variant, _ := strings.Cut(label, ".")
		if prog == "dyn" {
			dynRecords(t, progs, dir, label, i, &data)
			fmt.Fprintf(&runs, "%s %d %d\n", label, 1000, 10)
			if v := strings.TrimSuffix(variant, "+pre"); v != "plain" {
				fmt.Fprintf(&verify, "verify %s pass dyn: 9 functions checked\n", label)
			}
			continue
		}
		src := filepath.Join(progs, label)
		if strings.HasPrefix(variant, "damaged-") {
			src = filepath.Join(progs, "chain.ours")
		}
		if variant == "gnu" && !gnuBuilt {
			src = filepath.Join(progs, prog+".plain")
		}
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "bin", label), b, 0o755); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&runs, "%s %d\n", label, 1000)
		if chains[src] == nil {
			chains[src] = realChains(t, src)
		}
		c := chains[src]
		st, err := LoadSymtab(src)
		if err != nil {
			t.Fatal(err)
		}
		f, err := elf.Open(src)
		if err != nil {
			t.Fatal(err)
		}
		start := f.Entry // _start; Go's _rt0_amd64_linux
		f.Close()
		fmt.Fprintf(&data, "run %s\r\n", label)
		n := 0
		tags := slices.Sorted(maps.Keys(c))
		for _, tag := range tags {
			for j, ips := range c[tag] {
				n++
				count := 40 + 7*n + i
				switch {
				case label == bad:
					ips = ips[:2]
				case variant == "plain" || strings.HasPrefix(variant, "damaged-"):
					ips = ips[:1]
				case prog == "noreturn" && variant == "gnu" && tag == "spin_pad":
					// pad_caller's return address in padding no
					// FDE covers: the frame pointer, which ends it
					ips = ips[:2]
				case prog == "noreturn" && tag == "spin_next":
					// next_caller's frame unwound by after_next's
					// rule: a word of its locals
					ips = append(slices.Clone(ips[:2]), stackAddr)
				case variant == "gnu":
					m := slices.IndexFunc(ips, func(ip uint64) bool { return st.Name(ip) == "main" })
					ips = append(slices.Clone(ips[:m+1]), stackAddr)
				case tag == "hleaf", prog == "drap" && tag == "leaf":
					ips = ips[:tagLimit(tag)]
				}
				data.WriteString(chainLine("D", count, ips) + "\r\n")
				if j == 0 {
					data.WriteString(chainLine("S", count/2, ips[:1]) + "\r\n")
				}
			}
		}
		data.WriteString(chainLine("D", 3, []uint64{start}) + "\r\n")
		data.WriteString(chainLine("S", 5, []uint64{start + 1, stackAddr}) + "\r\n")
		fmt.Fprintf(&data, "stat exit 0\r\nstat deferred-samples %d\r\nstat deferred-marks %d\r\nstat deferred-lost 0\r\nend %s\r\n", 300+i, 290+i, label)
		switch variant {
		case "damaged-lookup":
			data.WriteString("K [    3.1] sframe: removing bad .sframe section\r\n")
		case "damaged-validate":
			data.WriteString("K [    4.2] sframe: FDE 46: safe_read_fre(0) failed\r\n")
		}
		if label == "drap.ours" {
			data.WriteString("K [    4.9] unwind_user: a line about unwinding only\r\n")
		}
		data.WriteString("K [    5.0] random: crng init done\r\n")
		status := "pass"
		if strings.HasPrefix(variant, "damaged-") {
			status = "fail"
		}
		fmt.Fprintf(&verify, "verify %s %s chain: 17 functions checked\n", label, status)
		if prog == "noreturn" && variant != "plain" {
			js := "[]" // no GNU build: no notes
			if variant != "gnu" || gnuBuilt {
				js = verifyJSON(t, progs, src)
			}
			fmt.Fprintf(&verify, "limits %s %s\n", label, js)
		}
	}
	data.WriteString("all done\r\n")
	for name, s := range map[string]string{"runs": runs.String(), "verify.log": verify.String(),
		"data.txt": strings.ReplaceAll(data.String(), "\r", "")} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// verifyJSON is `cfi2sframe verify --for kernel --json` on prog (built in
// progs) on one line, as the script writes it into verify.log.
func verifyJSON(t *testing.T, progs, prog string) string {
	t.Helper()
	out, _ := exec.Command(filepath.Join(progs, "cfi2sframe"), "verify", "--for", "kernel", "--json", prog).Output()
	if len(out) == 0 {
		t.Fatalf("verify --for kernel --json %s: no output", prog)
	}
	return strings.ReplaceAll(string(out), "\n", "")
}

// The load addresses of dyn's objects in the records kernelRecords writes.
const (
	dynProgBase = 0x555555554000
	dynLibBase  = 0x7f1000000000
	dynLibcBase = 0x7f2000000000
)

// dynObject is one object of dyn's process as dynRecords lays it out.
type dynObject struct {
	guest, host string // its path in the guest, the file it is
	base        uint64
}

// dynRecords writes the records of the dyn run label (dyn.VARIANT, and
// dyn.VARIANT+pre with sfreg.so preloaded) into dir and data: the program
// (dyn.plain built here), libchain.so and the host's libc.so.6 in the
// guest's root as the script lays it out, their executable mappings (M
// lines) at fixed load addresses, and chains made from their symbols
// (functions by address, libc.so.6's by its dynamic symbols), as the
// kernel walks them: right through with the preload and our .sframe;
// wrong after the first library frame without it (the frame pointer);
// GNU's through main (libchain.so's frames registered, libc.so.6 without
// .sframe) or not even that; plain's one frame.
func dynRecords(t *testing.T, progs, dir, label string, i int, data *strings.Builder) {
	t.Helper()
	variant := strings.TrimSuffix(strings.TrimPrefix(label, "dyn."), "+pre")
	pre := strings.HasSuffix(label, "+pre")
	libc, err := filepath.EvalSymlinks(dynHostLibc(t))
	if err != nil {
		t.Fatal(err)
	}
	objs := []dynObject{
		{"/tests/" + label, filepath.Join(progs, "dyn.plain"), dynProgBase},
		{"/lib/v/" + variant + "/libchain.so", filepath.Join(progs, "dynlib", "libchain.so"), dynLibBase},
		{"/lib/v/" + variant + "/libc.so.6", libc, dynLibcBase},
	}
	addr := map[string]uint64{}
	fmt.Fprintf(data, "run %s\r\n", label)
	var mlines strings.Builder
	for k, o := range objs {
		b, err := os.ReadFile(o.host)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, "root", filepath.FromSlash(o.guest))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o755); err != nil {
			t.Fatal(err)
		}
		if k == 0 {
			if err := os.WriteFile(filepath.Join(dir, "bin", label), b, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		f, err := elf.Open(o.host)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 {
				lo, hi := o.base+p.Vaddr&^0xfff, o.base+(p.Vaddr+p.Memsz+0xfff)&^0xfff
				fmt.Fprintf(&mlines, "M %x %x %x %s\r\n", lo, hi, p.Off&^0xfff, o.guest)
			}
		}
		syms, _ := f.Symbols()
		if k == 2 {
			syms, _ = f.DynamicSymbols()
		}
		for _, s := range syms {
			if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Value != 0 {
				if _, ok := addr[s.Name]; !ok {
					addr[s.Name] = o.base + s.Value + 1 // a return address inside
				}
			}
		}
		f.Close()
	}
	at := func(names ...string) []uint64 {
		var ips []uint64
		for _, n := range names {
			a, ok := addr[n]
			if !ok {
				t.Fatalf("dyn: no function %s", n)
			}
			ips = append(ips, a)
		}
		return ips
	}
	// main's callers in libc.so.6 (__libc_start_call_main has no dynamic
	// symbol: any address in libc.so.6 stands for it), then _start.
	start := at("__libc_start_main", "__libc_start_main", "_start")
	leaf := append(at("lib_leaf", "lib_l2", "p2", "lib_l1", "p1", "main"), start...)
	cmp := append(at("lib_cmp", "qsort", "qsort", "qsort", "lib_sort", "p3", "main"), start...)
	for j, ips := range [][]uint64{leaf, cmp} {
		count := 40 + 7*j + i
		switch {
		case variant == "plain":
			ips = ips[:1]
		case variant == "gnu" && j == 0: // libc.so.6 has no .sframe
			ips = append(slices.Clone(ips[:6]), stackAddr)
		case variant == "gnu", !pre: // the first unregistered frame
			ips = []uint64{ips[0], stackAddr}
		}
		data.WriteString(chainLine("D", count, ips) + "\r\n")
		data.WriteString(chainLine("S", count/2, ips[:1]) + "\r\n")
	}
	data.WriteString(chainLine("D", 3, at("_start")) + "\r\n")
	data.WriteString(mlines.String())
	fmt.Fprintf(data, "stat exit 0\r\nstat deferred-samples %d\r\nstat deferred-marks %d\r\nstat deferred-lost 0\r\nend %s\r\n", 300+i, 290+i, label)
	if pre {
		data.WriteString("R sfreg: (program): registered at exec\r\n")
		if variant != "plain" {
			data.WriteString("R sfreg: /lib/v/" + variant + "/libchain.so: sframe 0x7f1000003000+0x1a0 text 0x7f1000001000+0x200: registered\r\n")
		}
		if variant == "ours" || variant == "for-kernel" {
			data.WriteString("R sfreg: /lib/v/" + variant + "/libc.so.6: sframe 0x7f20001e28d0+0x2cdfd text 0x7f2000026000+0x1550fc: registered\r\n")
		}
	}
	data.WriteString("K [    6.0] random: crng init done\r\n")
}

// dynHostLibc is the libc.so.6 gcc links dynamic programs with.
func dynHostLibc(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("gcc", "-print-file-name=libc.so.6").Output()
	if err != nil {
		t.Fatal(err)
	}
	p := strings.TrimSpace(string(out))
	if _, err := os.Stat(p); err != nil || !filepath.IsAbs(p) {
		skipf(t, "gcc finds no libc.so.6 (%q)", p)
	}
	return p
}

// tagLimit is the length of a chain from the innermost function tag that
// ends at its known limit.
func tagLimit(tag string) int {
	if tag == "hleaf" {
		return 4 // hleaf h1 handler __restore_rt
	}
	return 3 // leaf d3 drapfn
}

// The report and checks of a run whose kernel behaved as
// docs/acceptance.md says (the chains are gdb's; see kernelRecords): every
// check ok, the info ones reported; the figures and the report lines as
// the harness's awk printed them.
func TestKernel(t *testing.T) {
	dir := t.TempDir()
	kernelRecords(t, dir, "")
	report, checks, err := Kernel(dir)
	if err != nil {
		t.Fatal(err)
	}
	var info []string
	for _, c := range checks {
		switch {
		case c.Status == "info":
			info = append(info, c.Name)
		case c.Status != "ok":
			t.Errorf("%s", c)
		}
	}
	if len(checks) != 35 || strings.Join(info, ", ") != "anchor chain.gnu, anchor drap.gnu, anchor signal.gnu, anchor plt.gnu, anchor dyn.gnu+pre, anchor dyn.gnu, anchor noreturn.gnu, noreturn noreturn.gnu" {
		t.Errorf("%d checks, info: %v", len(checks), info)
	}
	for _, want := range []string{
		"\nkernel: 7.3.4 #1 SMP PREEMPT_DYNAMIC\ndynamic debug: enabled 12 of 12 kernel/unwind callsites\nboot log: unwind_user: deferred unwinding enabled\n\nverify --for kernel:\n  verify chain.ours pass chain: 17 functions checked\n",
		`drap.ours: exit 0; 116 deferred chains (296 samples marked deferred, 0 lost): in the spinning functions 113, equal to the true chain 53 (46.9%), stopped at a known limit 60 (53.1%), wrong 0; right through main 53 (46.9%); outside the spinning functions 3
  innermost leaf: 60 chains, 0 equal, 60 at a known limit, 0 wrong
  innermost drapfn: 53 chains, 53 equal, 0 at a known limit, 0 wrong
  ordinary samples (frame-pointer walk at the sample): 61, in the spinning functions 56, equal to the true chain 0 (0.0%)
        60 x limit  stops at drapfn: leaf d3 drapfn
         3 x other  innermost frame _start: _start
  kernel log: [    4.9] unwind_user: a line about unwinding only
drap.for-kernel: `,
		`signal.ours: exit 0; 124 deferred chains (300 samples marked deferred, 0 lost): in the spinning functions 121, equal to the true chain 64 (52.9%), stopped at a known limit 57 (47.1%), wrong 0; right through main 64 (52.9%); outside the spinning functions 3
  innermost s3: 64 chains, 64 equal, 0 at a known limit, 0 wrong
  innermost hleaf: 57 chains, 0 equal, 57 at a known limit, 0 wrong
  ordinary samples (frame-pointer walk at the sample): 65, in the spinning functions 60, equal to the true chain 0 (0.0%)
        57 x limit  stops at __restore_rt: hleaf h1 handler __restore_rt
`, "ok ours drap.ours | 53 of 113 deferred chains (46.9%) equal the true chain, 60 (53.1%) stop at a known limit, 0 wrong; 0 true chains never seen; exit 0; 0 kernel log lines about sframe; verify --for kernel: pass\n",
		"ok ours signal.ours | 64 of 121 deferred chains (52.9%) equal the true chain, 57 (47.1%) stop at a known limit, 0 wrong; 0 true chains never seen; exit 0; 0 kernel log lines about sframe; verify --for kernel: pass\n",
		"ok control chain.damaged-lookup | verify --for kernel: fail; kernel: 1 'removing bad .sframe section'; 0 of 51 chains equal the true chain\n",
		"ok control chain.damaged-validate | verify --for kernel: fail; kernel: 1 validation failures at exec; 0 of 52 chains equal the true chain\n",
		`dyn.ours+pre: exit 0; 130 deferred chains (310 samples marked deferred, 0 lost): in the spinning functions 127, equal to the true chain 127 (100.0%), stopped at a known limit 0 (0.0%), wrong 0; right through main 127 (100.0%); outside the spinning functions 3
  innermost lib_leaf: 60 chains, 60 equal, 0 at a known limit, 0 wrong
  innermost lib_cmp: 67 chains, 67 equal, 0 at a known limit, 0 wrong
`,
		"ok ours dyn.ours+pre | 127 of 127 deferred chains (100.0%) equal the true chain, 0 (0.0%) stop at a known limit, 0 wrong; 0 true chains never seen; exit 0; 0 kernel log lines about sframe; verify --for kernel: pass; registered by sframe_register: libchain.so libc.so.6\n",
		"        64 x wrong  frame 2 is ?7ffd12345678, want lib_l2: lib_leaf ?7ffd12345678\n",
		"ok unregistered dyn.ours | libraries not registered (no sframe_register: the frame-pointer fallback in their frames): 0 of 135 deferred chains equal the true chain, 0 stop at a known limit, 135 wrong; right through main 0; exit 0\n",
		"        62 x wrong  frame 7 is ?7ffd12345678, want @libc.so.6+: lib_leaf lib_l2 p2 lib_l1 p1 main ?7ffd12345678\n",
		`noreturn.ours: exit 0; 160 deferred chains (318 samples marked deferred, 0 lost): in the spinning functions 157, equal to the true chain 82 (52.2%), stopped at a known limit 75 (47.8%), wrong 0; right through main 82 (52.2%); outside the spinning functions 3
  innermost spin_pad: 82 chains, 82 equal, 0 at a known limit, 0 wrong
  innermost spin_next: 75 chains, 0 equal, 75 at a known limit, 0 wrong
`,
		"        75 x limit  return address at next_caller's end (limit 4), then ?7ffd12345678: spin_next after_next ?7ffd12345678\n",
		"ok noreturn noreturn.ours | spin_pad (pad_caller ends with the call, padding follows): 82 chains, 82 equal, 0 at a known limit, 0 wrong; spin_next (next_caller ends with the call, after_next follows): 75 chains, 0 equal, 75 at a known limit (return-at-end), 0 wrong; verify --for kernel noted return-at-end at the end of: next_caller\n",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("the report lacks\n%s\nreport:\n%s", want, report)
			break
		}
	}
}

// runBlock is the lines of data from "run LABEL" to "end LABEL".
func runBlock(t *testing.T, data, label string) string {
	t.Helper()
	i := strings.Index(data, "run "+label+"\n")
	j := strings.Index(data, "end "+label+"\n")
	if i < 0 || j < i {
		t.Fatalf("no run %s", label)
	}
	return data[i : j+len("end "+label+"\n")]
}

// A run of ours whose chains stop short fails its check, saying how, as
// does one verify fails; a program without .sframe whose chains are right
// fails its control; a damaged copy the kernel did not remove fails its
// control. Every other check stays as it was.
func TestKernelFails(t *testing.T) {
	for _, c := range []struct {
		bad, check, text string
		edit             func(t *testing.T, data, verify string) (string, string)
	}{
		{"signal.for-kernel", "ours signal.for-kernel", "0 of 123 deferred chains (0.0%) equal the true chain, 0 (0.0%) stop at a known limit, 123 wrong; 2 true chains never seen; exit 0; 0 kernel log lines about sframe; verify --for kernel: pass", nil},
		{"", "ours chain.ours", "47 of 47 deferred chains (100.0%) equal the true chain, 0 (0.0%) stop at a known limit, 0 wrong; 0 true chains never seen; exit 0; 0 kernel log lines about sframe; verify --for kernel: fail",
			func(t *testing.T, data, verify string) (string, string) {
				return data, strings.Replace(verify, "verify chain.ours pass", "verify chain.ours fail", 1)
			}},
		{"", "control chain.plain", "no .sframe: 47 of 47 deferred chains equal the true chain, 47 right through main (the frame-pointer fallback on -fomit-frame-pointer code); exit 0",
			func(t *testing.T, data, verify string) (string, string) {
				ours := strings.ReplaceAll(runBlock(t, data, "chain.ours"), "chain.ours", "chain.plain")
				return strings.Replace(data, runBlock(t, data, "chain.plain"), ours, 1), verify
			}},
		{"", "ours dyn.ours+pre", "127 of 127 deferred chains (100.0%) equal the true chain, 0 (0.0%) stop at a known limit, 0 wrong; 0 true chains never seen; exit 0; 0 kernel log lines about sframe; verify --for kernel: pass; registered by sframe_register: libchain.so",
			func(t *testing.T, data, verify string) (string, string) {
				// libc.so.6's registration failed, though the
				// chains came out right
				return strings.Replace(data, "/lib/v/ours/libc.so.6: sframe 0x7f20001e28d0+0x2cdfd text 0x7f2000026000+0x1550fc: registered",
					"/lib/v/ours/libc.so.6: sframe 0x7f20001e28d0+0x2cdfd text 0x7f2000026000+0x1550fc: error: Function not implemented (errno 38, syscall 473)", 1), verify
			}},
		{"", "unregistered dyn.for-kernel", "libraries not registered (no sframe_register: the frame-pointer fallback in their frames): 129 of 129 deferred chains equal the true chain, 0 stop at a known limit, 0 wrong; right through main 129; exit 0",
			func(t *testing.T, data, verify string) (string, string) {
				pre := strings.ReplaceAll(runBlock(t, data, "dyn.for-kernel+pre"), "dyn.for-kernel+pre", "dyn.for-kernel")
				return strings.Replace(data, runBlock(t, data, "dyn.for-kernel"), pre, 1), verify
			}},
		{"", "control chain.damaged-lookup", "verify --for kernel: fail; kernel: 0 'removing bad .sframe section'; 0 of 51 chains equal the true chain",
			func(t *testing.T, data, verify string) (string, string) {
				return strings.Replace(data, "removing bad", "keeping", 1), verify
			}},
	} {
		dir := t.TempDir()
		kernelRecords(t, dir, c.bad)
		if c.edit != nil {
			editRecords(t, dir, c.edit)
		}
		_, checks, err := Kernel(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range checks {
			want := "ok"
			if k.Name == c.check {
				want = "FAIL"
				if k.Text != c.text {
					t.Errorf("%s: %s, want %s", k.Name, k.Text, c.text)
				}
			}
			if k.Status != want && k.Status != "info" {
				t.Errorf("%s failing: %s", c.check, k)
			}
		}
	}
}

// noreturn's checks tie the judge to verify: without verify's note at
// next_caller's end, spin_next's chains that go on from there with
// after_next's rule are wrong, and both checks of the run fail; a
// spin_pad chain that stops at pad_caller's end (GNU's, the frame-pointer
// fallback in the padding) fails them too. Every other check stays ok.
func TestKernelNoreturn(t *testing.T) {
	for _, c := range []struct {
		label string
		edit  func(t *testing.T, data, verify string) (string, string)
		want  []string // the failing checks' texts, "ours" then "noreturn"
	}{
		{"noreturn.ours", func(t *testing.T, data, verify string) (string, string) {
			i := strings.Index(verify, "limits noreturn.ours ")
			j := strings.Index(verify[i:], "\n")
			return data, verify[:i] + "limits noreturn.ours []" + verify[i+j:]
		}, []string{
			"82 of 157 deferred chains (52.2%) equal the true chain, 0 (0.0%) stop at a known limit, 75 wrong; 1 true chains never seen",
			"spin_next (next_caller ends with the call, after_next follows): 75 chains, 0 equal, 0 at a known limit (return-at-end), 75 wrong; verify --for kernel noted return-at-end at the end of: \x00",
		}},
		{"noreturn.for-kernel", func(t *testing.T, data, verify string) (string, string) {
			// GNU's spin_pad chains in place of ours
			b := runBlock(t, data, "noreturn.for-kernel")
			var out []string
			for _, l := range strings.Split(b, "\n") {
				if f := strings.Fields(l); len(f) > 5 && f[0] == "D" && f[2] == "7" {
					l = strings.Join(append([]string{"D", f[1], "2"}, f[3:5]...), " ")
				}
				out = append(out, l)
			}
			return strings.Replace(data, b, strings.Join(out, "\n"), 1), verify
		}, []string{
			"0 of 159 deferred chains (0.0%) equal the true chain, 76 (47.8%) stop at a known limit, 83 wrong; 1 true chains never seen",
			"spin_pad (pad_caller ends with the call, padding follows): 83 chains, 0 equal, 0 at a known limit, 83 wrong;",
		}},
	} {
		dir := t.TempDir()
		kernelRecords(t, dir, "")
		editRecords(t, dir, c.edit)
		_, checks, err := Kernel(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range checks {
			want := "ok"
			for i, name := range []string{"ours " + c.label, "noreturn " + c.label} {
				if k.Name != name {
					continue
				}
				want = "FAIL"
				w, end := strings.CutSuffix(c.want[i], "\x00")
				if !strings.Contains(k.Text, w) || end && !strings.HasSuffix(k.Text, w) {
					t.Errorf("%s: %s, want it to contain %s", k.Name, k.Text, w)
				}
			}
			if k.Status != want && k.Status != "info" {
				t.Errorf("%s edited: %s", c.label, k)
			}
		}
	}
}

// The guest's lines: the kernel log after a run's end is the run's, up to
// the next run; a kernel log line before any run is nobody's; a program's
// own output is skipped; a garbled chain line is an error naming it.
func TestParseGuest(t *testing.T) {
	g, err := ParseGuest(strings.NewReader(`boot 7.3.4 #1
dyndbg enabled 3 of 3 kernel/unwind callsites
B sframe: boot line
K before any run
R nobody's
run a
hello from the program
D 2 2 401650 7ffd12345678
S 1 0
M 555555555000 555555556000 1000 /tests/a
stat exit 0
end a
R sfreg: /lib/x.so: no PT_GNU_SFRAME
K sframe: after a
run b
end b
K after b
B sframe: a late boot line
`))
	if err != nil {
		t.Fatal(err)
	}
	a, b := g.Runs["a"], g.Runs["b"]
	if g.Boot != "7.3.4 #1" || g.Dyndbg != "enabled 3 of 3 kernel/unwind callsites" ||
		strings.Join(g.BootLog, "|") != "sframe: boot line|sframe: a late boot line" ||
		a == nil || b == nil || len(a.Deferred) != 1 || a.Deferred[0].Count != 2 ||
		!slices.Equal(a.Deferred[0].IPs, []uint64{0x401650, stackAddr}) || len(a.Samples) != 1 ||
		len(a.Samples[0].IPs) != 0 || a.Stats["exit"] != "0" ||
		strings.Join(a.KLog, "|") != "sframe: after a" || strings.Join(b.KLog, "|") != "after b" ||
		!slices.Equal(a.Maps, []Mapping{{0x555555555000, 0x555555556000, 0x1000, "/tests/a"}}) ||
		strings.Join(a.Stderr, "|") != "sfreg: /lib/x.so: no PT_GNU_SFRAME" || len(b.Stderr) != 0 {
		t.Errorf("%+v\na %+v\nb %+v", g, a, b)
	}
	for _, bad := range []string{"D 2 3 401650 401651", "D x 1 401650", "S 1 1 40z650", "M 1000 2000 0", "M 2000 1000 0 /a", "M 1000 2000 q /a"} {
		if _, err := ParseGuest(strings.NewReader("run a\n" + bad + "\nend a\n")); err == nil || !strings.HasPrefix(err.Error(), "line 2: ") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// "@OBJ+" in a true chain takes one or more frames in a row in the object
// OBJ, and no fewer: dyn's comparator chain through libc.so.6, as the
// records of kernelRecords lay its process out.
func TestClassifyObjectRun(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	var data strings.Builder
	dynRecords(t, programs(t), dir, "dyn.ours+pre", 0, &data)
	g, err := ParseGuest(strings.NewReader(strings.ReplaceAll(data.String(), "\r", "")))
	if err != nil {
		t.Fatal(err)
	}
	run := g.Runs["dyn.ours+pre"]
	st, _, _, err := runSymtab(dir, "dyn.ours+pre", run.Maps)
	if err != nil {
		t.Fatal(err)
	}
	cmp := run.Deferred[1].IPs // lib_cmp qsort qsort qsort lib_sort p3 main ...
	truth := truthOf(t, "dyn")
	for _, c := range []classifyCase{
		{"true", cmp, Verdict{Class: Equal, Truth: 1, ThroughMain: true}},
		{"one libc frame", slices.Delete(slices.Clone(cmp), 2, 4), Verdict{Class: Equal, Truth: 1, ThroughMain: true}},
		{"no libc frame", slices.Delete(slices.Clone(cmp), 1, 4), Verdict{Class: Wrong, Why: "frame 2 is lib_sort, want @libc.so.6+", Truth: 1}},
		{"into libc only", cmp[:3], Verdict{Class: Wrong, Why: "stops after @libc.so.6+ (frame 2 of 7)", Truth: 1}},
		{"a stack address in libc's run", with(cmp, 2, stackAddr), Verdict{Class: Wrong, Why: "frame 3 is ?7ffd12345678, want lib_sort", Truth: 1}},
	} {
		if got := Classify(st, truth, c.ips); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.what, got, c.want)
		}
	}
	if n := st.Name(cmp[0]); n != "lib_cmp" {
		t.Errorf("lib_cmp is named %q", n)
	}
	if n := st.Name(cmp[5]); n != "p3" {
		t.Errorf("p3 is named %q", n)
	}
}

// editRecords rewrites the records in dir (data.txt and verify.log) with
// edit.
func editRecords(t *testing.T, dir string, edit func(t *testing.T, data, verify string) (string, string)) {
	t.Helper()
	data, err1 := os.ReadFile(filepath.Join(dir, "data.txt"))
	verify, err2 := os.ReadFile(filepath.Join(dir, "verify.log"))
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	d, v := edit(t, string(data), string(verify))
	if os.WriteFile(filepath.Join(dir, "data.txt"), []byte(d), 0o644) != nil || os.WriteFile(filepath.Join(dir, "verify.log"), []byte(v), 0o644) != nil {
		t.Fatal("cannot write the records")
	}
}
