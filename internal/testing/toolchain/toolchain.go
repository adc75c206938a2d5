// Package toolchain locates the reference GNU toolchain that
// scripts/reference-toolchain.sh installs, for tests that cross-check
// cfi2sframe against binutils.
//
// The toolchain root is $CFI2SFRAME_TOOLCHAIN, or else
// ${XDG_CACHE_HOME:-$HOME/.cache}/cfi2sframe/toolchain. Under it, each
// Debian suite has a directory (sid: SFrame V3, trixie: SFrame V2) whose
// bin/ holds wrappers named ARCH-TOOL, e.g. sid/bin/x86_64-objdump.
//
// Tests that need a tool skip when the toolchain is absent, unless
// CFI2SFRAME_REQUIRE_TOOLCHAIN=1 (as in CI), where they fail instead.
package toolchain

import (
	"os"
	"path/filepath"
	"testing"
)

// Root returns the toolchain root directory, or "" when it cannot be found.
func Root() string {
	if d := os.Getenv("CFI2SFRAME_TOOLCHAIN"); d != "" {
		return d
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(cache, "cfi2sframe", "toolchain")
}

// Path returns the path of a tool such as ("sid", "x86_64-objdump") and
// whether it exists.
func Path(suite, tool string) (string, bool) {
	root := Root()
	if root == "" {
		return "", false
	}
	p := filepath.Join(root, suite, "bin", tool)
	st, err := os.Stat(p)
	return p, err == nil && !st.IsDir()
}

// Required reports whether tests must fail rather than skip when a tool is
// missing.
func Required() bool { return os.Getenv("CFI2SFRAME_REQUIRE_TOOLCHAIN") == "1" }

// Tool returns the path of a reference tool, or skips tb (fails it when
// the toolchain is required) when the tool is not installed.
func Tool(tb testing.TB, suite, tool string) string {
	tb.Helper()
	p, ok := Path(suite, tool)
	if ok {
		return p
	}
	msg := "reference toolchain: " + suite + "/" + tool + " not found under " + Root() +
		"; run scripts/reference-toolchain.sh"
	if Required() {
		tb.Fatal(msg)
	}
	tb.Skip(msg)
	return ""
}
