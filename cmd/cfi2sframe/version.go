package main

import (
	"fmt"
	"runtime/debug"

	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// version is set at link time (-ldflags "-X main.version=v1.2.3"); when it
// is not, the module version or VCS revision the binary was built from is
// used.
var version = ""

func versionString() string {
	v := version
	if v == "" {
		v = "(devel)"
		if bi, ok := debug.ReadBuildInfo(); ok {
			if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
				v = bi.Main.Version
			} else {
				rev, dirty := "", false
				for _, s := range bi.Settings {
					switch s.Key {
					case "vcs.revision":
						rev = s.Value
					case "vcs.modified":
						dirty = s.Value == "true"
					}
				}
				if len(rev) > 12 {
					rev = rev[:12]
				}
				if rev != "" {
					v = "(devel) " + rev
					if dirty {
						v += "+dirty"
					}
				}
			}
		}
	}
	return fmt.Sprintf("cfi2sframe %s\nSFrame versions read: %d, %d, %d; written: %d, %d (default %d)\n",
		v, sframe.Version1, sframe.Version2, sframe.Version3, sframe.Version2, sframe.Version3, sframe.Version3)
}
