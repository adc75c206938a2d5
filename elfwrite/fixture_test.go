package elfwrite

import (
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// TestFixtures inserts an empty SFrame section into the committed
// libc-free programs (testdata/build.sh) and, where the machine or
// qemu-user can, runs them. These need no compiler.
func TestFixtures(t *testing.T) {
	tests := []struct {
		file string
		arch string
		sf   []byte
	}{
		{"tiny-x86_64", "amd64", minimalSFrame(binary.LittleEndian, 3, -8)},
		{"tiny-x86_64-pie", "amd64", minimalSFrame(binary.LittleEndian, 3, -8)},
		{"tiny-aarch64", "arm64", minimalSFrame(binary.LittleEndian, 2, 0)},
		{"tiny-aarch64-pie", "arm64", minimalSFrame(binary.LittleEndian, 2, 0)},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			in, err := os.ReadFile(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			for _, opts := range []Options{{}, {MaxPad: -1}} {
				p, err := NewPlan(in, uint64(len(tc.sf)), opts)
				if err != nil {
					t.Fatal(err)
				}
				out, err := p.Bytes(tc.sf)
				if err != nil {
					t.Fatal(err)
				}
				checkOutput(t, in, out, p, tc.sf)
				if opts.MaxPad < 0 {
					continue // compact placement needs a kernel that finds e_phoff in any PT_LOAD
				}
				var runner []string
				switch {
				case runtime.GOOS == "linux" && runtime.GOARCH == tc.arch:
				case tc.arch == "arm64":
					q, err := exec.LookPath("qemu-aarch64-static")
					if err != nil {
						t.Skip("cannot run AArch64 code here")
					}
					runner = []string{q}
				default:
					t.Skip("cannot run " + tc.arch + " code here")
				}
				bin := filepath.Join(t.TempDir(), tc.file)
				if err := os.WriteFile(bin, out, 0o755); err != nil {
					t.Fatal(err)
				}
				cmd := exec.Command(bin)
				if runner != nil {
					cmd = exec.Command(runner[0], bin)
				}
				got, err := cmd.CombinedOutput()
				if err != nil || string(got) != "tiny\n" {
					t.Errorf("modified %s: output %q, error %v; want \"tiny\\n\"", tc.file, got, err)
				}
			}
		})
	}
}
