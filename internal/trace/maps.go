package trace

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// MapEntry is one line of /proc/PID/maps.
type MapEntry struct {
	Lo, Hi uint64
	Perms  string // "r-xp"
	Offset uint64
	Dev    string // "fd:01"
	Inode  uint64
	Path   string // "" for anonymous mappings; may end in " (deleted)"
}

// Exec says whether the mapping is executable.
func (m *MapEntry) Exec() bool { return len(m.Perms) >= 3 && m.Perms[2] == 'x' }

// File says whether the mapping is backed by a file (not [stack], [vdso],
// anonymous memory or a memfd the kernel names without a leading slash).
func (m *MapEntry) File() bool { return m.Inode != 0 && strings.HasPrefix(m.Path, "/") }

// maxMapLine bounds one line of a maps file (a path is at most PATH_MAX).
const maxMapLine = 4096 + 256

// ParseMaps reads the lines of a /proc/PID/maps file. name is used in
// errors, which name the line.
func ParseMaps(r io.Reader, name string) ([]MapEntry, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 512), maxMapLine)
	var out []MapEntry
	for n := 1; sc.Scan(); n++ {
		e, err := parseMapLine(sc.Text())
		if err != nil {
			return nil, fmt.Errorf("%s: line %d: %v", name, n, err)
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	return out, nil
}

// parseMapLine parses "lo-hi perms offset dev inode   path".
func parseMapLine(s string) (MapEntry, error) {
	var e MapEntry
	field := func() (string, bool) {
		s = strings.TrimLeft(s, " ")
		i := strings.IndexByte(s, ' ')
		if i < 0 {
			f := s
			s = ""
			return f, f != ""
		}
		f := s[:i]
		s = s[i:]
		return f, true
	}
	rng, ok := field()
	lo, hi, found := strings.Cut(rng, "-")
	if !ok || !found {
		return e, fmt.Errorf("no address range in %q", rng)
	}
	var err error
	if e.Lo, err = strconv.ParseUint(lo, 16, 64); err != nil {
		return e, fmt.Errorf("bad start address %q", lo)
	}
	if e.Hi, err = strconv.ParseUint(hi, 16, 64); err != nil {
		return e, fmt.Errorf("bad end address %q", hi)
	}
	if e.Hi < e.Lo {
		return e, fmt.Errorf("range %s ends before it starts", rng)
	}
	if e.Perms, ok = field(); !ok || len(e.Perms) != 4 {
		return e, fmt.Errorf("bad permissions %q", e.Perms)
	}
	off, ok := field()
	if !ok {
		return e, fmt.Errorf("no offset")
	}
	if e.Offset, err = strconv.ParseUint(off, 16, 64); err != nil {
		return e, fmt.Errorf("bad offset %q", off)
	}
	if e.Dev, ok = field(); !ok || !strings.Contains(e.Dev, ":") {
		return e, fmt.Errorf("bad device %q", e.Dev)
	}
	ino, ok := field()
	if !ok {
		return e, fmt.Errorf("no inode")
	}
	if e.Inode, err = strconv.ParseUint(ino, 10, 64); err != nil {
		return e, fmt.Errorf("bad inode %q", ino)
	}
	// The path is the rest after the padding; it may contain spaces.
	e.Path = strings.TrimLeft(s, " ")
	return e, nil
}
