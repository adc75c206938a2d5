package elfwrite

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestWriteFileAtomic(t *testing.T) {
	failing := errors.New("write failed")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	later, cancelLater := context.WithCancel(context.Background())
	tests := []struct {
		name     string
		ctx      context.Context
		existing string // "" = no destination file
		perm     os.FileMode
		write    func(*os.File) error
		want     string // content expected afterwards
		wantErr  error
	}{
		{name: "new file", perm: 0o755, write: writeStr("new"), want: "new"},
		{name: "replace, in place", existing: "old", perm: 0o750, write: writeStr("new"), want: "new"},
		{name: "failure keeps old", existing: "old", perm: 0o644, write: func(f *os.File) error {
			io.WriteString(f, "partial")
			return failing
		}, want: "old", wantErr: failing},
		{name: "failure, no destination", perm: 0o644, write: func(*os.File) error { return failing }, wantErr: failing},
		{name: "cancelled before", ctx: ctx, existing: "old", perm: 0o644, write: writeStr("new"), want: "old", wantErr: context.Canceled},
		{name: "cancelled while writing", ctx: later, perm: 0o644, write: func(f *os.File) error {
			cancelLater()
			return writeStr("new")(f)
		}, wantErr: context.Canceled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			dst := filepath.Join(dir, "bin")
			if tc.existing != "" {
				if err := os.WriteFile(dst, []byte(tc.existing), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			ctx := tc.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			err := WriteFileAtomic(ctx, dst, tc.perm, tc.write)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			if err != nil && (!strings.HasPrefix(err.Error(), dst+": ") || strings.Count(err.Error(), dst) != 1) {
				t.Errorf("error %q does not name %s once, first", err, dst)
			}
			ents, _ := os.ReadDir(dir)
			wantFiles := 0
			if tc.existing != "" || tc.wantErr == nil {
				wantFiles = 1
			}
			if len(ents) != wantFiles {
				t.Errorf("%d files left in the directory, want %d (temporary file not cleaned?)", len(ents), wantFiles)
			}
			if wantFiles == 0 {
				return
			}
			got, err := os.ReadFile(dst)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("content %q, want %q", got, tc.want)
			}
			st, _ := os.Stat(dst)
			wantPerm := tc.perm
			if tc.wantErr != nil {
				wantPerm = 0o600
			}
			if st.Mode().Perm() != wantPerm {
				t.Errorf("mode %v, want %v", st.Mode().Perm(), wantPerm)
			}
		})
	}
}

func TestWriteFileAtomicSymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "real")
	link := filepath.Join(dir, "link")
	if err := os.WriteFile(target, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real", link); err != nil {
		t.Skip("symlinks unsupported:", err)
	}
	if err := WriteFileAtomic(context.Background(), link, 0o644, writeStr("new")); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("symlink was replaced by a file")
	}
	if got, _ := os.ReadFile(target); string(got) != "new" {
		t.Errorf("target content %q, want new", got)
	}
}

func writeStr(s string) func(*os.File) error {
	return func(f *os.File) error {
		_, err := io.WriteString(f, s)
		return err
	}
}

// TestWriteFileAtomicDanglingSymlink: a link to a file that does not exist
// yet is written through too: the target is created, the link kept.
func TestWriteFileAtomicDanglingSymlink(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "link")
	if err := os.Symlink("sub/../real", link); err != nil {
		t.Skip("symlinks unsupported:", err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(context.Background(), link, 0o644, writeStr("new")); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("symlink was replaced by a file")
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "real")); string(got) != "new" {
		t.Errorf("target content %q, want new", got)
	}
}

// TestWriteFileAtomicRefusesSpecial: a FIFO, a directory, a device (and a
// link to one) are never replaced by a regular file, and no temporary file
// is left behind.
func TestWriteFileAtomicRefusesSpecial(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	devLink := filepath.Join(dir, "null")
	if err := os.Symlink("/dev/null", devLink); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want string }{
		{fifo, "a FIFO"}, {sub, "a directory"}, {devLink, "a character device"},
	} {
		before, _ := os.Lstat(tc.path)
		err := WriteFileAtomic(context.Background(), tc.path, 0o644, writeStr("new"))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "refusing") {
			t.Errorf("%s: error %v, want refusal naming %s", tc.path, err, tc.want)
		}
		if after, _ := os.Lstat(tc.path); after == nil || after.Mode() != before.Mode() {
			t.Errorf("%s: replaced", tc.path)
		}
	}
	if st, err := os.Stat("/dev/null"); err != nil || st.Mode()&os.ModeCharDevice == 0 {
		t.Fatalf("/dev/null is no longer a device!")
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 3 {
		t.Errorf("directory holds %d entries, want the 3 created (temporary file left?)", len(ents))
	}
}

func TestScratchHasNoName(t *testing.T) {
	dir := t.TempDir()
	f, err := Scratch(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("spooled"); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 0 {
		t.Errorf("Scratch left %d names in %s; want none", len(ents), dir)
	}
	b := make([]byte, 7)
	if _, err := f.ReadAt(b, 0); err != nil || string(b) != "spooled" {
		t.Errorf("read back %q, %v", b, err)
	}
}
