package sframe

// SetFREChunk sets the encoder's FRE chunk size for a test and returns
// the function that restores it.
func SetFREChunk(n int) func() {
	old := freChunk
	freChunk = n
	return func() { freChunk = old }
}
