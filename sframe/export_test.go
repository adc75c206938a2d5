package sframe

import "errors"

// SetFREChunk sets the encoder's FRE chunk size for a test and returns
// the function that restores it.
func SetFREChunk(n int) func() {
	old := freChunk
	freChunk = n
	return func() { freChunk = old }
}

// OpenGeneral is Open without the little-endian V3 fast path (checkV3LE,
// granV3LE, findFDE's V3 branch, walkV3LE), for comparing the two.
func OpenGeneral(b []byte, addr uint64) (*Table, error) { return open(b, addr, false) }

// EncoderLen is the number of functions added to e.
func EncoderLen(e *Encoder) int { return len(e.ents) }

// FuncErrorStart is the start address an Encode error names, and whether
// the error is about one function.
func FuncErrorStart(err error) (uint64, bool) {
	var fe *funcError
	if !errors.As(err, &fe) {
		return 0, false
	}
	return fe.start, true
}

// LookupStepErr is LookupStep saying why it did not fill *s: ErrNeedsRule
// or Lookup's error.
func LookupStepErr(t *Table, pc uint64, s *StepRule) error { return t.lookupStep(pc, s) }

// ErrNeedsRule is what LookupStepErr returns for a row that needs the
// full rule.
var ErrNeedsRule = errNeedsRule
