package layer

import "io"

// aheadChunk and aheadDepth size a Reader's read-ahead: at most
// aheadDepth+1 chunks decompressed and not yet read.
const (
	aheadChunk = 1 << 20
	aheadDepth = 3
)

// ReadAhead makes the Reader decompress on a goroutine of its own, up to
// a few megabytes ahead of Read, so that decompressing overlaps what the
// caller does with the bytes: a package's payload is written to a
// temporary file, converted and compressed again while the next bytes
// are decompressed, as `rpm2cpio | zstd` overlaps its two processes.
// The bounds hold as before (what is read ahead is bounded too); Close
// stops the goroutine. Call it before the first Read.
func (d *Reader) ReadAhead() {
	a := &ahead{chunks: make(chan aheadRead, aheadDepth), free: make(chan []byte, aheadDepth+2),
		done: make(chan struct{}), exited: make(chan struct{})}
	for range aheadDepth + 2 {
		a.free <- make([]byte, aheadChunk)
	}
	go a.run(d.dec)
	d.dec = a
	prev := d.close
	d.close = func() {
		close(a.done)
		<-a.exited // the decoder is not in use when it is closed
		prev()
	}
}

// ahead hands over what its goroutine decompressed, in order.
type ahead struct {
	chunks       chan aheadRead
	free         chan []byte
	done, exited chan struct{}
	cur, last    []byte // what is left of the chunk being read; that chunk
	err          error  // the decoder's error, after the last chunk
}

type aheadRead struct {
	b   []byte
	err error
}

// run fills chunks from r until r fails (io.EOF included) or Close.
func (a *ahead) run(r io.Reader) {
	defer close(a.exited)
	for {
		var b []byte
		select {
		case b = <-a.free:
		case <-a.done:
			return
		}
		n := 0
		var err error
		for n < len(b) && err == nil {
			var k int
			k, err = r.Read(b[n:])
			n += k
		}
		select {
		case a.chunks <- aheadRead{b[:n], err}:
		case <-a.done:
			return
		}
		if err != nil {
			return
		}
	}
}

func (a *ahead) Read(p []byte) (int, error) {
	for len(a.cur) == 0 {
		if a.err != nil {
			return 0, a.err
		}
		if a.last != nil {
			a.free <- a.last[:cap(a.last)]
			a.last = nil
		}
		c := <-a.chunks
		a.cur, a.last, a.err = c.b, c.b, c.err
	}
	n := copy(p, a.cur)
	a.cur = a.cur[n:]
	return n, nil
}
