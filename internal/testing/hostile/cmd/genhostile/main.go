// Command genhostile writes the hostile inputs of package hostile into a
// directory, for trying the commands by hand (the tests generate their own).
package main

import (
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cfi2sframe/cfi2sframe/internal/testing/hostile"
)

// maxRows is the most rows cfi lets one FDE produce (docs/readers.md:
// "one FDE may produce at most 65536 rows"); the "rows" file goes past it.
const maxRows = 1 << 16

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: genhostile DIR")
		os.Exit(2)
	}
	dir := os.Args[1]
	for name, b := range map[string][]byte{
		"pcmask-4g":          hostile.PCMaskFunc(),
		"bomb-zlib-8g":       hostile.Bomb(".debug_frame", hostile.Zlib, 8<<30, 4<<20),
		"bomb-zstd-1g":       hostile.Bomb(".debug_frame", hostile.Zstd, 1<<30, 1<<30),
		"bomb-zlib-lie":      hostile.Bomb(".debug_frame", hostile.Zlib, 1000, 64<<20),
		"bomb-eh-frame-zstd": hostile.Bomb(".eh_frame", hostile.Zstd, 1<<30, 1<<30),
		"rows":               hostile.ManyRows(maxRows + 10),
		"huge-eh-frame-hdr":  hostile.HugeSegment(elf.PT_GNU_EH_FRAME),
		"huge-sframe-seg":    hostile.HugeSegment(0x6474e554),
		"huge-load":          hostile.HugeSegment(elf.PT_LOAD),
		"archive-symtab.a":   hostile.Archive(false),
		"archive-symtab64.a": hostile.Archive(true),
		"empty-eh-frame":     hostile.EHFrameOnly(nil),
		"garbage-eh-frame":   hostile.EHFrameOnly([]byte("this is not call frame information at all")),
		"no-shstrtab.o":      hostile.NoShstrtab(),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}
