package rpm

import (
	"errors"
	"fmt"
	"strings"
)

// files is the main header's file list, as the payload is read against
// it: rpm takes every file's size and metadata from the header, the
// payload's own only to find the file (by its name, or by its index in
// the 07070X form).
type files struct {
	names  []string // absolute paths
	modes  []uint64
	sizes  []uint64
	flags  []uint64
	signed []string       // why a file's content must stay ("": it need not)
	links  map[int][]int  // a hard link set, by each member's index
	byName map[string]int // index by path
	long   bool           // sizes in LONGFILESIZES
	algo   uint64         // FILEDIGESTALGO
	digest []string       // FILEDIGESTS
	hasDig bool           // the header has FILEDIGESTS
}

// readFiles reads the file list of the main header h and the signature
// header sig (where IMA and fs-verity signatures may be kept).
func readFiles(h, sig *Header) (*files, error) {
	f := &files{byName: map[string]int{}, links: map[int][]int{}, algo: hashMD5}
	if err := f.readNames(h); err != nil {
		return nil, err
	}
	n := len(f.names)
	var ok bool
	if f.sizes, ok = h.Ints(tagLongFileSizes); ok {
		f.long = true
	} else {
		f.sizes, _ = h.Ints(tagFileSizes)
	}
	f.modes, _ = h.Ints(tagFileModes)
	f.flags, _ = h.Ints(tagFileFlags)
	f.digest, f.hasDig = h.Strings(tagFileDigests)
	if a, ok := h.Ints(tagFileDigestAlgo); ok && len(a) == 1 {
		f.algo = a[0]
	}
	if n == 0 {
		return f, nil
	}
	if len(f.sizes) != n || len(f.modes) != n || f.flags != nil && len(f.flags) != n || f.hasDig && len(f.digest) != n {
		return nil, fmt.Errorf("file list: %d names, but %d sizes, %d modes, %d flags, %d digests", n, len(f.sizes), len(f.modes), len(f.flags), len(f.digest))
	}
	if f.flags == nil {
		f.flags = make([]uint64, n)
	}
	f.signed = make([]string, n)
	for _, s := range []struct {
		h   *Header
		tag uint32
		why string
	}{{h, tagFileSignatures, "IMA signature"}, {sig, sigFileSignatures, "IMA signature"}, {sig, sigVeritySigs, "fs-verity signature"}} {
		ss, ok := s.h.Strings(s.tag)
		if !ok || len(ss) != n {
			continue
		}
		for i, v := range ss {
			if v != "" && f.signed[i] == "" {
				f.signed[i] = s.why
			}
		}
	}
	f.readLinks(h)
	return f, nil
}

// readNames reads the paths: DIRNAMES, BASENAMES and DIRINDEXES, or the
// OLDFILENAMES of old packages.
func (f *files) readNames(h *Header) error {
	base, ok := h.Strings(tagBaseNames)
	if !ok {
		f.names, _ = h.Strings(tagOldFileNames)
	} else {
		dirs, _ := h.Strings(tagDirNames)
		idx, _ := h.Ints(tagDirIndexes)
		if len(idx) != len(base) {
			return fmt.Errorf("file list: %d base names, %d directory indexes", len(base), len(idx))
		}
		f.names = make([]string, len(base))
		for i, b := range base {
			if idx[i] >= uint64(len(dirs)) {
				return fmt.Errorf("file list: %s: directory %d of %d", b, idx[i], len(dirs))
			}
			f.names[i] = dirs[idx[i]] + b
		}
	}
	for i, name := range f.names {
		if _, dup := f.byName[name]; !dup {
			f.byName[name] = i
		}
	}
	return nil
}

// readLinks groups the regular files that share a device and inode, as
// rpm does: their content comes once in the payload, with the last of
// them.
func (f *files) readLinks(h *Header) {
	inodes, ok1 := h.Ints(tagFileInodes)
	devs, ok2 := h.Ints(tagFileDevices)
	if !ok1 || !ok2 || len(inodes) != len(f.names) || len(devs) != len(f.names) {
		return
	}
	sets := map[[2]uint64][]int{}
	for i := range f.names {
		if !f.regular(i) || f.flags[i]&fileFlagGhost != 0 || int32(inodes[i]) <= 0 {
			continue
		}
		k := [2]uint64{devs[i], inodes[i]}
		sets[k] = append(sets[k], i)
	}
	for _, s := range sets {
		if len(s) > 1 {
			for _, i := range s {
				f.links[i] = s
			}
		}
	}
}

// regular says whether file i is a regular file.
func (f *files) regular(i int) bool { return f.modes[i]&0o170000 == 0o100000 }

// symlink says whether file i is a symbolic link.
func (f *files) symlink(i int) bool { return f.modes[i]&0o170000 == 0o120000 }

// payloadSize is the size of file i's data in the payload: its size for
// a regular file (0 but for the last of a hard link set) or a symbolic
// link (its target), else 0.
func (f *files) payloadSize(i int) uint64 {
	switch {
	case f.symlink(i):
		return f.sizes[i]
	case !f.regular(i):
		return 0
	}
	if s := f.links[i]; len(s) > 1 && s[len(s)-1] != i {
		return 0
	}
	return f.sizes[i]
}

// index finds a payload entry's file by its cpio name ("./usr/bin/x").
func (f *files) index(name string) (int, error) {
	p := strings.TrimPrefix(name, ".")
	if i, ok := f.byName[p]; ok {
		return i, nil
	}
	return 0, errors.New("not in the header's file list")
}
