//go:build !race

// Package race tells tests whether the race detector is built in: it
// reserves address space far beyond a limit a test may set, multiplies
// the heap, and empties sync.Pools at random, so allocation counts and
// memory ceilings measured under it are not the program's.
package race

// Enabled is true when built with -race.
const Enabled = false
