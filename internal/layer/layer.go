// Package layer converts the ELF files inside a tar stream: a container
// image's layer, or a Debian package's data.tar. It reads the stream
// once, entry by entry, and writes a new one: each regular file that is an
// ELF file or a static archive is converted as the file command converts
// it, and everything else passes through. Every header keeps its fields
// (name, owner and group ids and names, mode, times, PAX records such as
// extended attributes, link targets, device numbers, format); only the
// size and content of converted files change. Hard links follow their
// target, which comes first in a tar stream.
//
// Memory grows with one file, never with the stream: a file up to
// Options.InMemory bytes is converted in memory, a larger one through two
// unlinked temporary files (its input and its output), which are read
// and written with read and write, never mapped whole.
//
// Packages and images read their compressed streams through NewReader,
// which decompresses gzip, xz, zstd or bzip2 within bounds (an xz
// dictionary or zstd window of at most MaxWindow, output of at most
// Bounds, at most MaxTail bytes after the tar's end) and stops when its
// context is done.
package layer

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"

	"golang.org/x/sync/semaphore"

	"github.com/cfi2sframe/cfi2sframe/convert"
	"github.com/cfi2sframe/cfi2sframe/internal/fsmeta"
	"github.com/cfi2sframe/cfi2sframe/internal/relobj"
	"github.com/cfi2sframe/cfi2sframe/internal/tree"
)

// DefaultInMemory is the largest file converted in memory when
// Options.InMemory is 0.
const DefaultInMemory = 16 << 20

// Options configures Convert.
type Options struct {
	Convert convert.Options
	// Name names the stream in errors ("layer 2 (sha256:…)", "data.tar").
	Name string
	// KeepGoing passes a file whose conversion fails through unchanged
	// and goes on (the file is listed in Stats.Failed); without it the
	// first failure ends the stream with an error.
	KeepGoing bool
	// InMemory is the largest file converted in memory (0:
	// DefaultInMemory); larger files go through TempDir.
	InMemory int64
	TempDir  string // "" is os.TempDir()
	// Jobs is the number of files converted at once (0:
	// runtime.NumCPU()).
	Jobs int
	// Limits, if set, is shared with other streams converted at once
	// (Jobs and InMemory then only size a stream's own).
	Limits *Limits
	// Sums asks for the MD5 sum of every converted file's new content
	// (File.MD5), for a Debian package's md5sums.
	Sums bool
}

// File is the account of one regular file the stream held that was
// converted, or failed.
type File struct {
	Name        string       `json:"file"`
	Outcome     tree.Outcome `json:"outcome"`
	Error       string       `json:"error,omitempty"`
	Size        int64        `json:"size"`
	NewSize     int64        `json:"new_size,omitempty"`
	SFrameBytes int          `json:"sframe_bytes,omitempty"`
	MD5         [16]byte     `json:"-"`
}

// Stats is what Convert did to a stream.
type Stats struct {
	Entries int                  // tar entries
	Counts  map[tree.Outcome]int // regular files by outcome
	Files   []File               // converted and failed files, in stream order
	// Links lists the hard links of the stream, in stream order, with
	// Options.Sums: a Debian package's md5sums gives a hard link's name
	// its target's sum, which changes when the target is converted.
	Links []Link
}

// Link is a hard link of the stream: Name has the content of Target, an
// earlier entry.
type Link struct{ Name, Target string }

// Changed says whether any file's content changed.
func (s *Stats) Changed() bool { return s.Counts[tree.Converted] > 0 }

// Failed lists the files that failed.
func (s *Stats) Failed() []File {
	var out []File
	for _, f := range s.Files {
		if f.Outcome == tree.Failed {
			out = append(out, f)
		}
	}
	return out
}

// Error is a file of the stream that could not be converted.
type Error struct {
	Stream string // Options.Name
	File   string // the entry's name
	Err    error
}

func (e *Error) Error() string {
	// A conversion error names the file already (by its entry name).
	msg := e.Err.Error()
	if !strings.HasPrefix(msg, e.File+":") {
		msg = e.File + ": " + msg
	}
	if e.Stream == "" {
		return msg
	}
	return e.Stream + ": " + msg
}

func (e *Error) Unwrap() error { return e.Err }

// Convert copies the tar stream r to w, converting its ELF files,
// Options.Jobs at once; the output keeps the input's order. The stream
// written ends as archive/tar ends one. An error in the stream itself, a
// write error, a cancelled ctx or (without KeepGoing) a file that fails
// ends it, with an error naming the stream and where.
func Convert(ctx context.Context, r io.Reader, w io.Writer, o Options) (*Stats, error) {
	if o.InMemory <= 0 {
		o.InMemory = DefaultInMemory
	}
	if o.Jobs <= 0 {
		o.Jobs = runtime.NumCPU()
	}
	if o.Limits == nil {
		o.Limits = NewLimits(o.Jobs, o.InMemory)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	c := &converter{
		o:      o,
		st:     &Stats{Counts: map[tree.Outcome]int{}},
		tw:     tar.NewWriter(w),
		ctx:    ctx,
		jobs:   o.Limits.jobs,
		mem:    o.Limits.mem,
		budget: o.Limits.budget,
		queue:  make(chan *item, queueLen),
	}
	done := make(chan error, 1)
	go func() { done <- c.writeAll(cancel) }()
	readErr := c.readAll(tar.NewReader(r))
	close(c.queue)
	writeErr := <-done
	switch {
	case writeErr != nil:
		return c.st, writeErr
	case readErr != nil:
		return c.st, readErr
	}
	if err := c.tw.Close(); err != nil {
		return c.st, c.streamErr(err)
	}
	return c.st, nil
}

// queueLen bounds the entries read ahead of the one being written.
const queueLen = 256

// Limits bounds what the streams converted at once share: the files
// being converted, and the bytes the entries read ahead hold in memory
// (each conversion's input and output, and small entries).
type Limits struct {
	jobs   chan struct{}
	mem    *semaphore.Weighted
	budget int64 // no entry takes more
}

// NewLimits allows jobs conversions at once (0: runtime.NumCPU()) and
// (jobs+1)×inMemory bytes (0: DefaultInMemory) plus 4 MiB read ahead.
func NewLimits(jobs int, inMemory int64) *Limits {
	if jobs <= 0 {
		jobs = runtime.NumCPU()
	}
	if inMemory <= 0 {
		inMemory = DefaultInMemory
	}
	b := int64(jobs+1)*inMemory + 4*smallEntry
	return &Limits{jobs: make(chan struct{}, jobs), mem: semaphore.NewWeighted(b), budget: b}
}

type converter struct {
	o      Options
	st     *Stats // written by the writer only
	tw     *tar.Writer
	ctx    context.Context
	jobs   chan struct{}       // conversions running
	mem    *semaphore.Weighted // bytes held by entries read ahead
	budget int64
	queue  chan *item
}

// item is one entry on its way from the reader to the writer.
type item struct {
	hdr    *tar.Header
	weight int64        // bytes of mem it holds
	data   []byte       // the content of a small entry passed through
	oc     tree.Outcome // the outcome of a regular file passed through
	// A file being converted: in is its input; done is closed when
	// out (nil: pass in through), res and err are set.
	in   *Blob
	out  *Blob
	res  *convert.Result
	err  error
	done chan struct{}
	// A large entry passed through: the writer sends on turn once all
	// before it are written; the reader copies it, then closes back.
	turn, back chan struct{}
}

func (c *converter) streamErr(err error) error {
	if c.o.Name == "" {
		return err
	}
	return fmt.Errorf("%s: %w", c.o.Name, err)
}

func (c *converter) push(it *item) error {
	select {
	case c.queue <- it:
		return nil
	case <-c.ctx.Done():
		if it.done != nil {
			<-it.done
		}
		c.release(it)
		return context.Cause(c.ctx)
	}
}

func (c *converter) release(it *item) {
	if it.in != nil {
		it.in.Close()
	}
	if it.out != nil {
		it.out.Close()
	}
	c.mem.Release(it.weight)
	it.weight = 0
}

// readAll reads the entries and queues them; a conversion starts as soon
// as its file is read.
func (c *converter) readAll(tr *tar.Reader) error {
	for {
		if c.ctx.Err() != nil {
			return context.Cause(c.ctx)
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return c.streamErr(err)
		}
		if err := c.read(&item{hdr: hdr}, tr); err != nil {
			return err
		}
	}
}

// smallEntry is the largest entry passed through that is read ahead.
const smallEntry = 1 << 20

func (c *converter) read(it *item, tr io.Reader) error {
	hdr := it.hdr
	size := hdr.Size
	if hdr.Typeflag != tar.TypeReg {
		size = 0 // only regular files are read here; others' content is copied
	}
	var magic [8]byte
	n, err := io.ReadFull(tr, magic[:min(int64(len(magic)), size)])
	if err != nil {
		return c.streamErr(fmt.Errorf("%s: %w", hdr.Name, noEOF(err)))
	}
	head := magic[:n]
	elfLike := hdr.Typeflag == tar.TypeReg && (bytes.HasPrefix(head, []byte("\x7fELF")) || bytes.HasPrefix(head, []byte(relobj.ArchiveMagic)))
	it.oc = tree.NotELF
	if elfLike {
		it.oc = tree.Signed
	}
	if !elfLike || signed(hdr) != "" {
		if hdr.Typeflag != tar.TypeReg || size > smallEntry {
			return c.barrier(it, head, tr)
		}
		return c.small(it, head, tr)
	}
	if size <= c.o.InMemory {
		it.weight = min(2*size, c.budget)
		if err := c.mem.Acquire(c.ctx, it.weight); err != nil {
			it.weight = 0
			return context.Cause(c.ctx)
		}
	}
	in, err := c.spool(hdr, head, tr)
	if err != nil {
		c.release(it)
		return err
	}
	it.in, it.done = in, make(chan struct{})
	select {
	case c.jobs <- struct{}{}:
	case <-c.ctx.Done():
		close(it.done)
		c.release(it)
		return context.Cause(c.ctx)
	}
	go func() {
		defer func() { <-c.jobs }()
		defer close(it.done)
		it.out, it.res, it.err = ConvertBlob(it.in, c.o.Convert, c.o.TempDir)
	}()
	return c.push(it)
}

// small reads a small entry passed through, to be written in turn.
func (c *converter) small(it *item, head []byte, tr io.Reader) error {
	it.weight = min(it.hdr.Size, c.budget)
	if err := c.mem.Acquire(c.ctx, it.weight); err != nil {
		it.weight = 0
		return context.Cause(c.ctx)
	}
	it.data = make([]byte, it.hdr.Size)
	copy(it.data, head)
	if _, err := io.ReadFull(tr, it.data[len(head):]); err != nil {
		c.release(it)
		return c.streamErr(fmt.Errorf("%s: %w", it.hdr.Name, noEOF(err)))
	}
	return c.push(it)
}

// barrier passes an entry through from the input: once every entry
// before it is written, the reader copies it (a large file, or an entry
// that is not a regular file, whose content archive/tar decides).
func (c *converter) barrier(it *item, head []byte, tr io.Reader) error {
	it.turn, it.back = make(chan struct{}), make(chan struct{})
	if err := c.push(it); err != nil {
		return err
	}
	select {
	case <-it.turn:
	case <-c.ctx.Done():
		return context.Cause(c.ctx)
	}
	defer close(it.back)
	return c.copy(it.hdr, head, tr)
}

// writeAll writes the queued entries in order; on an error it cancels
// the reader and drains the queue.
func (c *converter) writeAll(cancel context.CancelCauseFunc) error {
	var first error
	for it := range c.queue {
		if first == nil {
			if err := c.write(it); err != nil {
				first = err
				cancel(err)
			}
		}
		if it.done != nil {
			<-it.done
		}
		c.release(it)
	}
	return first
}

func (c *converter) write(it *item) error {
	hdr := it.hdr
	c.st.Entries++
	if hdr.Typeflag == tar.TypeLink && c.o.Sums {
		c.st.Links = append(c.st.Links, Link{hdr.Name, hdr.Linkname})
	}
	if hdr.Typeflag == tar.TypeReg && it.done == nil {
		c.st.Counts[it.oc]++
	}
	switch {
	case it.turn != nil:
		select {
		case it.turn <- struct{}{}:
		case <-c.ctx.Done():
			return context.Cause(c.ctx)
		}
		<-it.back
		return nil
	case it.done == nil:
		return c.copy(hdr, it.data, bytes.NewReader(nil))
	}
	select {
	case <-it.done:
	case <-c.ctx.Done():
		return context.Cause(c.ctx)
	}
	return c.written(it)
}

// written writes a converted file, or passes it through.
func (c *converter) written(it *item) error {
	hdr, err := it.hdr, it.err
	f := File{Name: hdr.Name, Size: hdr.Size}
	oc := tree.Classify(err)
	if err == nil && it.out == nil {
		oc = tree.NoCFI
	}
	c.st.Counts[oc]++
	switch oc {
	case tree.Converted:
	case tree.Failed:
		le := &Error{c.o.Name, hdr.Name, err}
		f.Outcome, f.Error = oc, le.Error()
		c.st.Files = append(c.st.Files, f)
		if !c.o.KeepGoing {
			return le
		}
		fallthrough
	default:
		return c.copyFrom(hdr, it.in)
	}
	out, res := it.out, it.res
	f.Outcome, f.NewSize, f.SFrameBytes = oc, out.Size(), len(res.SFrame)
	nh := *hdr
	nh.Size = out.Size()
	if err := c.tw.WriteHeader(&nh); err != nil {
		return c.streamErr(fmt.Errorf("%s: %w", hdr.Name, err))
	}
	sum := md5.New()
	dst := io.Writer(c.tw)
	if c.o.Sums {
		dst = io.MultiWriter(c.tw, sum)
	}
	if err := out.CopyTo(c.ctx, dst); err != nil {
		return c.streamErr(fmt.Errorf("%s: %w", hdr.Name, err))
	}
	copy(f.MD5[:], sum.Sum(nil))
	c.st.Files = append(c.st.Files, f)
	return nil
}

// signed says why a file must be left alone: an IMA or EVM signature
// over its content, as a PAX extended attribute ("" if none).
func signed(hdr *tar.Header) string {
	return fsmeta.SignedBy(func(name string) bool { _, ok := hdr.PAXRecords["SCHILY.xattr."+name]; return ok })
}

// copy writes hdr and the rest of the entry, after the head already read.
func (c *converter) copy(hdr *tar.Header, head []byte, rest io.Reader) error {
	if err := c.tw.WriteHeader(hdr); err != nil {
		return c.streamErr(fmt.Errorf("%s: %w", hdr.Name, err))
	}
	if _, err := c.tw.Write(head); err != nil {
		return c.streamErr(err)
	}
	if _, err := io.Copy(c.tw, &ctxReader{c.ctx, rest}); err != nil {
		return c.streamErr(fmt.Errorf("%s: %w", hdr.Name, err))
	}
	return nil
}

// Cancellable reads r until ctx is done, then fails with its cause: a
// large entry copied or spooled, a package member or a converted layer
// written, is not read to its end once the run is cancelled.
func Cancellable(ctx context.Context, r io.Reader) io.Reader { return &ctxReader{ctx, r} }

type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (r *ctxReader) Read(p []byte) (int, error) {
	if r.ctx.Err() != nil {
		return 0, context.Cause(r.ctx)
	}
	return r.r.Read(p)
}

func (c *converter) copyFrom(hdr *tar.Header, in *Blob) error {
	if err := c.tw.WriteHeader(hdr); err != nil {
		return c.streamErr(fmt.Errorf("%s: %w", hdr.Name, err))
	}
	if err := in.CopyTo(c.ctx, c.tw); err != nil {
		return c.streamErr(fmt.Errorf("%s: %w", hdr.Name, err))
	}
	return nil
}

// spool reads the entry (head, then the rest of r) into memory, or into a
// temporary file when larger than InMemory (ReadBlob).
func (c *converter) spool(hdr *tar.Header, head []byte, r io.Reader) (*Blob, error) {
	b, err := ReadBlob(c.ctx, hdr.Name, head, r, hdr.Size, c.o.InMemory, c.o.TempDir)
	if err != nil {
		return nil, c.streamErr(fmt.Errorf("%s: %w", hdr.Name, err))
	}
	return b, nil
}

func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
