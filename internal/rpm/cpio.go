package rpm

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"strconv"

	"github.com/cfi2sframe/cfi2sframe/convert"
	"github.com/cfi2sframe/cfi2sframe/internal/layer"
	"github.com/cfi2sframe/cfi2sframe/internal/relobj"
	"github.com/cfi2sframe/cfi2sframe/internal/tree"
)

// The cpio forms rpm writes: "new ASCII" (070701), the same with a
// checksum (070702, which rpm reads), and rpm's own 07070X for packages
// with files over 4 GiB, whose header holds only the file's index in
// the main header, where everything else about the file is.
const (
	magicNewc     = "070701"
	magicCRC      = "070702"
	magicStripped = "07070X"
	cpioTrailer   = "TRAILER!!!"
	newcSize      = 110 // magic and 13 fields of 8 hex digits
	strippedSize  = 14  // magic and the index
	maxName       = 4096
	// Field offsets in a new ASCII header.
	offFileSize = 54
	offNameSize = 94
	offCheck    = 102
)

// fileChange is a file of the payload whose content changed.
type fileChange struct {
	size   uint64
	digest string // hex, in the package's file digest algorithm
}

// cpioOptions configures convertCPIO.
type cpioOptions struct {
	Convert  convert.Options
	TempDir  string
	InMemory int64 // the largest file converted in memory
}

// cpioConverter copies a payload's cpio stream, converting its ELF files.
type cpioConverter struct {
	ctx     context.Context
	o       cpioOptions
	files   *files
	r       io.Reader
	w       io.Writer
	st      *layer.Stats
	changed map[int]fileChange // by file index
}

// convertCPIO copies the cpio stream r to w up to its trailer (included),
// converting the ELF files: each entry keeps its header but the size
// (and the 070702 checksum) and every other entry its bytes. fs is the
// header's file list, which gives the 07070X entries' sizes, the files'
// signatures and hard links; changed lists the files converted, by
// index.
func convertCPIO(ctx context.Context, r io.Reader, w io.Writer, fs *files, o cpioOptions) (*layer.Stats, map[int]fileChange, error) {
	if o.InMemory <= 0 {
		o.InMemory = layer.DefaultInMemory
	}
	c := &cpioConverter{ctx: ctx, o: o, files: fs, r: r, w: w,
		st: &layer.Stats{Counts: map[tree.Outcome]int{}}, changed: map[int]fileChange{}}
	for {
		if err := ctx.Err(); err != nil {
			return c.st, nil, context.Cause(ctx)
		}
		done, err := c.entry()
		if err != nil {
			return c.st, nil, err
		}
		if done {
			return c.st, c.changed, nil
		}
	}
}

// entryHead is one entry's header as read.
type entryHead struct {
	raw   []byte // the header, its name and their padding
	name  string // "" in the 07070X form
	fx    int    // the file's index in the main header
	size  int64  // its data's size
	check bool   // 070702: the header holds the data's checksum
}

// entry copies or converts the next entry; done is the trailer.
func (c *cpioConverter) entry() (done bool, err error) {
	h, done, err := c.readHead()
	if err != nil || done {
		if err == nil {
			_, err = c.w.Write(h.raw)
		}
		return done, err
	}
	c.st.Entries++
	fx := h.fx
	if !c.files.regular(fx) || h.size == 0 {
		return false, c.pass(h, nil)
	}
	var magic [8]byte
	head := magic[:min(int64(len(magic)), h.size)]
	if _, err := io.ReadFull(c.r, head); err != nil {
		return false, c.fail(h, noEOF(err))
	}
	elfLike := bytes.HasPrefix(head, []byte("\x7fELF")) || bytes.HasPrefix(head, []byte(relobj.ArchiveMagic))
	switch {
	case !elfLike:
		c.st.Counts[tree.NotELF]++
		return false, c.pass(h, head)
	case c.files.signed[fx] != "":
		c.st.Counts[tree.Signed]++
		return false, c.pass(h, head)
	}
	return false, c.convert(h, head)
}

// readHead reads an entry's header; done is the trailer's.
func (c *cpioConverter) readHead() (h entryHead, done bool, err error) {
	var magic [6]byte
	if _, err := io.ReadFull(c.r, magic[:]); err != nil {
		return h, false, fmt.Errorf("cpio: %w", noEOF(err))
	}
	switch string(magic[:]) {
	case magicStripped:
		h.raw = make([]byte, strippedSize+2)
		copy(h.raw, magic[:])
		if _, err := io.ReadFull(c.r, h.raw[6:]); err != nil {
			return h, false, fmt.Errorf("cpio: %w", noEOF(err))
		}
		fx, err := hexField(h.raw[6:14])
		if err != nil {
			return h, false, fmt.Errorf("cpio: 07070X header: %w", err)
		}
		if fx == 0xffffffff {
			return h, true, nil
		}
		if fx >= uint64(len(c.files.names)) {
			return h, false, fmt.Errorf("cpio: file index %d of %d files", fx, len(c.files.names))
		}
		h.fx, h.size = int(fx), int64(c.files.payloadSize(int(fx)))
		return h, false, nil
	case magicNewc, magicCRC:
		h.check = string(magic[:]) == magicCRC
		return c.readNewc(h, magic[:])
	}
	return h, false, fmt.Errorf("cpio: bad magic %q", magic[:])
}

// readNewc reads the rest of a new ASCII header, its name and padding.
func (c *cpioConverter) readNewc(h entryHead, magic []byte) (entryHead, bool, error) {
	var fixed [newcSize]byte
	copy(fixed[:], magic)
	if _, err := io.ReadFull(c.r, fixed[6:]); err != nil {
		return h, false, fmt.Errorf("cpio: %w", noEOF(err))
	}
	for off := 6; off < newcSize; off += 8 {
		if _, err := hexField(fixed[off : off+8]); err != nil {
			return h, false, fmt.Errorf("cpio: header field at %d: %w", off, err)
		}
	}
	size, _ := hexField(fixed[offFileSize : offFileSize+8])
	nameSize, _ := hexField(fixed[offNameSize : offNameSize+8])
	if nameSize < 1 || nameSize > maxName {
		return h, false, fmt.Errorf("cpio: a name of %d bytes", nameSize)
	}
	total := newcSize + int(nameSize)
	h.raw = make([]byte, total+pad4(int64(total)))
	copy(h.raw, fixed[:])
	if _, err := io.ReadFull(c.r, h.raw[newcSize:]); err != nil {
		return h, false, fmt.Errorf("cpio: %w", noEOF(err))
	}
	name := h.raw[newcSize:total]
	if name[len(name)-1] != 0 {
		return h, false, errors.New("cpio: an unterminated name")
	}
	h.name, h.size = string(name[:len(name)-1]), int64(size)
	if h.name == cpioTrailer {
		return h, true, nil
	}
	fx, err := c.files.index(h.name)
	if err != nil {
		return h, false, fmt.Errorf("cpio: %s: %w", h.name, err)
	}
	h.fx = fx
	// rpm reads as much data as the header says the file has, whatever
	// the cpio header says: they must agree for the stream to be read.
	if want := c.files.payloadSize(fx); uint64(h.size) != want {
		return h, false, fmt.Errorf("cpio: %s: %d bytes, the header says %d", h.name, h.size, want)
	}
	return h, false, nil
}

// hexField parses an 8-digit hexadecimal field.
func hexField(p []byte) (uint64, error) {
	v, err := strconv.ParseUint(string(p), 16, 32)
	if err != nil || len(p) != 8 {
		return 0, fmt.Errorf("%q is not 8 hexadecimal digits", p)
	}
	return v, nil
}

// pad4 is the padding after n bytes to a multiple of 4.
func pad4(n int64) int { return int((4 - n%4) % 4) }

// name is how errors and stats call an entry.
func (c *cpioConverter) name(h entryHead) string {
	if h.name != "" {
		return h.name
	}
	return c.files.names[h.fx]
}

func (c *cpioConverter) fail(h entryHead, err error) error {
	return &layer.Error{Stream: "payload", File: c.name(h), Err: err}
}

// pass copies an entry as it is: its header, the head of its data
// already read, the rest and its padding.
func (c *cpioConverter) pass(h entryHead, head []byte) error {
	if _, err := c.w.Write(h.raw); err != nil {
		return err
	}
	if _, err := c.w.Write(head); err != nil {
		return err
	}
	rest := h.size - int64(len(head)) + int64(pad4(h.size))
	if _, err := io.CopyN(c.w, layer.Cancellable(c.ctx, c.r), rest); err != nil {
		return c.fail(h, noEOF(err))
	}
	return nil
}

// convert converts a regular ELF file (or archive) and writes it, or
// passes it through when there is nothing to convert.
func (c *cpioConverter) convert(h entryHead, head []byte) error {
	in, err := layer.ReadBlob(c.ctx, c.name(h), head, c.r, h.size, c.o.InMemory, c.o.TempDir)
	if err != nil {
		return c.fail(h, err)
	}
	defer in.Close()
	out, res, err := layer.ConvertBlob(in, c.o.Convert, c.o.TempDir)
	oc := tree.Classify(err)
	if err == nil && out == nil {
		oc = tree.NoCFI
	}
	c.st.Counts[oc]++
	f := layer.File{Name: c.name(h), Outcome: oc, Size: h.size}
	switch oc {
	case tree.Converted:
		defer out.Close()
	case tree.Failed:
		f.Error = c.fail(h, err).Error()
		c.st.Files = append(c.st.Files, f)
		return c.fail(h, err)
	default:
		return c.writeEntry(h, in, nil)
	}
	if h.name == "" && !c.files.long {
		return c.fail(h, errors.New("a 07070X entry without 64-bit sizes"))
	}
	if h.name != "" && out.Size() > 0xffffffff {
		return c.fail(h, fmt.Errorf("converted to %d bytes, over the 4 GiB a cpio header holds", out.Size()))
	}
	dig, err := newHash(c.files.algo)
	if err != nil {
		return c.fail(h, fmt.Errorf("file digests: %w", err))
	}
	if err := c.writeEntry(h, out, dig); err != nil {
		return err
	}
	ch := fileChange{size: uint64(out.Size()), digest: hex.EncodeToString(dig.Sum(nil))}
	c.changed[h.fx] = ch
	for _, l := range c.files.links[h.fx] {
		c.changed[l] = ch
	}
	f.NewSize, f.SFrameBytes = out.Size(), len(res.SFrame)
	c.st.Files = append(c.st.Files, f)
	return nil
}

// writeEntry writes h with the data b and the padding after it; when b
// is new data (dig, its file digest, is given), the header's size (and
// checksum, in a 070702 header) are made b's, and b is hashed into dig
// as it is written (a large file is read once).
func (c *cpioConverter) writeEntry(h entryHead, b *layer.Blob, dig hash.Hash) error {
	changed := dig != nil
	raw := bytes.Clone(h.raw)
	if changed && h.name != "" {
		copy(raw[offFileSize:], fmt.Sprintf("%08x", b.Size()))
		if h.check {
			sum := &byteSum{}
			if err := b.CopyTo(c.ctx, sum); err != nil {
				return err
			}
			copy(raw[offCheck:], fmt.Sprintf("%08x", sum.n))
		}
	}
	if _, err := c.w.Write(raw); err != nil {
		return err
	}
	data := c.w
	if changed {
		data = io.MultiWriter(c.w, dig)
	}
	if err := b.CopyTo(c.ctx, data); err != nil {
		return err
	}
	// The input's padding is copied, or dropped for zeros after new data.
	var dst io.Writer = c.w
	if changed {
		var zero [4]byte
		if _, err := c.w.Write(zero[:pad4(b.Size())]); err != nil {
			return err
		}
		dst = io.Discard
	}
	_, err := io.CopyN(dst, c.r, int64(pad4(h.size)))
	return noEOF(err)
}

// byteSum is the 070702 checksum: the sum of the data's bytes.
type byteSum struct{ n uint32 }

func (s *byteSum) Write(p []byte) (int, error) {
	for _, b := range p {
		s.n += uint32(b)
	}
	return len(p), nil
}
