package elfwrite

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteFileAtomic(t *testing.T) {
	failing := errors.New("write failed")
	tests := []struct {
		name     string
		existing string // "" = no destination file
		perm     os.FileMode
		write    func(io.Writer) error
		want     string // content expected afterwards
		wantErr  error
	}{
		{name: "new file", perm: 0o755, write: writeStr("new"), want: "new"},
		{name: "replace, in place", existing: "old", perm: 0o750, write: writeStr("new"), want: "new"},
		{name: "failure keeps old", existing: "old", perm: 0o644, write: func(w io.Writer) error {
			io.WriteString(w, "partial")
			return failing
		}, want: "old", wantErr: failing},
		{name: "failure, no destination", perm: 0o644, write: func(io.Writer) error { return failing }, wantErr: failing},
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
			err := WriteFileAtomic(dst, tc.perm, tc.write)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
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
	if err := WriteFileAtomic(link, 0o644, writeStr("new")); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("symlink was replaced by a file")
	}
	if got, _ := os.ReadFile(target); string(got) != "new" {
		t.Errorf("target content %q, want new", got)
	}
}

func writeStr(s string) func(io.Writer) error {
	return func(w io.Writer) error {
		_, err := io.WriteString(w, s)
		return err
	}
}
