package mapped

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// TestDrop: dropping a mapped file's pages keeps its bytes (they are read
// again from the page cache) and takes them out of the mapping's resident
// set; bytes not mapped by Open (here a copy on the heap) are left alone,
// for there dropping would zero them.
func TestDrop(t *testing.T) {
	exe, err := os.Executable() // a file of a few MB
	if err != nil {
		t.Skip(err)
	}
	in, err := Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if !in.Mapped() {
		t.Skip("not mapped here")
	}
	heap := bytes.Clone(in.Data) // touches every page of the mapping
	before := mappingRss(t, in.Data)

	Drop(heap)
	if !bytes.Equal(heap, in.Data) {
		t.Fatal("Drop changed bytes it does not map")
	}
	Drop(in.Data)
	after := mappingRss(t, in.Data)
	if !bytes.Equal(heap, in.Data) {
		t.Fatal("the mapped bytes changed once dropped")
	}
	if runtime.GOOS == "linux" && before >= 0 && (before < 64 || after > 4) {
		t.Errorf("resident KiB of the mapping: %d touched, %d dropped", before, after)
	}
	t.Logf("resident KiB of the mapping: %d touched, %d dropped", before, after)

	in.Close()
	Drop(heap) // no mapping open: nothing
}

// mappingRss is the Rss in KiB that /proc/self/smaps gives the mapping
// starting at b (-1 where it is not told).
func mappingRss(t *testing.T, b []byte) int {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return -1
	}
	defer f.Close()
	start := fmt.Sprintf("%x-", uintptr(unsafe.Pointer(unsafe.SliceData(b))))
	s := bufio.NewScanner(f)
	found := false
	for s.Scan() {
		line := s.Text()
		switch {
		case strings.HasPrefix(line, start):
			found = true
		case found && strings.HasPrefix(line, "Rss:"):
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(strings.TrimPrefix(line, "Rss:")), " kB"))
			if err != nil {
				t.Fatalf("smaps: %q: %v", line, err)
			}
			return kb
		}
	}
	t.Fatal("smaps names no mapping at", start)
	return -1
}
