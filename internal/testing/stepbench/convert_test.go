package stepbench

import (
	"bytes"

	"github.com/cfi2sframe/cfi2sframe/convert"
)

// convertBytes converts a file's bytes in memory, with Force: the
// section and its address are in the result.
func convertBytes(name string, data []byte) (*convert.Result, error) {
	f, err := convert.NewFile(name, bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Convert(convert.Options{Force: true})
}
