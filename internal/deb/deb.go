// Package deb converts the ELF files of a Debian binary package (.deb)
// and writes the package again, as dpkg takes it.
//
// A .deb is an ar archive: debian-binary, control.tar[.gz|.xz|.zst],
// data.tar[.gz|.xz|.zst|.bz2] or uncompressed, in that order (members
// whose names start with '_' may come between; any other member is
// passed through). The ELF files of data.tar are converted by
// internal/layer, which keeps every tar header but the size; the sums of
// the converted files (and of their hard links) are updated in the
// control member's md5sums, whose bytes, and every other byte of the
// control tar, stay as they were. Each rewritten member keeps its
// compression, data.tar.bz2's included, and its name. Every ar header
// keeps its fields (name, date, owner, group, mode) but the size.
//
// The package is read through an io.ReaderAt, member by member, and never
// held in memory: data.tar is converted as a stream into a temporary file,
// since its new size must precede it. A package with nothing to convert
// is written back byte for byte. Each member is decoded once, through
// layer.NewReader, within Options.Bounds; what follows data.tar's end is
// read (for the compression's checksums) up to layer.MaxTail bytes.
//
// The ar member headers are read by relobj.ParseArHeader, the reader of
// static archives' headers; relobj's archive reader itself takes a whole
// archive in memory, which a package's data.tar must not be.
package deb

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/cfi2sframe/cfi2sframe/convert"
	"github.com/cfi2sframe/cfi2sframe/internal/layer"
	"github.com/cfi2sframe/cfi2sframe/internal/relobj"
	"github.com/cfi2sframe/cfi2sframe/internal/tree"
)

// Magic starts every Debian binary package: an ar archive whose first
// member is debian-binary.
const Magic = relobj.ArchiveMagic + "debian-binary"

// Is says whether a file whose bytes start with head is a Debian package.
func Is(head []byte) bool { return bytes.HasPrefix(head, []byte(Magic)) }

const (
	controlBase = "control.tar"
	dataBase    = "data.tar"
	maxVersion  = 64 // the largest debian-binary member read
)

// Options configures Convert.
type Options struct {
	Convert convert.Options
	// Name names the package in errors (its path).
	Name    string
	TempDir string // temporary files; "" is os.TempDir()
	// Bounds limits what each member may expand to.
	Bounds layer.Bounds
}

// Error is a package that could not be converted: Member (and the file
// of its tar the error names) says where.
type Error struct {
	Package string // Options.Name
	Member  string // "" for the ar container itself
	Err     error
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.Package != "" {
		b.WriteString(e.Package + ": ")
	}
	if e.Member != "" {
		b.WriteString(e.Member + ": ")
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// member is one ar member: its header, as read, and where its data is.
type member struct {
	hdr       [relobj.ArHeaderSize]byte
	name      string // without padding or '/' terminator
	off, size int64  // its data in the input
}

// readMembers lists the members of the ar archive r of size bytes,
// checking each one's size against what the file holds.
func readMembers(r io.ReaderAt, size int64) ([]member, error) {
	var magic [len(relobj.ArchiveMagic)]byte
	if _, err := r.ReadAt(magic[:], 0); err != nil || string(magic[:]) != relobj.ArchiveMagic {
		return nil, errors.New("not an ar archive")
	}
	var ms []member
	for off := int64(len(magic)); off < size; {
		var m member
		n, err := r.ReadAt(m.hdr[:min(int64(len(m.hdr)), size-off)], off)
		if err != nil && err != io.EOF {
			return nil, err
		}
		name, msize, err := relobj.ParseArHeader(m.hdr[:n], size-off-int64(n))
		if err != nil {
			return nil, fmt.Errorf("member header at offset %d: %w", off, err)
		}
		m.name, m.off, m.size = strings.TrimSuffix(name, "/"), off+int64(n), msize
		ms = append(ms, m)
		off = m.off + msize + msize%2 // data is padded to an even offset
	}
	return ms, nil
}

// layout finds the members dpkg reads, as dpkg-deb does: debian-binary
// first, saying format 2.x, then the control member, then the data member.
func layout(r io.ReaderAt, ms []member) (control, data int, err error) {
	if len(ms) == 0 || ms[0].name != "debian-binary" {
		return 0, 0, errors.New("not a Debian package: debian-binary is not the first member")
	}
	if ms[0].size > maxVersion {
		return 0, 0, fmt.Errorf("debian-binary: %d bytes", ms[0].size)
	}
	v := make([]byte, ms[0].size)
	if _, err := r.ReadAt(v, ms[0].off); err != nil {
		return 0, 0, fmt.Errorf("debian-binary: %w", err)
	}
	if !bytes.HasPrefix(v, []byte("2.")) {
		return 0, 0, fmt.Errorf("debian-binary: format %q, not 2.x", strings.TrimSpace(string(v)))
	}
	control, data = -1, -1
	for i, m := range ms[1:] {
		switch {
		case strings.HasPrefix(m.name, controlBase):
			if control >= 0 || data >= 0 {
				return 0, 0, fmt.Errorf("%s: a second control member, or one after the data member", m.name)
			}
			control = i + 1
		case strings.HasPrefix(m.name, dataBase):
			if data >= 0 {
				return 0, 0, fmt.Errorf("%s: a second data member", m.name)
			}
			if control < 0 {
				return 0, 0, fmt.Errorf("%s: before the control member", m.name)
			}
			data = i + 1
		}
	}
	switch {
	case control < 0:
		return 0, 0, errors.New("no control.tar member")
	case data < 0:
		return 0, 0, errors.New("no data.tar member")
	}
	return control, data, nil
}

// Result is a package converted, to be written with Write.
type Result struct {
	Member string       // the data member ("data.tar.xz")
	Stats  *layer.Stats // what became of data.tar's files
	Sums   int          // md5sums lines given a new sum

	ctx           context.Context // Convert's, which Write heeds too
	in            io.ReaderAt
	size          int64
	members       []member
	control, data int          // their index in members
	newControl    *layer.Spool // nil: the control member is copied
	newData       *layer.Spool // nil: nothing converted
}

// Convert converts the ELF files of the Debian package r of size bytes.
// A package with nothing to convert is no error: Unchanged says why, and
// Write then writes it as it is. The error (an *Error) names the package,
// the member and the file inside. Once ctx is done, Convert and the
// result's Write stop with an error. Close the result.
func Convert(ctx context.Context, r io.ReaderAt, size int64, o Options) (_ *Result, err error) {
	res := &Result{ctx: ctx, in: r, size: size}
	wrap := func(member string, err error) error {
		if err == nil {
			return nil
		}
		return &Error{Package: o.Name, Member: member, Err: err}
	}
	if res.members, err = readMembers(r, size); err != nil {
		return nil, wrap("", err)
	}
	if res.control, res.data, err = layout(r, res.members); err != nil {
		return nil, wrap("", err)
	}
	cm, dm := res.members[res.control], res.members[res.data]
	cc, err := codecOf(cm.name, controlBase)
	if err != nil {
		return nil, wrap(cm.name, err)
	}
	dc, err := codecOf(dm.name, dataBase)
	if err != nil {
		return nil, wrap(dm.name, err)
	}
	res.Member = dm.name
	defer func() {
		if err != nil {
			res.Close()
		}
	}()
	res.newData, res.Stats, err = convertData(ctx, r, dm, dc, o)
	if err != nil {
		return nil, wrap(dm.name, err)
	}
	if !res.Stats.Changed() {
		res.newData.Close()
		res.newData = nil
		return res, nil
	}
	if res.newControl, res.Sums, err = updateSums(ctx, r, cm, cc, newSums(res.Stats), o); err != nil {
		return nil, wrap(cm.name, err)
	}
	return res, nil
}

// convertData converts the data member m of compression c into a
// temporary file, compressed as c is written.
func convertData(ctx context.Context, r io.ReaderAt, m member, c layer.Codec, o Options) (_ *layer.Spool, _ *layer.Stats, err error) {
	dec, err := layer.NewReader(ctx, c, io.NewSectionReader(r, m.off, m.size), m.size, o.Bounds)
	if err != nil {
		return nil, nil, err
	}
	defer dec.Close()
	out, err := layer.NewSpool(o.TempDir)
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if err != nil {
			out.Close()
		}
	}()
	enc, err := newEncoder(c, out, dec.GzipHeader(), 0)
	if err != nil {
		return nil, nil, err
	}
	st, err := layer.Convert(ctx, dec, enc, layer.Options{Convert: o.Convert, Sums: true, TempDir: o.TempDir})
	if err != nil {
		return nil, nil, err
	}
	// The rest of the stream (the tar's padding) is read to its end, so
	// that the compression's checksums are checked.
	if err := dec.Tail(io.Discard); err != nil {
		return nil, nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, nil, err
	}
	if err := out.Finish(); err != nil {
		return nil, nil, err
	}
	return out, st, nil
}

// Unchanged says why the package is left as it is: nothing in data.tar
// was converted ("" when something was).
func (r *Result) Unchanged() string {
	if r.newData != nil {
		return ""
	}
	var parts []string
	for _, oc := range tree.Outcomes {
		if n := r.Stats.Counts[oc]; n > 0 && oc != tree.NotELF {
			parts = append(parts, fmt.Sprintf("%d %s", n, oc))
		}
	}
	why := "no ELF file"
	if len(parts) > 0 {
		why = "ELF files: " + strings.Join(parts, ", ")
	}
	return fmt.Sprintf("nothing to convert in %s (%s)", r.Member, why)
}

// SFrameBytes is the size of the .sframe sections added.
func (r *Result) SFrameBytes() int {
	n := 0
	for _, f := range r.Stats.Files {
		n += f.SFrameBytes
	}
	return n
}

// Write writes the package: the input itself when Unchanged, else the
// members in their order with the new control and data members. It stops
// once the context given to Convert is done.
func (r *Result) Write(w io.Writer) error {
	if r.newData == nil {
		_, err := io.Copy(w, layer.Cancellable(r.ctx, io.NewSectionReader(r.in, 0, r.size)))
		return err
	}
	if _, err := io.WriteString(w, relobj.ArchiveMagic); err != nil {
		return err
	}
	for i, m := range r.members {
		h := m.hdr
		var body io.Reader = io.NewSectionReader(r.in, m.off, m.size)
		size := m.size
		switch {
		case i == r.data:
			body, size = r.newData.Reader(), r.newData.Size()
		case i == r.control && r.newControl != nil:
			body, size = r.newControl.Reader(), r.newControl.Size()
		}
		if err := relobj.SetArSize(h[:], size); err != nil {
			return fmt.Errorf("%s: %w", m.name, err)
		}
		if _, err := w.Write(h[:]); err != nil {
			return err
		}
		n, err := io.Copy(w, layer.Cancellable(r.ctx, body))
		if err != nil {
			return fmt.Errorf("%s: %w", m.name, err)
		}
		if n != size {
			return fmt.Errorf("%s: %d of %d bytes written", m.name, n, size)
		}
		if size%2 == 1 {
			if _, err := w.Write([]byte{'\n'}); err != nil {
				return err
			}
		}
	}
	return nil
}

// Close removes the temporary files.
func (r *Result) Close() error {
	if r.newData != nil {
		r.newData.Close()
	}
	if r.newControl != nil {
		r.newControl.Close()
	}
	return nil
}

// Packages converts the Debian packages of a tree (tree.Packager).
type Packages struct {
	TempDir string       // temporary files; "" is os.TempDir()
	Bounds  layer.Bounds // what each member may expand to
}

// Is says whether a file whose bytes start with head is a Debian package.
func (Packages) Is(head []byte) bool { return Is(head) }

// Convert converts the package name (Convert).
func (p Packages) Convert(ctx context.Context, name string, r io.ReaderAt, size int64, o convert.Options) (tree.Package, error) {
	res, err := Convert(ctx, r, size, Options{Convert: o, Name: name, TempDir: p.TempDir, Bounds: p.Bounds})
	if err != nil {
		return nil, err
	}
	return res, nil
}
