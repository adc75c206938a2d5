//go:build race

package main

// raceEnabled: the race detector reserves address space far beyond the
// hostile-input limit and multiplies the heap, so under -race the
// children run without the limit and their peak RSS is not held to the
// ceiling.
const raceEnabled = true
