package elfwrite

import (
	"fmt"
	"io"
	"os"
)

// Run is a range of output bytes that are a copy of input bytes: Size
// bytes at output offset Off are the input's bytes at Src.
type Run struct{ Off, Src, Size uint64 }

// EarlyRuns returns the runs WriteFile would copy file to file that end
// before the .sframe data. In both layouts nothing in front of the
// section depends on its size (the new segment's place follows from the
// loaded image, and only what comes after the section moves with its
// size), so a plan made for any size, size 0 included, gives the runs the
// final plan copies too, and they can be copied while the section is
// still being encoded. WriteFileAfter checks that instead of trusting it:
// it writes again whatever the final plan does not copy identically.
func (p *Plan) EarlyRuns() []Run {
	var out []Run
	for _, c := range p.cleanRuns() {
		if c.off+c.size <= p.Offset {
			out = append(out, Run{Off: c.off, Src: c.src, Size: c.size})
		}
	}
	return out
}

// CopyRuns copies runs from the input file src to the output file dst,
// file to file (copy_file_range), each to its output offset. Both files'
// offsets move; nothing else may use them meanwhile. Each run's blocks are
// allocated before it is copied (see reserve).
func CopyRuns(dst, src *os.File, runs []Run) error {
	for _, r := range runs {
		if err := copyRun(dst, src, r.Off, r.Src, r.Size); err != nil {
			return err
		}
	}
	return nil
}

// copyRun copies size bytes at input offset srcOff to output offset off.
func copyRun(dst, src *os.File, off, srcOff, size uint64) error {
	if _, err := dst.Seek(int64(off), io.SeekStart); err != nil {
		return err
	}
	reserve(dst, off, size)
	if _, err := src.Seek(int64(srcOff), io.SeekStart); err != nil {
		return err
	}
	n, err := io.Copy(dst, &io.LimitedReader{R: src, N: int64(size)})
	if err != nil {
		return err
	}
	if uint64(n) != size {
		return fmt.Errorf("input file shrank while it was copied (%d of %d bytes at %#x)", n, size, srcOff)
	}
	return nil
}

// WriteFileAfter is WriteFile for a new output file (empty when CopyRuns
// began) in which CopyRuns has already copied done (from the same input
// file): it writes the whole
// output from offset 0 except the runs of done that this plan copies
// unchanged from the same input bytes, which are already in place, and
// truncates dst to the output's size. A run of done that this plan does
// not copy as it is (a different place, source or length, or a patch over
// it) is simply written again, so the result never depends on the early
// plan having been right. Zeros the file holds already (it was empty:
// whatever was not written reads as zero) are not written.
func (p *Plan) WriteFileAfter(dst, src *os.File, sframe []byte, done []Run) error {
	if uint64(len(sframe)) != p.Size {
		return fmt.Errorf("%w: got %d bytes, planned %d", ErrSizeMismatch, len(sframe), p.Size)
	}
	copied := make(map[Run]bool, len(done))
	for _, r := range done {
		copied[r] = true
	}
	if _, err := dst.Seek(0, io.SeekStart); err != nil {
		return err
	}
	a := p.assembler(sframe)
	a.sparse = true
	pos := uint64(0)
	for _, c := range p.cleanRuns() {
		if err := a.write(dst, pos, c.off); err != nil {
			return err
		}
		if copied[Run{Off: c.off, Src: c.src, Size: c.size}] {
			if _, err := dst.Seek(int64(c.off+c.size), io.SeekStart); err != nil {
				return err
			}
		} else if err := copyRun(dst, src, c.off, c.src, c.size); err != nil {
			return err
		}
		pos = c.off + c.size
	}
	if err := a.write(dst, pos, p.OutputSize); err != nil {
		return err
	}
	return dst.Truncate(int64(p.OutputSize))
}
