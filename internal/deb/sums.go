package deb

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/cfi2sframe/cfi2sframe/internal/layer"
	"github.com/cfi2sframe/cfi2sframe/internal/tree"
)

// maxSums is the largest md5sums read: 64 MiB, some 600,000 files.
const maxSums = 64 << 20

// sumName is a data.tar name ("./usr/bin/foo") as md5sums names it
// ("usr/bin/foo"), and the name of an md5sums line made alike.
func sumName(name string) string {
	return strings.TrimPrefix(path.Clean("/"+name), "/")
}

// newSums maps each converted file of data.tar, and each hard link to
// one, by its md5sums name, to the MD5 sum of its new content.
func newSums(st *layer.Stats) map[string][16]byte {
	sums := map[string][16]byte{}
	for _, f := range st.Files {
		if f.Outcome == tree.Converted {
			sums[sumName(f.Name)] = f.MD5
		}
	}
	for _, l := range st.Links {
		if s, ok := sums[sumName(l.Target)]; ok {
			sums[sumName(l.Name)] = s
		}
	}
	return sums
}

// patchSums gives each line of the md5sums b that names a file of sums
// that file's sum; it returns the new md5sums, of b's length, and the
// number of lines changed. Other lines, and lines it cannot read, stay
// as they are.
func patchSums(b []byte, sums map[string][16]byte) ([]byte, int) {
	out := bytes.Clone(b)
	changed := 0
	for rest := out; len(rest) > 0; {
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i], rest[i+1:]
		} else {
			rest = nil
		}
		// "SUM  NAME", or "SUM *NAME" (md5sum's binary mode).
		if len(line) < 35 || line[32] != ' ' || (line[33] != ' ' && line[33] != '*') {
			continue
		}
		if _, err := hex.Decode(make([]byte, 16), line[:32]); err != nil {
			continue
		}
		s, ok := sums[sumName(string(line[34:]))]
		if !ok {
			continue
		}
		sum := []byte(hex.EncodeToString(s[:]))
		if !bytes.Equal(sum, line[:32]) {
			copy(line, sum)
			changed++
		}
	}
	return out, changed
}

// counter counts the bytes read through it.
type counter struct {
	r io.Reader
	n int64
}

func (c *counter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// findSums reads the control tar stream r: where the bytes of its
// md5sums start, and them; then r to its end. Without an md5sums (sums
// nil) r is read to the tar's end only.
func findSums(r io.Reader) (off int64, sums []byte, err error) {
	cr := &counter{r: r}
	tr := tar.NewReader(cr)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return 0, nil, nil
		}
		if err != nil {
			return 0, nil, err
		}
		if hdr.Typeflag != tar.TypeReg || sumName(hdr.Name) != "md5sums" {
			continue
		}
		if hdr.Size > maxSums {
			return 0, nil, fmt.Errorf("%s: %d bytes, more than the %d read", hdr.Name, hdr.Size, maxSums)
		}
		// archive/tar reads no further than the header: the file's
		// bytes start here.
		off = cr.n
		if sums, err = io.ReadAll(tr); err != nil {
			return 0, nil, fmt.Errorf("%s: %w", hdr.Name, err)
		}
		if _, err := io.Copy(io.Discard, cr); err != nil {
			return 0, nil, err
		}
		return off, sums, nil
	}
}

// updateSums writes the control member m of compression c again with
// the lines of its md5sums that name a file of sums given that file's
// sum: a new member compressed as m is, every other byte of the tar
// stream kept (a sum keeps its length), and the number of lines changed.
// It returns nil when no line changes (or there is no md5sums).
//
// The member is decoded once: its tar stream is kept in a temporary file
// as md5sums is looked for, and compressed from there with the new
// md5sums (the encoder is sized by the stream's size, known only at its
// end).
func updateSums(ctx context.Context, r io.ReaderAt, m member, c layer.Codec, sums map[string][16]byte, o Options) (_ *layer.Spool, changed int, err error) {
	dec, err := layer.NewReader(ctx, c, io.NewSectionReader(r, m.off, m.size), m.size, o.Bounds)
	if err != nil {
		return nil, 0, err
	}
	defer dec.Close()
	stream, err := layer.NewSpool(o.TempDir)
	if err != nil {
		return nil, 0, err
	}
	defer stream.Close()
	off, old, err := findSums(io.TeeReader(dec, stream))
	if err != nil || old == nil {
		return nil, 0, err
	}
	patched, changed := patchSums(old, sums)
	if changed == 0 {
		return nil, 0, nil
	}
	if err := stream.Finish(); err != nil {
		return nil, 0, err
	}
	out, err := layer.NewSpool(o.TempDir)
	if err != nil {
		return nil, 0, err
	}
	defer func() {
		if err != nil {
			out.Close()
		}
	}()
	enc, err := newEncoder(c, out, dec.GzipHeader(), stream.Size())
	if err != nil {
		return nil, 0, err
	}
	// Written in three parts, the bytes before md5sums, the new md5sums,
	// the rest: zstd's encoder ends a block where a part starts, which
	// shows in its output, and an output keeps its bytes from one version
	// to the next.
	src := layer.Cancellable(ctx, stream.Reader())
	if _, err := io.CopyN(enc, src, off); err != nil {
		return nil, 0, err
	}
	if _, err := enc.Write(patched); err != nil {
		return nil, 0, err
	}
	if _, err := io.CopyN(io.Discard, src, int64(len(patched))); err != nil {
		return nil, 0, err
	}
	if _, err := io.Copy(enc, src); err != nil {
		return nil, 0, err
	}
	if err := enc.Close(); err != nil {
		return nil, 0, err
	}
	if err := out.Finish(); err != nil {
		return nil, 0, err
	}
	return out, changed, nil
}
