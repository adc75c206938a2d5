package report

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"sync"

	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
)

// Collect walks the paths (files or directories; symbolic links inside
// directories are not followed, so each library counts once) and analyzes
// every ELF file on all CPUs. progress, if not nil, is called after each
// file with the number done and the total. Files that are not ELF, or not
// converted by cfi2sframe, are left out silently; other failures are
// returned per file: a path given that does not exist or is neither a
// regular file nor a directory (FIFO, device, symlink loop), a directory
// that cannot be read, a malformed file.
func Collect(paths []string, o Options, progress func(done, total int)) ([]*File, []error) {
	var list []string
	var errs []error
	for _, root := range paths {
		st, err := os.Stat(root)
		switch {
		case err != nil:
			errs = append(errs, err)
			continue
		case st.Mode().IsRegular():
			list = append(list, root)
			continue
		case !st.IsDir():
			errs = append(errs, fmt.Errorf("%s: %s, not a regular file or directory", root, elfread.KindOf(st.Mode())))
			continue
		}
		if r, err := filepath.EvalSymlinks(root); err == nil {
			root = r
		}
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				errs = append(errs, err) // *PathError: names the directory
				return nil
			}
			if d.Type().IsRegular() {
				list = append(list, p)
			}
			return nil
		})
	}
	sort.Strings(list)
	var (
		mu    sync.Mutex
		files []*File
		done  int
		wg    sync.WaitGroup
	)
	work := make(chan string)
	for i := 0; i < runtime.NumCPU(); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range work {
				f, err := Analyze(p, o)
				mu.Lock()
				switch {
				case err == nil:
					files = append(files, f)
				case !errors.Is(err, ErrSkip):
					errs = append(errs, err)
				}
				done++
				if progress != nil {
					progress(done, len(list))
				}
				mu.Unlock()
			}
		}()
	}
	for _, p := range list {
		work <- p
	}
	close(work)
	wg.Wait()
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files, errs
}
