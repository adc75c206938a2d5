// Package tree converts many files and whole directory trees at once, in
// parallel, and says what happened to each file.
//
// Directories are walked recursively relative to open directory
// descriptors, never following a symbolic link (see walk.go); only
// regular files are converted. Each file is converted on its own: a file
// that fails does not stop the others. Files with nothing to do (not ELF,
// no CFI, already SFrame, a machine SFrame does not cover, a signature
// over the content) are never rewritten in place, so they stay
// byte-identical. A converted file keeps everything but its bytes: owner,
// group, every mode bit, extended attributes (capabilities, ACLs, SELinux
// labels), given to the new file before it takes the old one's name; a
// file whose metadata cannot be kept is left as it was. With OutDir the
// result is a copy of the whole tree, as cp -a makes it. Output goes
// through elfwrite.WriteAtomic: a file without a name until it takes its
// place, so that a killed run leaves nothing; when the context is
// cancelled no new file is started and a conversion in flight drops its
// output.
package tree

import (
	"bytes"
	"cmp"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/cfi2sframe/cfi2sframe/convert"
	"github.com/cfi2sframe/cfi2sframe/internal/coverage"
	"github.com/cfi2sframe/cfi2sframe/internal/elfwrite"
	"github.com/cfi2sframe/cfi2sframe/internal/fsmeta"
	"github.com/cfi2sframe/cfi2sframe/internal/mapped"
	"github.com/cfi2sframe/cfi2sframe/internal/relobj"
)

// Outcome is what happened to one file. The string values are stable:
// they appear in --json records.
type Outcome string

const (
	Converted   Outcome = "converted"   // .sframe added
	HasSFrame   Outcome = "has-sframe"  // already has SFrame data (and Force was not set)
	NoCFI       Outcome = "no-cfi"      // no call-frame information (objects without functions included)
	NotELF      Outcome = "not-elf"     // neither an ELF file nor an ar archive
	Unsupported Outcome = "unsupported" // an ELF machine, class or type SFrame or we do not cover
	NoLayout    Outcome = "no-layout"   // no layout the standard tools keep (convert.ErrLayout); left alone
	Signed      Outcome = "signed"      // a signature over the content (IMA/EVM attribute, appended module signature) would no longer match; left alone
	Refused     Outcome = "refused"     // its metadata could not be kept (not permitted; immutable or append-only); left as it was
	Failed      Outcome = "failed"      // malformed input, write error, interrupted
)

// Outcomes lists every outcome in the order summaries print them.
var Outcomes = []Outcome{Converted, HasSFrame, NoCFI, NotELF, Unsupported, NoLayout, Signed, Refused, Failed}

// Classify says what a conversion's error means for the file: Converted
// for none, an outcome that leaves the file as it is (already SFrame, no
// CFI, an unsupported machine, no safe layout), or Failed.
func Classify(err error) Outcome {
	switch {
	case err == nil:
		return Converted
	case errors.Is(err, convert.ErrHasSFrame):
		return HasSFrame
	case errors.Is(err, convert.ErrNoCFI):
		return NoCFI
	case errors.Is(err, convert.ErrUnsupported):
		return Unsupported
	case errors.Is(err, convert.ErrLayout):
		return NoLayout
	}
	return Failed
}

// Record is the account of one file.
type Record struct {
	File        string  `json:"file"`
	Output      string  `json:"output,omitempty"` // where the result went ("" when nothing was written)
	Outcome     Outcome `json:"outcome"`
	Error       string  `json:"error,omitempty"` // for every outcome but Converted: why
	Err         error   `json:"-"`               // the error Error says, for errors.Is and errors.As
	Functions   int     `json:"functions,omitempty"`
	Skipped     int     `json:"skipped,omitempty"` // functions the CFI describes that SFrame cannot
	SFrameBytes int     `json:"sframe_bytes,omitempty"`
	CFIErrors   int     `json:"cfi_errors,omitempty"` // malformed CFI records skipped
	Warning     string  `json:"warning,omitempty"`    // converted, but see this (convert.Result.Warning)
	// CodeBytes are the bytes of a converted linked file's executable
	// sections, CoveredBytes those its SFrame functions describe.
	CodeBytes    uint64 `json:"code_bytes,omitempty"`
	CoveredBytes uint64 `json:"sframe_covered_code_bytes,omitempty"`
	// FromCodeBytes are those described from the instructions
	// (convert.Options.FromCode), not from CFI or a Go table.
	FromCodeBytes uint64 `json:"from_code_code_bytes,omitempty"`
	// NotKept is what of the file's metadata its copy in OutDir could not
	// keep, for a user who is not root (as cp -a leaves it out).
	NotKept []string `json:"not_kept,omitempty"`

	meta *fsmeta.Meta // what the file written was given (nil: none written)
	link bool         // the record of another name of a file (relink)
}

// Options configures Run.
type Options struct {
	Convert convert.Options
	// Jobs is the number of files converted at once (0: runtime.NumCPU()).
	// Outputs that replace a file, which are synced before their rename,
	// are written on goroutines of their own, up to writersPerJob×Jobs
	// at once.
	Jobs int
	// OutDir, when set, receives the results instead of the inputs being
	// replaced: a file argument F goes to OutDir/base(F); a file found
	// under a directory argument D goes to OutDir/base(D)/its path below
	// D, as cp -r would place them. Files with nothing to do are copied
	// unchanged, so OutDir holds the whole tree. Outputs that collide, or
	// that are inputs, are refused before anything is created
	// (checkOutputs).
	OutDir string
	// Progress, if set, is called after each file (from one goroutine at a
	// time) with the files done and the total.
	Progress func(done, total int)
	// Record, if set, receives each file's record as it completes (from
	// one goroutine at a time).
	Record func(Record)
	// PreserveDates gives converted files their input's access and
	// modification times (strip's -p); files copied unchanged to OutDir
	// keep them always.
	PreserveDates bool
	// Packages, if set, converts the package files found (Debian and
	// RPM packages; Packagers joins several): a package with nothing to
	// convert is NoCFI, one that cannot be converted Failed. Without it
	// a .deb is an ar archive without ELF members, an .rpm not ELF.
	Packages Packager
}

// Summary counts the files by outcome.
type Summary struct {
	Counts      map[Outcome]int
	Files       int // regular files looked at
	Special     int // in place: symbolic links and other entries but directories, left alone
	Interrupted int // files not started because the context was cancelled
	// CodeBytes and CoveredBytes sum the records': the code of the
	// converted linked files, and the part SFrame describes.
	CodeBytes, CoveredBytes uint64
	FromCodeBytes           uint64 // of CoveredBytes, from the instructions
	Kept                    Kept
}

// Kept counts what the files written kept besides their bytes, and, with
// OutDir, what the copy made again.
type Kept struct {
	Owners      int // files owned by another user or group than the one running
	SpecialBits int // files with setuid, setgid or sticky bits
	Xattrs      int // files with capabilities, ACLs or other extended attributes
	Dirs        int // OutDir: directories
	Symlinks    int // OutDir: symbolic links
	Devices     int // OutDir: devices, FIFOs and sockets
	HardLinks   int // names made as hard links to a file written under another name
	NotKept     int // OutDir, not as root: files some of whose metadata could not be kept
	Stale       int // temporary files of killed runs removed
}

// OK says every file that could be converted was: no file failed, none
// was refused for metadata it could not keep, and none was left undone.
func (s *Summary) OK() bool {
	return s.Counts[Failed] == 0 && s.Counts[Refused] == 0 && s.Interrupted == 0
}

// root is one argument's place: a directory argument, or a file
// argument's directory, held open for the run.
type root struct {
	top     *os.File // the directory the files' paths are relative to
	display string   // top's path, as given
	isDir   bool     // a directory argument (else a file argument's directory)
	out     string   // OutDir: where top's copy goes (OutDir itself for a file argument)
	outTop  *os.File // OutDir: out, open
	// entries are the directories (top first), symbolic links, devices,
	// FIFOs and sockets below a directory argument, in walk order
	// (parents first): what a copy to OutDir makes again.
	entries []dirEntry
}

// place is one name of a file: below its root, and the path shown.
type place struct {
	r       *root
	rel     string // below r.top
	in, out string // paths shown; out == in in place
}

// job is one file to convert and where its result goes.
type job struct {
	place
	// links are other names of the same file (hard links, or in place
	// the same path given twice): they get the file written for the
	// first name too, as links again, instead of a copy each.
	links []place
	id    fileID // the input's device and inode
	size  int64  // the input's size when listed: Run starts the largest first
}

// collect lists the regular files under paths (files and directories)
// with their destinations; see Options.OutDir. Symbolic links and special
// files are counted in place, listed for the copy with OutDir, and never
// followed. It creates nothing: checkOutputs then looks for outputs that
// collide. In place, temporary files whose writer is gone are removed.
// Entries that changed while they were read are failed records. The
// caller closes the roots' tops.
func collect(paths []string, outDir string) (_ *collection, err error) {
	c := &collection{}
	first := map[fileID]int{}
	add := func(pl place, st *unix.Stat_t) {
		id := idOfStat(st)
		if i, ok := first[id]; ok {
			j := &c.jobs[i]
			if outDir == "" && (j.in == pl.in || slices.ContainsFunc(j.links, func(l place) bool { return l.in == pl.in })) {
				return // the same path again: one file, one name
			}
			j.links = append(j.links, pl)
			return
		}
		first[id] = len(c.jobs)
		c.jobs = append(c.jobs, job{place: pl, id: id, size: st.Size})
	}
	defer func() {
		if err != nil {
			closeRoots(c.roots)
		}
	}()
	for _, p := range paths {
		st, err := os.Lstat(p)
		if err != nil {
			return nil, err
		}
		switch {
		case st.Mode().IsRegular():
			top, err := os.OpenFile(filepath.Dir(p), os.O_RDONLY|unix.O_DIRECTORY, 0)
			if err != nil {
				return nil, err
			}
			r := &root{top: top, display: filepath.Dir(p), out: outDir}
			c.roots = append(c.roots, r)
			var lst unix.Stat_t
			if err := unix.Fstatat(int(top.Fd()), filepath.Base(p), &lst, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				return nil, &os.PathError{Op: "lstat", Path: p, Err: err}
			}
			pl := place{r: r, rel: filepath.Base(p), in: p, out: p}
			if outDir != "" {
				pl.out = filepath.Join(outDir, filepath.Base(filepath.Clean(p)))
			}
			add(pl, &lst)
		case st.IsDir():
			top, err := os.OpenFile(p, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
			if err != nil {
				return nil, err
			}
			r := &root{top: top, display: p, isDir: true}
			if outDir != "" {
				r.out = filepath.Join(outDir, filepath.Base(filepath.Clean(p)))
			}
			c.roots = append(c.roots, r)
			w := &walker{clean: outDir == ""}
			w.file = func(rel, display string, st *unix.Stat_t) {
				pl := place{r: r, rel: rel, in: display, out: display}
				if outDir != "" {
					pl.out = filepath.Join(r.out, rel)
				}
				add(pl, st)
			}
			w.other = func(e dirEntry) {
				switch {
				case outDir != "":
					r.entries = append(r.entries, e)
				case e.meta.Mode&unix.S_IFMT != unix.S_IFDIR:
					c.special++
				}
			}
			w.failed = func(display string, err error) {
				c.failed = append(c.failed, Record{File: display, Outcome: Failed, Error: err.Error(), Err: err})
			}
			err = w.walkDir(top, ".", p, nil)
			c.stale += w.stale
			if err != nil {
				return nil, err
			}
		default:
			c.special++
		}
	}
	return c, nil
}

// collection is what collect found.
type collection struct {
	jobs    []job
	roots   []*root
	special int      // in place: entries neither regular files nor directories
	stale   int      // temporary files of killed runs removed
	failed  []Record // entries that changed while the walk read them
}

func closeRoots(roots []*root) {
	for _, r := range roots {
		r.top.Close()
		if r.outTop != nil {
			r.outTop.Close()
		}
	}
}

// countNames counts the names of the jobs' files.
func countNames(jobs []job) int {
	n := 0
	for _, j := range jobs {
		n += 1 + len(j.links)
	}
	return n
}

// Run converts every regular file under paths. The error is for problems
// found before anything is created or touched (a missing argument, an
// unreadable directory, colliding outputs: see checkOutputs); per-file
// problems are in the records and the summary; options that cannot be
// used are an error (a *convert.OptionError) before anything. With
// OutDir, it creates OutDir and the directories below it as outputs need
// them, and, once every file is done, the rest of the copy: empty
// directories, symbolic links, devices, FIFOs and sockets, and the
// directories' metadata (unless cancelled); a run that does not succeed
// (a file failed, or ctx was cancelled) then removes the directories it
// created and left empty, so that only files it wrote remain.
func Run(ctx context.Context, paths []string, o Options) (*Summary, error) {
	if err := o.Convert.Validate(); err != nil {
		return nil, err
	}
	c, err := collect(paths, o.OutDir)
	if err != nil {
		return nil, err
	}
	jobs, roots := c.jobs, c.roots
	defer closeRoots(roots)
	mk := &dirMaker{}
	if o.OutDir != "" {
		if err := checkOutputs(paths, jobs, o.OutDir); err != nil {
			return nil, err
		}
		if err := openOutputs(mk, roots, o.OutDir); err != nil {
			mk.removeEmpty()
			return nil, err
		}
	}
	n := o.Jobs
	if n <= 0 {
		n = runtime.NumCPU()
	}
	largestFirst(jobs)
	sum := &Summary{Counts: map[Outcome]int{}, Files: countNames(jobs) + len(c.failed), Special: c.special}
	sum.Kept.Stale = c.stale
	var mu sync.Mutex
	done := 0
	report := func(r Record) {
		mu.Lock()
		defer mu.Unlock()
		sum.Counts[r.Outcome]++
		sum.Kept.count(r)
		sum.CodeBytes += r.CodeBytes
		sum.CoveredBytes += r.CoveredBytes
		sum.FromCodeBytes += r.FromCodeBytes
		done++
		if o.Record != nil {
			o.Record(r)
		}
		if o.Progress != nil {
			o.Progress(done, sum.Files)
		}
	}
	finish := func(j job, r Record) {
		report(r)
		for _, l := range j.links {
			report(relink(ctx, r, j.place, l, mk))
		}
	}
	for _, r := range c.failed {
		report(r)
	}
	ch := make(chan job)
	var wg, writing sync.WaitGroup
	// Outputs that replace a file are written (and synced) on goroutines
	// of their own, at most writersPerJob×n at once, while the workers go
	// on.
	writes := make(chan struct{}, writersPerJob*n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range ch {
				r, write := one(ctx, j, o, mk)
				if write == nil {
					finish(j, r)
					continue
				}
				writes <- struct{}{}
				writing.Add(1)
				go func() {
					defer writing.Done()
					finish(j, write())
					<-writes
				}()
			}
		}()
	}
	started := 0
feed:
	for _, j := range jobs {
		select {
		case <-ctx.Done():
			break feed
		case ch <- j:
			started += 1 + len(j.links)
		}
	}
	close(ch)
	wg.Wait()
	writing.Wait()
	sum.Interrupted = sum.Files - len(c.failed) - started
	if o.OutDir != "" && ctx.Err() == nil {
		for _, r := range roots {
			finishCopy(r, mk, report, &sum.Kept)
		}
	}
	if !sum.OK() {
		mk.removeEmpty()
	}
	return sum, nil
}

// euid and egid are who runs: a copy keeps what they may set.
var euid, egid = uint32(os.Geteuid()), uint32(os.Getegid())

// count adds what the file of r kept.
func (k *Kept) count(r Record) {
	if r.link && r.Output != "" {
		k.HardLinks++
	}
	m := r.meta
	if m == nil {
		return
	}
	if m.Uid != euid || m.Gid != egid {
		k.Owners++
	}
	if m.Mode&(unix.S_ISUID|unix.S_ISGID|unix.S_ISVTX) != 0 {
		k.SpecialBits++
	}
	if len(m.Xattrs) > 0 {
		k.Xattrs++
	}
	if len(r.NotKept) > 0 {
		k.NotKept++
	}
}

// writersPerJob bounds the outputs being written, per worker, while the
// workers convert the next files. A writer waits on the disk, not on a
// CPU: the sync before the rename, and, on a file system mounted with
// discard, the blocks of the replaced file given back when its mapping
// goes. With one writer per worker the workers waited for them: an
// in-place run over a copy of /usr/bin and /usr/lib/x86_64-linux-gnu
// (2,050 files converted, -j 2, ext4 with discard) took 12.2–13.1 s
// with 2 writers, 11.0–11.2 s with 4, 9.5–10.7 s with 8, and no less
// with 16 or 32; peak RSS 225–250 MB throughout (on tmpfs the same run
// takes 5 s). Each pending write holds its input's mapping and its
// result, so the bound stays small.
const writersPerJob = 4

// largestFirst orders the jobs by input size, largest first, names in
// the order listed among equal sizes. A conversion's time grows with the
// file, so with the big ones started first the small ones fill the gaps
// at the end and no CPU waits on one late large file.
func largestFirst(jobs []job) {
	slices.SortStableFunc(jobs, func(a, b job) int { return cmp.Compare(b.size, a.size) })
}

// one converts one file, creating the output's directory through mk, and
// returns its record; or, when the output replaces a file (and so is
// synced before its rename: a wait on the disk, not on the CPU), nil and
// a function that writes it and returns the record, for Run to call on
// another goroutine while this one converts the next file. The input
// stays open until the output is written.
func one(ctx context.Context, j job, o Options, mk *dirMaker) (Record, func() Record) {
	rec := Record{File: j.in}
	fail := func(oc Outcome, err error) Record {
		rec.Outcome, rec.Error, rec.Err = oc, err.Error(), err
		return rec
	}
	if err := ctx.Err(); err != nil {
		return fail(Failed, fmt.Errorf("%s: interrupted", j.in)), nil
	}
	in, meta, dir, err := openJob(j)
	if err != nil {
		return fail(Failed, err), nil
	}
	outDir := dir // the output's directory
	release := func() {
		in.Close()
		dir.Close()
		if outDir != dir {
			outDir.Close()
		}
	}
	later := false
	defer func() {
		if !later {
			release()
		}
	}()
	inPlace := o.OutDir == ""
	if !inPlace {
		if outDir, err = mk.below(j.r, filepath.Dir(j.rel)); err != nil {
			outDir = dir
			return fail(Failed, err), nil
		}
	}
	// dest is where the output goes, given meta (with its times or not).
	dest := func(times bool) elfwrite.Dest {
		d := elfwrite.Dest{Dir: outDir, Name: filepath.Base(j.rel), Path: j.out}
		fo := fsmeta.Options{Times: times, BestEffort: !inPlace && euid != 0}
		d.Finish = func(f *os.File) error {
			lost, err := fsmeta.Apply(f, meta, fo)
			rec.NotKept = lost
			return err
		}
		if inPlace {
			d.Replaces = &elfwrite.FileID{Dev: j.id.dev, Ino: j.id.ino}
		}
		return d
	}
	// Nothing to do: copy it when writing elsewhere, leave it otherwise.
	leave := func(oc Outcome, why error) (Record, func() Record) {
		rec.Outcome, rec.Error, rec.Err = oc, why.Error(), why
		if inPlace {
			return rec, nil
		}
		if err := elfwrite.WriteAtomic(ctx, dest(true), func(f *os.File) error { return copySparse(f, in.File(), in.Size) }); err != nil {
			return fail(Failed, err), nil
		}
		rec.Output, rec.meta = j.out, meta
		return rec, nil
	}
	if why := fsmeta.Signature(meta, in.Data); why != "" {
		return leave(Signed, fmt.Errorf("%s: %s; left alone", j.in, why))
	}
	if why := meta.Sealed(); inPlace && why != "" {
		return fail(Refused, fmt.Errorf("%s: %s; left as it was", j.in, why)), nil
	}
	c, oc, err := convertJob(ctx, j, o, in)
	switch {
	case oc == Failed:
		return fail(Failed, err), nil
	case oc != Converted:
		return leave(oc, err)
	}
	defer func() {
		if !later {
			c.close()
		}
	}()
	writeOut := func() Record {
		if err := elfwrite.WriteAtomic(ctx, dest(o.PreserveDates), func(f *os.File) error { return c.write(f) }); err != nil {
			var lost *fsmeta.LostError
			switch {
			case ctx.Err() != nil:
				err = &convert.Error{File: j.in, Err: errInterrupted}
			case errors.As(err, &lost):
				return fail(Refused, fmt.Errorf("%w; left as it was", err))
			}
			return fail(Failed, err)
		}
		rec.Outcome, rec.Output, rec.meta = Converted, j.out, meta
		c.fill(&rec)
		return rec
	}
	var exists unix.Stat_t
	if unix.Fstatat(int(outDir.Fd()), filepath.Base(j.rel), &exists, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return writeOut(), nil // a new file: not synced, nothing to wait on
	}
	later = true
	return Record{}, func() Record {
		defer release()
		defer c.close()
		return writeOut()
	}
}

// conversion is a file converted, to be written.
type conversion struct {
	write func(w io.Writer) error
	close func() error
	fill  func(*Record) // the record's counts
}

// convertJob converts the file in (j's): a conversion to write, or the
// outcome and why when there is none (Failed, or nothing to do).
func convertJob(ctx context.Context, j job, o Options, in *mapped.File) (*conversion, Outcome, error) {
	if o.Packages != nil && o.Packages.Is(in.Data) {
		pkg, err := o.Packages.Convert(ctx, j.in, in.File(), in.Size, o.Convert)
		switch {
		case err != nil && ctx.Err() != nil:
			return nil, Failed, &convert.Error{File: j.in, Err: errInterrupted}
		case err != nil:
			return nil, Failed, err
		}
		if why := pkg.Unchanged(); why != "" {
			pkg.Close()
			return nil, NoCFI, fmt.Errorf("%s: %s", j.in, why)
		}
		fill := func(r *Record) {
			r.SFrameBytes = pkg.SFrameBytes()
			if w, ok := pkg.(interface{ Warning() string }); ok {
				r.Warning = w.Warning() // an RPM's signatures dropped
			}
		}
		return &conversion{write: pkg.Write, close: pkg.Close, fill: fill}, Converted, nil
	}
	switch {
	case bytes.HasPrefix(in.Data, []byte("\x7fELF")), bytes.HasPrefix(in.Data, []byte(relobj.ArchiveMagic)):
	case bytes.HasPrefix(in.Data, []byte("!<thin>\n")):
		return nil, Unsupported, fmt.Errorf("%s: thin archive (members live in other files)", j.in)
	default:
		return nil, NotELF, fmt.Errorf("%s: not an ELF file or archive", j.in)
	}
	cf, err := convert.NewFile(j.in, in.File(), in.Size)
	if err != nil {
		return nil, Failed, err
	}
	res, err := cf.Convert(o.Convert)
	switch oc := Classify(err); {
	case oc != Converted:
		cf.Close()
		return nil, oc, err
	case res.Unchanged != "":
		cf.Close()
		return nil, NoCFI, fmt.Errorf("%s: %s", j.in, res.Unchanged)
	}
	fill := func(r *Record) {
		r.Functions = res.Translate.Converted + res.Translate.PLTFuncs
		for _, d := range res.Translate.Diags {
			switch {
			case d.Skipped:
				r.Skipped++ // a function without SFrame
			case d.Reason == convert.FromCode:
				r.FromCodeBytes += d.End - d.Start
			}
		}
		r.SFrameBytes = len(res.SFrame)
		r.CFIErrors = len(res.CFIErrors)
		r.Warning = res.Warning
		if res.Addr != 0 { // a linked file: its code is where it runs
			if ef, err := elf.NewFile(bytes.NewReader(in.Data)); err == nil {
				if c, err := coverage.OfSection(ef, res.SFrame, res.Addr); err == nil {
					r.CodeBytes, r.CoveredBytes = c.CodeBytes, c.CoveredBytes
				}
			}
		}
	}
	return &conversion{write: res.Write, close: cf.Close, fill: fill}, Converted, nil
}

// Packager converts the package files of a tree: Debian packages, whose
// converter, internal/deb, the command gives (this package cannot import
// it: deb converts data.tar through internal/layer, which uses Outcome).
type Packager interface {
	// Is says whether a file whose bytes start with head is a package.
	Is(head []byte) bool
	// Convert converts the package name, of size bytes read from r; an
	// error names the package, and where in it.
	Convert(ctx context.Context, name string, r io.ReaderAt, size int64, o convert.Options) (Package, error)
}

// Packagers converts the packages any of its Packagers takes, the
// first that takes a file.
type Packagers []Packager

// Is says whether one of the Packagers takes the file.
func (ps Packagers) Is(head []byte) bool { return ps.of(head) != nil }

func (ps Packagers) of(head []byte) Packager {
	for _, p := range ps {
		if p.Is(head) {
			return p
		}
	}
	return nil
}

// Convert converts the package name with the Packager that takes it; r's
// first bytes say which.
func (ps Packagers) Convert(ctx context.Context, name string, r io.ReaderAt, size int64, o convert.Options) (Package, error) {
	head := make([]byte, min(size, 64))
	if _, err := r.ReadAt(head, 0); err != nil && err != io.EOF {
		return nil, &convert.Error{File: name, Err: err}
	}
	p := ps.of(head)
	if p == nil {
		return nil, &convert.Error{File: name, Err: errors.New("not a package")}
	}
	return p.Convert(ctx, name, r, size, o)
}

// Package is a package converted, to be written.
type Package interface {
	// Unchanged says why nothing was converted ("" when something was).
	Unchanged() string
	SFrameBytes() int // the size of the .sframe sections added
	Write(w io.Writer) error
	Close() error // removes its temporary files
}

// openJob opens j's input without following a link on the way, checks
// that it is the file listed, and reads its metadata; dir is its
// directory, open.
func openJob(j job) (in *mapped.File, meta *fsmeta.Meta, dir *os.File, err error) {
	dir, err = openBelow(j.r.top, filepath.Dir(j.rel), j.r.display, nil)
	if err != nil {
		return nil, nil, nil, err
	}
	defer func() {
		if err != nil {
			dir.Close()
		}
	}()
	f, err := openAt(dir, filepath.Base(j.rel), openFileFlags, j.in)
	if err != nil {
		return nil, nil, nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil || idOfStat(&st) != j.id {
		f.Close()
		return nil, nil, nil, &os.PathError{Op: "open", Path: j.in, Err: errSwapped}
	}
	// The metadata before the mapping is read: reading updates the
	// access time.
	if meta, err = fsmeta.Read(f); err != nil {
		f.Close()
		return nil, nil, nil, fmt.Errorf("%s: %w", j.in, err)
	}
	if in, err = mapped.OpenFile(f, j.in); err != nil {
		return nil, nil, nil, &convert.Error{File: j.in, Err: err}
	}
	return in, meta, dir, nil
}

// errInterrupted is the error of a file left as it was because the run
// was cancelled.
var errInterrupted = errors.New("interrupted; left as it was")

// relink gives l, another name of the file first, the file written for
// first, as a hard link again (linked to a temporary name renamed over
// l's), and reports it with first's outcome. In place only a converted
// file is linked again (the others are one file still); with OutDir
// every file written is.
func relink(ctx context.Context, r Record, first, l place, mk *dirMaker) Record {
	rec := r
	rec.File, rec.NotKept, rec.meta, rec.link = l.in, nil, nil, true
	inPlace := first.out == first.in
	if r.Output == "" || (inPlace && r.Outcome != Converted) {
		rec.Output = ""
		rec.Error = strings.Replace(r.Error, r.File, l.in, 1)
		return rec
	}
	rec.Output = l.out
	fail := func(err error) Record {
		rec.Outcome, rec.Output, rec.Error, rec.Err = Failed, "", fmt.Sprintf("%s: %v (it is a hard link to %s, which was written)", l.in, err, r.File), err
		return rec
	}
	if err := ctx.Err(); err != nil {
		return fail(errInterrupted)
	}
	open := func(p place) (*os.File, error) {
		if inPlace {
			return openBelow(p.r.top, filepath.Dir(p.rel), p.r.display, nil)
		}
		return mk.below(p.r, filepath.Dir(p.rel))
	}
	from, err := open(first)
	if err != nil {
		return fail(err)
	}
	defer from.Close()
	to, err := open(l)
	if err != nil {
		return fail(err)
	}
	defer to.Close()
	if err := elfwrite.LinkAtomic(from, filepath.Base(first.rel), to, filepath.Base(l.rel)); err != nil {
		return fail(err)
	}
	return rec
}
