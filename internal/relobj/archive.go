package relobj

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ArchiveMagic starts a System V / GNU ar archive.
const ArchiveMagic = "!<arch>\n"

// ArHeaderSize is the length of an ar member's header.
const ArHeaderSize = 60

// ParseArHeader reads the ar member header h, which room more bytes of
// the archive follow at most: it returns the name field without its
// padding (a short name keeps its '/' terminator, if any) and the size of
// the member's data, which must fit in room. It is the one reader of ar
// member headers: static archives here, Debian packages in internal/deb.
func ParseArHeader(h []byte, room int64) (name string, size int64, err error) {
	if len(h) < ArHeaderSize {
		return "", 0, errors.New("truncated member header")
	}
	if string(h[58:60]) != "`\n" {
		return "", 0, errors.New("bad member header")
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(h[48:58])), 10, 63)
	if err != nil || room < 0 || n > uint64(room) {
		return "", 0, fmt.Errorf("bad member size %q", strings.TrimSpace(string(h[48:58])))
	}
	return strings.TrimRight(string(h[:16]), " "), int64(n), nil
}

// SetArSize writes size into the size field of the ar member header h,
// which keeps every other field.
func SetArSize(h []byte, size int64) error {
	s := strconv.FormatInt(size, 10)
	if size < 0 || len(s) > 10 {
		return fmt.Errorf("size %d does not fit an ar member header", size)
	}
	copy(h[48:58], fmt.Sprintf("%-10s", s))
	return nil
}

// Member is one archive member.
type Member struct {
	Name   string // resolved (long names looked up), without the trailing '/'
	header []byte // the 60-byte header as read
	Data   []byte
	off    int // offset of the header in the input
}

// special reports the GNU symbol tables and the long-name table.
func (m *Member) special() bool {
	n := strings.TrimRight(string(m.header[:16]), " ")
	return n == "/" || n == "/SYM64/" || n == "//"
}

// ConvertArchive rewrites every ordinary member of a GNU ar archive with
// conv (which returns the data unchanged for members it leaves alone) and
// rebuilds the archive: member order, names and headers are kept (sizes
// updated), the long-name table is copied, and the symbol table's member
// offsets are recomputed.
func ConvertArchive(in []byte, conv func(m *Member) ([]byte, error)) ([]byte, error) {
	if !bytes.HasPrefix(in, []byte(ArchiveMagic)) {
		if bytes.HasPrefix(in, []byte("!<thin>\n")) {
			return nil, errorf("thin archives are not supported")
		}
		return nil, errorf("not an ar archive")
	}
	var members []*Member
	var longNames []byte
	for off := len(ArchiveMagic); off < len(in); {
		h := in[off:min(off+ArHeaderSize, len(in))]
		name, size, err := ParseArHeader(h, int64(len(in)-len(h)-off))
		if err != nil {
			return nil, errorAt(int64(off), "archive: %v", err)
		}
		m := &Member{header: h, Data: in[off+60 : off+60+int(size)], off: off}
		switch {
		case name == "//":
			longNames = m.Data
		case strings.HasPrefix(name, "/") && name != "/" && name != "/SYM64/":
			i, err := strconv.Atoi(name[1:])
			if err != nil || i < 0 || i >= len(longNames) {
				return nil, errorAt(int64(off), "archive: bad long name %q", name)
			}
			end := bytes.Index(longNames[i:], []byte("/\n"))
			if end < 0 {
				return nil, errorAt(int64(off), "archive: unterminated long name")
			}
			m.Name = string(longNames[i : i+end])
		default:
			m.Name = strings.TrimSuffix(name, "/")
		}
		members = append(members, m)
		off += 60 + int(size)
		if off%2 == 1 {
			off++
		}
	}
	// Convert, then lay out.
	newData := make([][]byte, len(members))
	for i, m := range members {
		newData[i] = m.Data
		if m.special() {
			continue
		}
		d, err := conv(m)
		if err != nil {
			return nil, fmt.Errorf("member %s: %w", m.Name, err)
		}
		newData[i] = d
	}
	newOff := map[int]int{}
	pos := len(ArchiveMagic)
	for i, m := range members {
		newOff[m.off] = pos
		pos += 60 + len(newData[i])
		if pos%2 == 1 {
			pos++
		}
	}
	out := []byte(ArchiveMagic)
	for i, m := range members {
		d := newData[i]
		name := strings.TrimRight(string(m.header[:16]), " ")
		if name == "/" || name == "/SYM64/" {
			var err error
			if d, err = remapSymtab(d, name == "/SYM64/", newOff); err != nil {
				return nil, err
			}
		}
		h := append([]byte(nil), m.header...)
		if err := SetArSize(h, int64(len(d))); err != nil {
			return nil, errorf("archive: member %s: %v", m.Name, err)
		}
		out = append(out, h...)
		out = append(out, d...)
		if len(out)%2 == 1 {
			out = append(out, '\n')
		}
	}
	return out, nil
}

// remapSymtab rewrites the member offsets of a GNU archive symbol table.
func remapSymtab(d []byte, wide bool, newOff map[int]int) ([]byte, error) {
	w := 4
	if wide {
		w = 8
	}
	if len(d) < w {
		return nil, errorf("archive: truncated symbol table")
	}
	get := func(b []byte) uint64 {
		if wide {
			return binary.BigEndian.Uint64(b)
		}
		return uint64(binary.BigEndian.Uint32(b))
	}
	// The count word is followed by n offsets of w bytes each.
	n := get(d)
	if n > uint64((len(d)-w)/w) {
		return nil, errorf("archive: symbol table claims %d symbols, its %d bytes hold at most %d", n, len(d), (len(d)-w)/w)
	}
	out := append([]byte(nil), d...)
	for i := uint64(1); i <= n; i++ {
		p := out[i*uint64(w):]
		o, ok := newOff[int(get(p))]
		if !ok {
			return nil, errorf("archive: symbol table points at offset %#x, where no member starts", get(p))
		}
		if wide {
			binary.BigEndian.PutUint64(p, uint64(o))
		} else {
			binary.BigEndian.PutUint32(p, uint32(o))
		}
	}
	return out, nil
}
