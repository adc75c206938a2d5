// Command cficheck compares cfi's rows with GNU readelf's
// --debug-dump=frames-interp for every ELF file under the given paths.
//
//	cficheck -readelf PATH [-j N] FILE|DIR...
package main

import (
	"debug/elf"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/cfi2sframe/cfi2sframe/arch"
	"github.com/cfi2sframe/cfi2sframe/internal/testing/cficheck"
)

func main() {
	readelf := flag.String("readelf", "readelf", "GNU readelf to compare with")
	jobs := flag.Int("j", 2, "files compared at once")
	verbose := flag.Bool("v", false, "print each file's summary")
	flag.Parse()
	var files []string
	for _, root := range flag.Args() {
		if r, err := filepath.EvalSymlinks(root); err == nil {
			root = r
		}
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return nil
			}
			if f, err := elf.Open(p); err == nil {
				supported := arch.ForMachine(f.Machine) != nil
				if supported && (f.Section(".eh_frame") != nil || f.Section(".debug_frame") != nil) {
					files = append(files, p)
				}
				f.Close()
			}
			return nil
		})
	}
	total := cficheck.NewSummary()
	var mu sync.Mutex
	work := make(chan string)
	var wg sync.WaitGroup
	for i := 0; i < *jobs; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range work {
				s := cficheck.CompareFile(*readelf, p)
				mu.Lock()
				total.Add(s)
				if *verbose {
					fmt.Printf("%s: %s", p, s)
				}
				mu.Unlock()
			}
		}()
	}
	for _, p := range files {
		work <- p
	}
	close(work)
	wg.Wait()
	fmt.Print(total)
	if len(total.Differ) > 0 {
		os.Exit(1)
	}
}
