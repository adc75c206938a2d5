package main

import (
	"errors"
	"fmt"

	"github.com/cfi2sframe/cfi2sframe/convert"
	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
	"github.com/cfi2sframe/cfi2sframe/internal/layer"
)

// The convert package's errors say what is wrong with a file or with the
// options, in no command's words; these functions add what a user of
// this command needs to hear: the flag that gets past the error, or the
// flag an option error is about.

// hint is what the command adds to a conversion error: the flag that
// gets past it, if one does.
func hint(err error) string {
	switch {
	case errors.Is(err, convert.ErrHasSFrame):
		return "; use --force to replace it"
	case errors.Is(err, convert.ErrLayout):
		return " (--fragile-layout writes one that strip, eu-strip and patchelf may break)"
	case errors.Is(err, elfread.ErrInflateLimit):
		return "; see --max-inflate"
	}
	var le *layer.LimitError
	if errors.As(err, &le) && le.What == "expansion" {
		return " (--max-expansion)"
	}
	return ""
}

// hinted is an error with the command's hint after its message.
type hinted struct {
	err  error
	hint string
}

func (e *hinted) Error() string { return e.err.Error() + e.hint }
func (e *hinted) Unwrap() error { return e.err }

// withHint returns err with its hint, if it has one and has not got it
// yet.
func withHint(err error) error {
	var h *hinted
	if errors.As(err, &h) {
		return err
	}
	if s := hint(err); s != "" {
		return &hinted{err, s}
	}
	return err
}

// optionFlags names the flag that sets each field of convert.Options
// that convert.Options.Validate can refuse.
var optionFlags = map[string]string{
	"Version": "--sframe-version",
	"PCRel":   "--pcrel",
}

// flagError says a *convert.OptionError in the command's words, naming
// the flag instead of the field; other errors are returned as they are.
func flagError(err error) error {
	var oe *convert.OptionError
	if !errors.As(err, &oe) {
		return err
	}
	flag, ok := optionFlags[oe.Option]
	if !ok {
		return err
	}
	if oe.Option == "Version" {
		return fmt.Errorf("%s: %s", flag, oe.Msg)
	}
	return fmt.Errorf("%s %s", flag, oe.Msg)
}
