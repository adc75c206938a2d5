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
package layer

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/cfi2sframe/cfi2sframe/convert"
	"github.com/cfi2sframe/cfi2sframe/internal/relobj"
	"github.com/cfi2sframe/cfi2sframe/internal/tree"
)

// DefaultInMemory is the largest file converted in memory when
// Options.InMemory is 0.
const DefaultInMemory = 32 << 20

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

// Convert copies the tar stream r to w, converting its ELF files. The
// stream written ends as archive/tar ends one. An error in the stream
// itself, a write error, a cancelled ctx or (without KeepGoing) a file
// that fails ends it, with an error naming the stream and where.
func Convert(ctx context.Context, r io.Reader, w io.Writer, o Options) (*Stats, error) {
	if o.InMemory <= 0 {
		o.InMemory = DefaultInMemory
	}
	st := &Stats{Counts: map[tree.Outcome]int{}}
	tr := tar.NewReader(r)
	tw := tar.NewWriter(w)
	c := &converter{o: o, st: st, tw: tw}
	for {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return st, c.streamErr(err)
		}
		st.Entries++
		if hdr.Typeflag == tar.TypeLink && o.Sums {
			st.Links = append(st.Links, Link{hdr.Name, hdr.Linkname})
		}
		if hdr.Typeflag != tar.TypeReg {
			if err := tw.WriteHeader(hdr); err != nil {
				return st, c.streamErr(fmt.Errorf("%s: %w", hdr.Name, err))
			}
			if _, err := io.Copy(tw, tr); err != nil {
				return st, c.streamErr(fmt.Errorf("%s: %w", hdr.Name, err))
			}
			continue
		}
		if err := c.regular(hdr, tr); err != nil {
			return st, err
		}
	}
	if err := tw.Close(); err != nil {
		return st, c.streamErr(err)
	}
	return st, nil
}

type converter struct {
	o  Options
	st *Stats
	tw *tar.Writer
}

func (c *converter) streamErr(err error) error {
	if c.o.Name == "" {
		return err
	}
	return fmt.Errorf("%s: %w", c.o.Name, err)
}

// regular converts or copies one regular file.
func (c *converter) regular(hdr *tar.Header, tr io.Reader) error {
	var magic [8]byte
	n, err := io.ReadFull(tr, magic[:min(int64(len(magic)), hdr.Size)])
	if err != nil {
		return c.streamErr(fmt.Errorf("%s: %w", hdr.Name, err))
	}
	head := magic[:n]
	elfLike := bytes.HasPrefix(head, []byte("\x7fELF")) || bytes.HasPrefix(head, []byte(relobj.ArchiveMagic))
	if why := signed(hdr); !elfLike || why != "" {
		oc := tree.NotELF
		if elfLike {
			oc = tree.Signed
		}
		c.st.Counts[oc]++
		return c.copy(hdr, head, tr)
	}
	in, err := c.spool(hdr, head, tr)
	if err != nil {
		return err
	}
	defer in.close()
	f := File{Name: hdr.Name, Size: hdr.Size}
	out, res, err := c.convert(in)
	oc := tree.Classify(err)
	if err == nil && res.Unchanged != "" {
		oc = tree.NoCFI
	}
	c.st.Counts[oc]++
	switch oc {
	case tree.Converted:
	case tree.Failed:
		f.Outcome, f.Error = oc, (&Error{c.o.Name, hdr.Name, err}).Error()
		c.st.Files = append(c.st.Files, f)
		if !c.o.KeepGoing {
			return &Error{c.o.Name, hdr.Name, err}
		}
		fallthrough
	default:
		if out != nil {
			out.close()
		}
		return c.copyFrom(hdr, in)
	}
	defer out.close()
	f.Outcome, f.NewSize, f.SFrameBytes = oc, out.size, len(res.SFrame)
	nh := *hdr
	nh.Size = out.size
	if err := c.tw.WriteHeader(&nh); err != nil {
		return c.streamErr(fmt.Errorf("%s: %w", hdr.Name, err))
	}
	sum := md5.New()
	dst := io.Writer(c.tw)
	if c.o.Sums {
		dst = io.MultiWriter(c.tw, sum)
	}
	if err := out.copyTo(dst); err != nil {
		return c.streamErr(fmt.Errorf("%s: %w", hdr.Name, err))
	}
	copy(f.MD5[:], sum.Sum(nil))
	c.st.Files = append(c.st.Files, f)
	return nil
}

// signed says why a file must be left alone: an IMA or EVM signature
// over its content, as a PAX extended attribute ("" if none).
func signed(hdr *tar.Header) string {
	for _, name := range []string{"security.ima", "security.evm"} {
		if _, ok := hdr.PAXRecords["SCHILY.xattr."+name]; ok {
			return "signed (" + name + " would no longer match)"
		}
	}
	return ""
}

// copy writes hdr and the rest of the entry, after the head already read.
func (c *converter) copy(hdr *tar.Header, head []byte, rest io.Reader) error {
	if err := c.tw.WriteHeader(hdr); err != nil {
		return c.streamErr(fmt.Errorf("%s: %w", hdr.Name, err))
	}
	if _, err := c.tw.Write(head); err != nil {
		return c.streamErr(err)
	}
	if _, err := io.Copy(c.tw, rest); err != nil {
		return c.streamErr(fmt.Errorf("%s: %w", hdr.Name, err))
	}
	return nil
}

func (c *converter) copyFrom(hdr *tar.Header, in *blob) error {
	if err := c.tw.WriteHeader(hdr); err != nil {
		return c.streamErr(fmt.Errorf("%s: %w", hdr.Name, err))
	}
	if err := in.copyTo(c.tw); err != nil {
		return c.streamErr(fmt.Errorf("%s: %w", hdr.Name, err))
	}
	return nil
}

// convert converts in; out is nil unless the conversion succeeded and
// changed the file.
func (c *converter) convert(in *blob) (out *blob, res *convert.Result, err error) {
	var cf *convert.File
	if in.file != nil {
		cf, err = convert.NewFile(in.name, in.file, in.size)
	} else {
		cf, err = convert.NewFile(in.name, bytes.NewReader(in.data), in.size)
	}
	if err != nil {
		return nil, nil, err
	}
	defer cf.Close()
	res, err = cf.Convert(c.o.Convert)
	if err != nil || res.Unchanged != "" {
		return nil, res, err
	}
	if in.file == nil {
		var buf bytes.Buffer
		buf.Grow(int(in.size) + len(res.SFrame) + 4096)
		if err := res.Write(&buf); err != nil {
			return nil, nil, &convert.Error{File: in.name, Err: err}
		}
		return &blob{name: in.name, data: buf.Bytes(), size: int64(buf.Len())}, res, nil
	}
	f, err := os.CreateTemp(c.o.TempDir, "cfi2sframe-out-*")
	if err != nil {
		return nil, nil, err
	}
	os.Remove(f.Name())
	out = &blob{name: in.name, file: f}
	if err := res.Write(f); err != nil {
		out.close()
		return nil, nil, &convert.Error{File: in.name, Err: err}
	}
	fi, err := f.Stat()
	if err != nil {
		out.close()
		return nil, nil, err
	}
	out.size = fi.Size()
	return out, res, nil
}

// blob is one file's bytes, in memory or in an unlinked temporary file.
type blob struct {
	name string
	data []byte
	file *os.File
	size int64
}

func (b *blob) close() {
	if b.file != nil {
		b.file.Close()
	}
}

func (b *blob) copyTo(w io.Writer) error {
	if b.file == nil {
		_, err := w.Write(b.data)
		return err
	}
	// Read with read(2), not a mapping, so that the file's pages do not
	// count against the process.
	_, err := io.Copy(w, io.NewSectionReader(b.file, 0, b.size))
	return err
}

// spool reads the entry (head, then the rest of r) into memory, or into a
// temporary file when larger than InMemory. hdr.Size is the archive's
// word: only that many bytes are read, and a short entry is an error.
func (c *converter) spool(hdr *tar.Header, head []byte, r io.Reader) (*blob, error) {
	b := &blob{name: hdr.Name, size: hdr.Size}
	if hdr.Size <= c.o.InMemory {
		b.data = make([]byte, hdr.Size)
		copy(b.data, head)
		if _, err := io.ReadFull(r, b.data[len(head):]); err != nil {
			return nil, c.streamErr(fmt.Errorf("%s: %w", hdr.Name, noEOF(err)))
		}
		return b, nil
	}
	f, err := os.CreateTemp(c.o.TempDir, "cfi2sframe-in-*")
	if err != nil {
		return nil, err
	}
	os.Remove(f.Name())
	b.file = f
	if _, err := f.Write(head); err != nil {
		b.close()
		return nil, err
	}
	n, err := io.Copy(f, r)
	if err == nil && n != hdr.Size-int64(len(head)) {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		b.close()
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
