package verify

import (
	"bytes"

	"github.com/cfi2sframe/cfi2sframe/convert"
)

// convertBytes converts the file in (named name) in memory: the result
// and the output's bytes.
func convertBytes(name string, in []byte, o convert.Options) (*convert.Result, []byte, error) {
	f, err := convert.NewFile(name, bytes.NewReader(in), int64(len(in)))
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	res, err := f.Convert(o)
	if err != nil {
		return nil, nil, err
	}
	var out bytes.Buffer
	if err := res.Write(&out); err != nil {
		return nil, nil, err
	}
	return res, out.Bytes(), nil
}
