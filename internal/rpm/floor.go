package rpm

import (
	"context"
	"fmt"
	"io"

	"github.com/cfi2sframe/cfi2sframe/internal/layer"
)

// Recompress decompresses the payload of the package r and compresses it
// again as Convert does (the same decoder, read ahead, and encoder,
// codec and level, the same pipe between them), writing it to w: nothing
// is converted or hashed. It is the floor bench/rpm.sh holds Convert to,
// the least any tool that rewrites a payload with these libraries must
// do.
func Recompress(ctx context.Context, r io.ReaderAt, size int64, w io.Writer, o Options) error {
	p, err := readPackage(r, size)
	if err != nil {
		return err
	}
	csize := size - p.payload
	dec, err := layer.NewReader(ctx, p.comp.codec, io.NewSectionReader(r, p.payload, csize), csize, o.Bounds)
	if err != nil {
		return fmt.Errorf("payload: %w", err)
	}
	defer dec.Close()
	dec.ReadAhead()
	enc, err := newEncoder(p.comp, w, dec.GzipHeader(), 0)
	if err != nil {
		return err
	}
	pipe := newPipeWriter(enc)
	if _, err := io.Copy(pipe, dec); err != nil {
		pipe.Close()
		return fmt.Errorf("payload: %w", err)
	}
	if err := pipe.Close(); err != nil {
		return err
	}
	return enc.Close()
}
