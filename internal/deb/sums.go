package deb

import (
	"archive/tar"
	"bytes"
	"encoding/hex"
	"errors"
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

// findSums reads the control member m of compression c: its md5sums,
// where its bytes start in the tar stream (nil if it has none), and the
// stream's size.
func findSums(r io.ReaderAt, m member, c codec) (off int64, sums []byte, size int64, err error) {
	dec, err := newDecoder(c, io.NewSectionReader(r, m.off, m.size))
	if err != nil {
		return 0, nil, 0, err
	}
	defer dec.close()
	cr := &counter{r: dec}
	tr := tar.NewReader(cr)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return 0, nil, 0, nil
		}
		if err != nil {
			return 0, nil, 0, err
		}
		if hdr.Typeflag != tar.TypeReg || sumName(hdr.Name) != "md5sums" {
			continue
		}
		if hdr.Size > maxSums {
			return 0, nil, 0, fmt.Errorf("%s: %d bytes, more than the %d read", hdr.Name, hdr.Size, maxSums)
		}
		// archive/tar reads no further than the header: the file's
		// bytes start here.
		off = cr.n
		if sums, err = io.ReadAll(tr); err != nil {
			return 0, nil, 0, fmt.Errorf("%s: %w", hdr.Name, err)
		}
		if _, err := io.Copy(io.Discard, cr); err != nil {
			return 0, nil, 0, err
		}
		return off, sums, cr.n, nil
	}
}

// updateSums writes the control member m of compression c again with
// the lines of its md5sums that name a file of sums given that file's
// sum: a new member compressed as m is, every other byte of the tar
// stream kept (a sum keeps its length), and the number of lines changed.
// It returns nil when no line changes (or there is no md5sums).
func updateSums(r io.ReaderAt, m member, c codec, sums map[string][16]byte, tempDir string) (_ *spool, changed int, err error) {
	off, old, size, err := findSums(r, m, c)
	if err != nil || old == nil {
		return nil, 0, err
	}
	patched, changed := patchSums(old, sums)
	if changed == 0 {
		return nil, 0, nil
	}
	dec, err := newDecoder(c, io.NewSectionReader(r, m.off, m.size))
	if err != nil {
		return nil, 0, err
	}
	defer dec.close()
	out, err := newSpool(tempDir)
	if err != nil {
		return nil, 0, err
	}
	defer func() {
		if err != nil {
			out.close()
		}
	}()
	enc, err := newEncoder(c, out, dec, size)
	if err != nil {
		return nil, 0, err
	}
	if _, err := io.CopyN(enc, dec, off); err != nil {
		return nil, 0, err
	}
	again := make([]byte, len(old))
	if _, err := io.ReadFull(dec, again); err != nil {
		return nil, 0, err
	}
	if !bytes.Equal(again, old) {
		return nil, 0, errors.New("md5sums read differently the second time")
	}
	if _, err := enc.Write(patched); err != nil {
		return nil, 0, err
	}
	if _, err := io.Copy(enc, dec); err != nil {
		return nil, 0, err
	}
	if err := enc.Close(); err != nil {
		return nil, 0, err
	}
	if err := out.finish(); err != nil {
		return nil, 0, err
	}
	return out, changed, nil
}
