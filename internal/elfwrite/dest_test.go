package elfwrite

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

func openDir(t *testing.T, dir string) *os.File {
	t.Helper()
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n []string
	for _, e := range ents {
		n = append(n, e.Name())
	}
	return n
}

// TestWriteAtomicUnnamed: while it is written, the new file has no name
// in its directory (a killed run leaves nothing); Finish runs before it
// takes its name, and an error there leaves the old file and no name.
func TestWriteAtomicUnnamed(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "old"), []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	d := Dest{Dir: openDir(t, dir), Name: "new", Path: filepath.Join(dir, "new"), Perm: 0o640}
	err := WriteAtomic(context.Background(), d, func(f *os.File) error {
		if got := names(t, dir); !slices.Equal(got, []string{"old"}) {
			t.Errorf("while writing the directory holds %v", got)
		}
		_, err := f.WriteString("new")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(d.Path); string(b) != "new" {
		t.Errorf("content %q", b)
	}
	if st, _ := os.Stat(d.Path); st.Mode().Perm() != 0o640 {
		t.Errorf("mode %v", st.Mode())
	}

	failing := errors.New("metadata")
	for _, tc := range []struct {
		name string
		d    Dest
		want error
	}{
		{"finish fails", Dest{Finish: func(*os.File) error { return failing }}, failing},
		{"name changed meanwhile", Dest{Replaces: &FileID{Dev: 1, Ino: 1}}, ErrReplaced},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := tc.d
			d.Dir, d.Name, d.Path = openDir(t, dir), "old", filepath.Join(dir, "old")
			err := WriteAtomic(context.Background(), d, func(f *os.File) error { _, err := f.WriteString("x"); return err })
			if !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
			if b, _ := os.ReadFile(d.Path); string(b) != "old" {
				t.Errorf("old file replaced: %q", b)
			}
			if got := names(t, dir); !slices.Equal(got, []string{"new", "old"}) {
				t.Errorf("directory holds %v", got)
			}
		})
	}
}

// TestRemoveStale: a temporary name is removed only when nobody holds its
// lock and it is a regular file; other names never.
func TestRemoveStale(t *testing.T) {
	dir := t.TempDir()
	d := openDir(t, dir)
	tmp := tempName("prog")
	if !IsTemp(tmp) || IsTemp("prog") || IsTemp("prog"+TempMarker) {
		t.Fatalf("IsTemp wrong for %q", tmp)
	}
	p := filepath.Join(dir, tmp)
	if err := os.WriteFile(p, []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	holder, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(holder.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if removed, err := RemoveStale(d, tmp); removed || err != nil {
		t.Errorf("removed a file whose writer holds its lock: %v %v", removed, err)
	}
	holder.Close() // the writer is gone
	if removed, err := RemoveStale(d, tmp); !removed || err != nil {
		t.Errorf("stale file not removed: %v %v", removed, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "prog"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if removed, _ := RemoveStale(d, "prog"); removed {
		t.Error("removed a name that is not a temporary's")
	}
	link := tempName("link")
	if err := os.Symlink("prog", filepath.Join(dir, link)); err != nil {
		t.Fatal(err)
	}
	if removed, _ := RemoveStale(d, link); removed {
		t.Error("removed a symbolic link")
	}
}

// TestLinkAtomic: a second name replaces what was there with a link to
// the first, leaving no temporary name.
func TestLinkAtomic(t *testing.T) {
	dir := t.TempDir()
	for n, c := range map[string]string{"a": "new", "b": "old"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d := openDir(t, dir)
	if err := LinkAtomic(d, "a", d, "b"); err != nil {
		t.Fatal(err)
	}
	sa, _ := os.Stat(filepath.Join(dir, "a"))
	sb, _ := os.Stat(filepath.Join(dir, "b"))
	if !os.SameFile(sa, sb) {
		t.Error("b is not a link to a")
	}
	if got := names(t, dir); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("directory holds %v", got)
	}
}
