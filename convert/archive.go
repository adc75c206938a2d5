package convert

import (
	"bytes"
	"errors"

	"github.com/cfi2sframe/cfi2sframe/internal/relobj"
	"github.com/cfi2sframe/cfi2sframe/translate"
)

// convertArchive converts every relocatable ELF member of a static
// archive; other members (and objects without CFI) stay as they are. An
// error names the member (relobj), not the archive.
func convertArchive(in []byte, o Options) (*Result, error) {
	res := &Result{Translate: &translate.Result{}}
	members := 0
	out, err := relobj.ConvertArchive(in, func(m *relobj.Member) ([]byte, error) {
		if !bytes.HasPrefix(m.Data, []byte("\x7fELF")) {
			return m.Data, nil
		}
		r, err := convertBytes(m.Data, o, nil)
		if errors.Is(err, ErrNoCFI) || (err == nil && r.Unchanged != "") {
			return m.Data, nil
		}
		if err == nil && r.plan != nil { // a linked file: built in memory
			r.output, err = r.plan.Bytes(r.SFrame)
		}
		if err != nil {
			return nil, err
		}
		members++
		res.Translate.Add(r.Translate)
		res.CFIErrors = append(res.CFIErrors, r.CFIErrors...)
		res.SFrame = append(res.SFrame, r.SFrame...)
		return r.output, nil
	})
	if err != nil {
		return nil, err
	}
	if members == 0 {
		// Only objects without CFI (or no objects): nothing to add, as
		// for a single such object.
		return &Result{output: in, Translate: res.Translate,
			Unchanged: "archive without objects with CFI: copied unchanged"}, nil
	}
	res.output = out
	res.Members = members
	return res, nil
}
