package codecheck

import (
	"github.com/cfi2sframe/cfi2sframe/internal/codeflow"
	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
)

// The analysis the corpus tests (TestCorpus) run, linked here when its
// parts are merged: linkedBuild is codeentry.Load with Options{} (no
// debug directories, nothing described), linkedAnalyze is
// codeflow.Analyze. While either is nil, those tests skip and say so.
var (
	linkedBuild   func(f *elfread.File) (*codeflow.Code, error)
	linkedAnalyze func(c *codeflow.Code, emit func(codeflow.Func), skip func(codeflow.Skip))
)
