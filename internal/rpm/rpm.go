// Package rpm converts the ELF files of an RPM package and writes the
// package again, as rpm takes it: `rpm -K` finds its digests good and
// `rpm -V` finds its installed files as the header describes them.
//
// An RPM is a 96-byte lead, the signature header (padded to a multiple
// of 8 bytes), the main header and the payload, a cpio archive (new
// ASCII, or rpm's 07070X form when files exceed 4 GiB) compressed as
// PAYLOADCOMPRESSOR and PAYLOADFLAGS say. The payload is read as a
// stream through layer.NewReader (within Options.Bounds) and its ELF
// files converted one at a time, as internal/layer converts a tar
// stream's; every cpio header keeps its bytes but the size (and the
// 070702 checksum), every other entry its bytes. The payload is written
// again with its compressor at its level (gzip, xz, zstd or bzip2, whose
// writer is dsnet/compress's: see compress.go) into a temporary file,
// since the headers before it hold its digests.
//
// The lead is kept. The main header keeps every entry, in its order,
// with its type, count and bytes, but for the converted files' digests
// (FILEDIGESTS, in FILEDIGESTALGO's algorithm) and sizes (FILESIZES or
// LONGFILESIZES, the same for every hard link), the installed size
// (SIZE, LONGSIZE), the payload's sizes (ARCHIVESIZE, rpm 6's
// PAYLOADSIZE and PAYLOADSIZEALT) and digests (PAYLOADDIGEST of the
// compressed payload, PAYLOADDIGESTALT of the cpio archive, rpm 6's SHA-512 and SHA3-256
// ones). The signature header keeps its entries but its digests (SHA1,
// SHA256, SHA3_256 of the main header, MD5 of header and payload) and
// sizes (SIZE, LONGSIZE, PAYLOADSIZE, LONGARCHIVESIZE), made again, and
// its signatures (RSA, DSA, OPENPGP over the header, PGP and GPG over
// header and payload), which only their key's owner can make again: they
// are dropped, and Result.Dropped lists them. Files with an IMA or
// fs-verity signature are left as they are, as the tree form leaves
// signed files.
//
// The header reader and writer are this package's own: the Go RPM
// libraries (cavaliergopher/rpm, sassoftware/go-rpmutils, google/rpmpack)
// read a header into tags, or write one from tags, but none writes back
// a header it read with every entry's bytes, order and alignment, and
// only the values that changed.
package rpm

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/cfi2sframe/cfi2sframe/convert"
	"github.com/cfi2sframe/cfi2sframe/internal/layer"
	"github.com/cfi2sframe/cfi2sframe/internal/tree"
)

// leadMagic starts every RPM package; the lead is 96 bytes long.
var leadMagic = []byte{0xed, 0xab, 0xee, 0xdb}

const leadSize = 96

// Is says whether a file whose bytes start with head is an RPM package.
func Is(head []byte) bool { return bytes.HasPrefix(head, leadMagic) }

// Options configures Convert.
type Options struct {
	Convert convert.Options
	// Name names the package in errors (its path).
	Name    string
	TempDir string // temporary files; "" is os.TempDir()
	// Bounds limits what the payload may expand to.
	Bounds layer.Bounds
}

// Error is a package that could not be converted.
type Error struct {
	Package string // Options.Name
	Err     error
}

func (e *Error) Error() string {
	if e.Package == "" {
		return e.Err.Error()
	}
	return e.Package + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// Result is a package converted, to be written with Write.
type Result struct {
	Codec   layer.Codec  // the payload's compression
	Stats   *layer.Stats // what became of the payload's files
	Digests int          // FILEDIGESTS entries given a new digest
	Dropped []string     // the signatures dropped (RSA, PGP, ...)

	ctx     context.Context
	in      io.ReaderAt
	size    int64
	lead    []byte
	sig     []byte       // the signature header, padded
	main    []byte       // the main header
	payload *layer.Spool // nil: nothing converted
}

// Convert converts the ELF files of the RPM package r of size bytes. A
// package with nothing to convert is no error: Unchanged says why, and
// Write then writes it as it is. The error (an *Error) names the package
// and the file inside. Once ctx is done, Convert and the result's Write
// stop with an error. Close the result.
func Convert(ctx context.Context, r io.ReaderAt, size int64, o Options) (_ *Result, err error) {
	res := &Result{ctx: ctx, in: r, size: size}
	defer func() {
		if err != nil {
			res.Close()
			err = &Error{Package: o.Name, Err: err}
		}
	}()
	p, err := readPackage(r, size)
	if err != nil {
		return nil, err
	}
	res.lead, res.Codec = p.lead, p.comp.codec
	pl, err := convertPayload(ctx, r, size, p, o)
	if err != nil {
		return nil, err
	}
	res.Stats, res.payload = pl.stats, pl.out
	if len(pl.changed) == 0 {
		pl.out.Close()
		res.payload = nil
		return res, nil
	}
	if res.Digests, err = updateMain(p.main, p.files, pl); err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	res.main = p.main.Bytes()
	if res.Dropped, err = updateSig(p.sig, res.main, pl); err != nil {
		return nil, fmt.Errorf("signature header: %w", err)
	}
	res.sig = p.sig.Bytes()
	res.sig = append(res.sig, make([]byte, pad8(int64(len(res.sig))))...)
	return res, nil
}

// pkg is a package as read: its lead, headers and where its payload is.
type pkg struct {
	lead      []byte
	sig, main *Header
	files     *files
	comp      compression
	payload   int64 // its offset
}

// pad8 is the padding after the signature header.
func pad8(n int64) int { return int((8 - n%8) % 8) }

// readPackage reads the lead and both headers of the package r.
func readPackage(r io.ReaderAt, size int64) (*pkg, error) {
	p := &pkg{lead: make([]byte, leadSize)}
	if _, err := r.ReadAt(p.lead, 0); err != nil || !Is(p.lead) {
		return nil, errors.New("not an RPM package (no lead)")
	}
	if v := p.lead[4]; v != 3 && v != 4 {
		return nil, fmt.Errorf("RPM format %d, not 3 or 4", v)
	}
	sig, n, err := readHeader(r, leadSize, size, true)
	if err != nil {
		return nil, fmt.Errorf("signature %w", err)
	}
	if sig.Entries[0].Tag != tagHeaderSignatures {
		return nil, fmt.Errorf("signature header: region tag %d", sig.Entries[0].Tag)
	}
	off := leadSize + n + int64(pad8(n))
	main, n, err := readHeader(r, off, size, false)
	if err != nil {
		return nil, err
	}
	if main.Entries[0].Tag != tagHeaderImmutable {
		return nil, fmt.Errorf("header: region tag %d", main.Entries[0].Tag)
	}
	p.sig, p.main, p.payload = sig, main, off+n
	if p.files, err = readFiles(main, sig); err != nil {
		return nil, err
	}
	if p.comp, err = compressionOf(main); err != nil {
		return nil, err
	}
	return p, nil
}

// payload is a payload converted: its bytes, sizes and digests.
type payload struct {
	out          *layer.Spool
	stats        *layer.Stats
	changed      map[int]fileChange
	size, usize  int64                // compressed and not
	digest, udig map[uint64]hash.Hash // by algorithm
}

// payloadDigest is a digest of the payload the main header holds.
type payloadDigest struct {
	tag  uint32
	algo uint64
	cpio bool // of the cpio archive, not of the compressed payload
}

// payloadDigests lists the payload digests h holds: PAYLOADDIGEST(ALT)
// in PAYLOADDIGESTALGO's algorithm (SHA-256 when absent), rpm 6's
// SHA-512 and SHA3-256 ones. Only those are computed: hashing a large
// payload with all three would cost more than compressing it.
func payloadDigests(h *Header) []payloadDigest {
	algo := uint64(hashSHA256)
	if a, ok := h.Ints(tagPayloadDigestAlgo); ok && len(a) == 1 {
		algo = a[0]
	}
	var ds []payloadDigest
	for _, d := range []payloadDigest{
		{tagPayloadDigest, algo, false}, {tagPayloadDigestAlt, algo, true},
		{tagPayloadSHA512, hashSHA512, false}, {tagPayloadSHA512Alt, hashSHA512, true},
		{tagPayloadSHA3_256, hashSHA3_256, false}, {tagPayloadSHA3Alt, hashSHA3_256, true},
	} {
		if h.Find(d.tag) != nil {
			ds = append(ds, d)
		}
	}
	return ds
}

// convertPayload converts the payload of p into a temporary file,
// compressed as it was, and hashes it (compressed and not).
func convertPayload(ctx context.Context, r io.ReaderAt, size int64, p *pkg, o Options) (_ *payload, err error) {
	csize := size - p.payload
	dec, err := layer.NewReader(ctx, p.comp.codec, io.NewSectionReader(r, p.payload, csize), csize, o.Bounds)
	if err != nil {
		return nil, fmt.Errorf("payload: %w", err)
	}
	defer dec.Close()
	dec.ReadAhead()
	pl := &payload{digest: map[uint64]hash.Hash{}, udig: map[uint64]hash.Hash{}}
	for _, d := range payloadDigests(p.main) {
		m := pl.digest
		if d.cpio {
			m = pl.udig
		}
		if m[d.algo] != nil {
			continue
		}
		if m[d.algo], err = newHash(d.algo); err != nil {
			return nil, fmt.Errorf("payload digest: %w", err)
		}
	}
	if pl.out, err = layer.NewSpool(o.TempDir); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			pl.out.Close()
		}
	}()
	cw := &counter{w: io.MultiWriter(pl.out, multi(pl.digest))}
	enc, err := newEncoder(p.comp, cw, dec.GzipHeader(), 0)
	if err != nil {
		return nil, err
	}
	pipe := newPipeWriter(enc)
	piped := false
	defer func() {
		if !piped {
			pipe.Close()
		}
	}()
	// The cpio archive is hashed here, the compressed payload by the
	// pipe's goroutine, which compressing keeps busiest.
	uw := &counter{w: io.MultiWriter(pipe, multi(pl.udig))}
	co := cpioOptions{Convert: o.Convert, TempDir: o.TempDir}
	if pl.stats, pl.changed, err = convertCPIO(ctx, dec, uw, p.files, co); err != nil {
		return nil, fmt.Errorf("payload: %w", err)
	}
	// What follows the trailer is kept, and read to the end so that the
	// compression's checksums are checked.
	if err := dec.Tail(uw); err != nil {
		return nil, fmt.Errorf("payload: %w", err)
	}
	piped = true
	if err := pipe.Close(); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	if err := pl.out.Finish(); err != nil {
		return nil, err
	}
	pl.size, pl.usize = cw.n, uw.n
	return pl, nil
}

func multi(hs map[uint64]hash.Hash) io.Writer {
	var ws []io.Writer
	for _, h := range hs {
		ws = append(ws, h)
	}
	return io.MultiWriter(ws...)
}

// counter counts what is written through it.
type counter struct {
	w io.Writer
	n int64
}

func (c *counter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// updateMain gives the main header the converted files' digests and
// sizes, the installed size and the payload's sizes and digests; n is
// the number of file digests changed.
func updateMain(h *Header, fs *files, pl *payload) (n int, err error) {
	idx := make([]int, 0, len(pl.changed))
	for i := range pl.changed {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	digests, sizes := slices.Clone(fs.digest), slices.Clone(fs.sizes)
	var delta int64
	for _, i := range idx {
		ch := pl.changed[i]
		if fs.hasDig && digests[i] != ch.digest {
			if len(digests[i]) != len(ch.digest) {
				return 0, fmt.Errorf("%s: digest %q is not of algorithm %d", fs.names[i], digests[i], fs.algo)
			}
			digests[i] = ch.digest
			n++
		}
		// A hard link set counts once in the installed size, as rpmbuild
		// counts it.
		if s := fs.links[i]; len(s) == 0 || s[0] == i {
			delta += int64(ch.size) - int64(sizes[i])
		}
		sizes[i] = ch.size
	}
	if fs.hasDig {
		if err := h.Set(tagFileDigests, encodeStrings(digests)); err != nil {
			return 0, err
		}
	}
	sizeTag := uint32(tagFileSizes)
	if fs.long {
		sizeTag = tagLongFileSizes
	}
	if err := setInts(h, sizeTag, sizes); err != nil {
		return 0, err
	}
	for _, t := range []uint32{tagSize, tagLongSize} {
		if err := addInt(h, t, delta); err != nil {
			return 0, err
		}
	}
	for t, v := range map[uint32]int64{tagArchiveSize: pl.usize, tagPayloadSize: pl.size, tagPayloadSizeAlt: pl.usize} {
		if err := setInt(h, t, v); err != nil {
			return 0, err
		}
	}
	return n, setPayloadDigests(h, pl)
}

// setPayloadDigests gives the main header the payload's digests, of the
// compressed payload and of the cpio archive, in hex.
func setPayloadDigests(h *Header, pl *payload) error {
	for _, d := range payloadDigests(h) {
		of := pl.digest
		if d.cpio {
			of = pl.udig
		}
		e := h.Find(d.tag)
		v := encodeStrings([]string{hex.EncodeToString(of[d.algo].Sum(nil))})
		if e.Count != 1 || len(v) != len(e.Value) {
			return fmt.Errorf("tag %d: %d values, %d bytes: not one digest of algorithm %d", d.tag, e.Count, len(e.Value), d.algo)
		}
		if err := h.Set(d.tag, v); err != nil {
			return err
		}
	}
	return nil
}

// setInts sets an integer entry of 32 or 64 bits.
func setInts(h *Header, tag uint32, vs []uint64) error {
	e := h.Find(tag)
	if e == nil {
		return nil
	}
	v, err := encodeInts(e.Type, vs)
	if err != nil {
		return fmt.Errorf("tag %d: %w", tag, err)
	}
	return h.Set(tag, v)
}

// setInt sets a single integer entry, when there is one.
func setInt(h *Header, tag uint32, v int64) error {
	if v < 0 {
		return fmt.Errorf("tag %d: a negative size", tag)
	}
	return setInts(h, tag, []uint64{uint64(v)})
}

// addInt adds delta to a single integer entry, when there is one.
func addInt(h *Header, tag uint32, delta int64) error {
	vs, ok := h.Ints(tag)
	if !ok || len(vs) != 1 {
		return nil
	}
	return setInt(h, tag, int64(vs[0])+delta)
}

// updateSig drops the signature header's signatures and makes its
// digests and sizes again for the main header main and the payload.
func updateSig(sig *Header, main []byte, pl *payload) (dropped []string, err error) {
	for _, t := range sig.Delete(func(t uint32) bool { _, ok := signatureTags[t]; return ok }) {
		dropped = append(dropped, signatureTags[t])
	}
	for t, algo := range map[uint32]uint64{sigSHA1: hashSHA1, sigSHA256: hashSHA256, sigSHA3_256: hashSHA3_256} {
		if sig.Find(t) == nil {
			continue
		}
		d, _ := newHash(algo)
		d.Write(main)
		if err := sig.Set(t, encodeStrings([]string{hex.EncodeToString(d.Sum(nil))})); err != nil {
			return nil, err
		}
	}
	total := int64(len(main)) + pl.size
	for t, v := range map[uint32]int64{sigSize: total, sigLongSize: total, sigPayloadSize: pl.usize, sigLongArchiveSize: pl.usize} {
		if err := setInt(sig, t, v); err != nil {
			return nil, err
		}
	}
	if sig.Find(sigMD5) != nil {
		d := md5.New()
		d.Write(main)
		if _, err := io.Copy(d, pl.out.Reader()); err != nil {
			return nil, err
		}
		if err := sig.Set(sigMD5, d.Sum(nil)); err != nil {
			return nil, err
		}
	}
	return dropped, nil
}

// Unchanged says why the package is left as it is: nothing in the
// payload was converted ("" when something was).
func (r *Result) Unchanged() string {
	if r.payload != nil {
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
	return fmt.Sprintf("nothing to convert in the payload (%s)", why)
}

// SFrameBytes is the size of the .sframe sections added.
func (r *Result) SFrameBytes() int {
	n := 0
	for _, f := range r.Stats.Files {
		n += f.SFrameBytes
	}
	return n
}

// Warning says what a user must do again: sign the package, when its
// signatures were dropped ("" when none were).
func (r *Result) Warning() string {
	if len(r.Dropped) == 0 {
		return ""
	}
	return fmt.Sprintf("signatures dropped (%s: the header changed); sign again with rpmsign --addsign", strings.Join(r.Dropped, ", "))
}

// Write writes the package: the input itself when Unchanged, else the
// lead, the new headers and the new payload. It stops once the context
// given to Convert is done.
func (r *Result) Write(w io.Writer) error {
	if r.payload == nil {
		_, err := io.Copy(w, layer.Cancellable(r.ctx, io.NewSectionReader(r.in, 0, r.size)))
		return err
	}
	for _, b := range [][]byte{r.lead, r.sig, r.main} {
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	n, err := io.Copy(w, layer.Cancellable(r.ctx, r.payload.Reader()))
	if err != nil {
		return err
	}
	if n != r.payload.Size() {
		return fmt.Errorf("payload: %d of %d bytes written", n, r.payload.Size())
	}
	return nil
}

// Close removes the temporary files.
func (r *Result) Close() error {
	if r.payload != nil {
		r.payload.Close()
	}
	return nil
}

// Packages converts the RPM packages of a tree (tree.Packager).
type Packages struct {
	TempDir string       // temporary files; "" is os.TempDir()
	Bounds  layer.Bounds // what each payload may expand to
}

// Is says whether a file whose bytes start with head is an RPM package.
func (Packages) Is(head []byte) bool { return Is(head) }

// Convert converts the package name (Convert).
func (p Packages) Convert(ctx context.Context, name string, r io.ReaderAt, size int64, o convert.Options) (tree.Package, error) {
	res, err := Convert(ctx, r, size, Options{Convert: o, Name: name, TempDir: p.TempDir, Bounds: p.Bounds})
	if err != nil {
		return nil, err
	}
	return res, nil
}
