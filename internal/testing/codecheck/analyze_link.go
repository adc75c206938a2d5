package codecheck

import (
	"github.com/cfi2sframe/cfi2sframe/internal/codeentry"
	"github.com/cfi2sframe/cfi2sframe/internal/codeflow"
	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
)

// Linked is the analysis --from-code runs, for Check: codeentry.Load
// with Options{} (no debug directories given, nothing described) and
// codeflow.Analyze.
func Linked() Options {
	return Options{Build: loadCode, Analyze: codeflow.Analyze}
}

// loadCode is codeentry.Load without its Notes, which Check has no use
// for.
func loadCode(f *elfread.File) (*codeflow.Code, error) {
	c, _, err := codeentry.Load(f, codeentry.Options{})
	return c, err
}
