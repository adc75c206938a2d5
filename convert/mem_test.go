package convert

import "bytes"

// convertMem converts the file in (named name in errors) in memory and
// builds its output (Result.output), as a caller holding a file's bytes
// does with NewFile, Convert and Write.
func convertMem(name string, in []byte, o Options) (*Result, error) {
	f, err := NewFile(name, bytes.NewReader(in), int64(len(in)))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	res, err := f.Convert(o)
	if err != nil {
		return nil, err
	}
	if res.plan != nil {
		var b bytes.Buffer
		if err := res.Write(&b); err != nil {
			return nil, err
		}
		res.output, res.plan = b.Bytes(), nil
	}
	return res, nil
}
