package rpm

import "io"

// pipeChunk is the size of the chunks a pipeWriter hands over; pipeDepth
// chunks wait at most, so a pipe holds at most (pipeDepth+2)×pipeChunk.
const (
	pipeChunk = 1 << 20
	pipeDepth = 4
)

// pipeWriter writes to w in a goroutine of its own, so that compressing
// the payload again (and hashing it) runs beside reading, decompressing
// and converting it, as `rpm2cpio | zstd` runs in two processes: on a
// package that is one large file, compression is most of the work, and
// done after the rest it would add to it instead of overlapping it. The
// bytes reach w in the order written. Close must be called; it returns
// the first error of w.
type pipeWriter struct {
	w     io.Writer
	buf   []byte
	full  chan []byte
	free  chan []byte
	done  chan struct{}
	err   error // w's first error, read after done or by the writer
	werr  chan error
	first error // the error Write returns once the writer failed
}

func newPipeWriter(w io.Writer) *pipeWriter {
	p := &pipeWriter{w: w, full: make(chan []byte, pipeDepth), free: make(chan []byte, pipeDepth+2),
		done: make(chan struct{}), werr: make(chan error, 1)}
	for range pipeDepth + 2 {
		p.free <- make([]byte, 0, pipeChunk)
	}
	p.buf = <-p.free
	go p.run()
	return p
}

// run writes the chunks handed over; after an error it only recycles
// them, so that Write never blocks forever.
func (p *pipeWriter) run() {
	defer close(p.done)
	var err error
	for b := range p.full {
		if err == nil {
			if _, err = p.w.Write(b); err != nil {
				p.werr <- err
			}
		}
		p.free <- b[:0]
	}
	p.err = err
}

func (p *pipeWriter) Write(b []byte) (int, error) {
	if p.first == nil {
		select {
		case p.first = <-p.werr:
		default:
		}
	}
	if p.first != nil {
		return 0, p.first
	}
	n := len(b)
	for len(b) > 0 {
		k := copy(p.buf[len(p.buf):cap(p.buf)], b)
		p.buf, b = p.buf[:len(p.buf)+k], b[k:]
		if len(p.buf) == cap(p.buf) {
			p.full <- p.buf
			p.buf = <-p.free
		}
	}
	return n, nil
}

// Close hands over what is left and waits for the writer.
func (p *pipeWriter) Close() error {
	if len(p.buf) > 0 {
		p.full <- p.buf
		p.buf = nil
	}
	close(p.full)
	<-p.done
	return p.err
}
