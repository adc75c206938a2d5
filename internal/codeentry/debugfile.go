package codeentry

import (
	"bytes"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"

	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
)

// defaultDebugDir is gdb's default debug-file-directory.
const defaultDebugDir = "/usr/lib/debug"

// ntGNUBuildID is NT_GNU_BUILD_ID.
const ntGNUBuildID = 3

// findDebugFile opens f's separate debug file: by build-id first, then
// by .gnu_debuglink, in each of dirs. A missing or unreadable one is a
// note, not an error: the file is analysed from what it holds.
func findDebugFile(f *elfread.File, dirs []string, notes *Notes) *elfread.File {
	if dirs == nil {
		dirs = []string{defaultDebugDir}
	}
	id := buildID(f)
	var tried []string
	if len(id) >= 2 {
		h := hex.EncodeToString(id)
		for _, dir := range dirs {
			p := filepath.Join(dir, ".build-id", h[:2], h[2:]+".debug")
			d, why := openDebug(p, func(d *elfread.File) bool { return bytes.Equal(buildID(d), id) })
			if d != nil {
				notes.DebugFile = p
				return d
			}
			tried = append(tried, why)
		}
	}
	if name, crc, ok := debugLink(f); ok && f.Name != "" {
		abs, err := filepath.Abs(f.Name)
		if err == nil {
			for _, dir := range dirs {
				p := filepath.Join(dir, filepath.Dir(abs), name)
				d, why := openDebug(p, func(*elfread.File) bool { return fileCRC(p) == crc })
				if d != nil {
					notes.DebugFile = p
					return d
				}
				tried = append(tried, why)
			}
		}
	}
	switch {
	case len(tried) == 0:
		notes.DebugNote = "no build-id or .gnu_debuglink to find a debug file by"
	default:
		notes.DebugNote = fmt.Sprint("no debug file: ", tried)
	}
	return nil
}

// openDebug opens p if it is a regular ELF file that match accepts;
// why says what was wrong otherwise.
func openDebug(p string, match func(*elfread.File) bool) (*elfread.File, string) {
	fi, err := os.Stat(p)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, p + ": none"
	case err != nil:
		return nil, err.Error()
	case !fi.Mode().IsRegular():
		return nil, p + ": " + elfread.KindOf(fi.Mode())
	}
	// elfread.Open checks the file is regular again, on the opened file.
	d, err := elfread.Open(p)
	if err != nil {
		return nil, err.Error()
	}
	if !match(d) {
		d.Close()
		return nil, p + ": does not match (build-id or CRC)"
	}
	return d, ""
}

// buildID is the NT_GNU_BUILD_ID note's descriptor, nil when none.
func buildID(f *elfread.File) []byte {
	for i, s := range f.ELF.Sections {
		if s.Type != elf.SHT_NOTE {
			continue
		}
		sec, err := f.SectionAt(i)
		if err != nil {
			continue
		}
		if id := noteDesc(sec.Data, f.ELF.ByteOrder, ntGNUBuildID, "GNU"); id != nil {
			return id
		}
	}
	if len(f.ELF.Sections) == 0 {
		if sec, err := f.Segment(elf.PT_NOTE); err == nil {
			return noteDesc(sec.Data, f.ELF.ByteOrder, ntGNUBuildID, "GNU")
		}
	}
	return nil
}

// noteDesc finds the note of type typ and owner name in b.
func noteDesc(b []byte, order interface{ Uint32([]byte) uint32 }, typ uint32, name string) []byte {
	align := func(n uint64) uint64 { return (n + 3) &^ 3 }
	for len(b) >= 12 {
		nsz, dsz, t := uint64(order.Uint32(b)), uint64(order.Uint32(b[4:])), order.Uint32(b[8:])
		b = b[12:]
		if align(nsz) > uint64(len(b)) || align(nsz)+dsz > uint64(len(b)) {
			return nil
		}
		n, d := b[:nsz], b[align(nsz):align(nsz)+dsz]
		if t == typ && string(bytes.TrimRight(n, "\x00")) == name {
			return d
		}
		if align(nsz)+align(dsz) > uint64(len(b)) {
			return nil
		}
		b = b[align(nsz)+align(dsz):]
	}
	return nil
}

// debugLink reads .gnu_debuglink: a file name, padding to 4 bytes, and
// the CRC-32 of the debug file.
func debugLink(f *elfread.File) (string, uint32, bool) {
	sec, err := f.Section(".gnu_debuglink")
	if err != nil {
		return "", 0, false
	}
	b := sec.Data
	i := bytes.IndexByte(b, 0)
	if i <= 0 {
		return "", 0, false
	}
	name := string(b[:i])
	off := (i + 4) &^ 3
	if off+4 > len(b) || filepath.Base(name) != name {
		// A name with a directory in it could point anywhere.
		return "", 0, false
	}
	return name, f.ELF.ByteOrder.Uint32(b[off:]), true
}

// fileCRC is the CRC-32 .gnu_debuglink holds for p's contents, streamed.
func fileCRC(p string) uint32 {
	r, err := os.Open(p)
	if err != nil {
		return 0
	}
	defer r.Close()
	h := crc32.NewIEEE()
	if _, err := io.Copy(h, r); err != nil {
		return 0
	}
	return h.Sum32()
}
