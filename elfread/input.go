package elfread

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// ReadFile reads an input file (ELF, archive or raw SFrame section). Only regular files are accepted (a
// symlink is followed to one): a FIFO with no writer would block, and
// /dev/zero would grow until out of memory. The file is opened without
// blocking and checked with fstat, so what is checked is what is read, and
// no more than the size fstat gave is read.
func ReadFile(name string) ([]byte, os.FileInfo, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, err // *PathError: "open NAME: reason"
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("%s: %s, not a regular file", name, KindOf(st.Mode()))
	}
	data, err := io.ReadAll(io.LimitReader(f, st.Size()))
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %v", name, err)
	}
	return data, st, nil
}

// KindOf names a file mode's type for messages: "a directory", "a FIFO".
func KindOf(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "a regular file"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	}
	return "not a regular file"
}
