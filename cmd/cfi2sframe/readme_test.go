package main

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// readme is the README, relative to this package.
const readme = "../../README.md"

// readmeText is README.md cut into what the test reads: the inline code
// spans of its paragraphs (a span broken over lines joined by a space),
// the lines of its fenced code blocks, and its prose outside both.
type readmeText struct {
	spans, codeLines, prose []string
}

var codeSpan = regexp.MustCompile("`([^`]+)`")

func readREADME(t *testing.T) readmeText {
	t.Helper()
	b, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	var r readmeText
	fenced := false
	for _, para := range strings.Split(string(b), "\n\n") {
		var text []string
		for _, line := range strings.Split(para, "\n") {
			switch {
			case strings.HasPrefix(line, "```"):
				fenced = !fenced
			case fenced:
				r.codeLines = append(r.codeLines, line)
			default:
				text = append(text, line)
			}
		}
		p := strings.Join(text, " ")
		for _, m := range codeSpan.FindAllStringSubmatch(p, -1) {
			r.spans = append(r.spans, m[1])
		}
		r.prose = append(r.prose, codeSpan.ReplaceAllString(p, ""))
	}
	return r
}

var (
	// commandWord is "cfi2sframe WORD" (also ~/go/bin/cfi2sframe WORD):
	// WORD a command's name when followed by a blank or the end, not a
	// path such as testdata/example/hello.
	commandWord = regexp.MustCompile(`(?:^|[\s/])cfi2sframe\s+([a-z][a-z0-9-]*)(?:\s|$)`)
	// option is --name or -x where an option can start.
	option = regexp.MustCompile(`(?:^|[\s\[(|])(--[a-zA-Z][a-zA-Z0-9-]*|-[a-zA-Z])(?:[\s\])|=]|$)`)
	// shellEnd ends the part of a command line one program takes.
	shellEnd = regexp.MustCompile(`\s(\||&&|;|>|<)\s`)
)

// hasOption reports whether cmd takes opt (--name, or -x), its own or
// inherited from its parents, help and version included.
func hasOption(cmd *cobra.Command, opt string) bool {
	if name, ok := strings.CutPrefix(opt, "--"); ok {
		return cmd.Flag(name) != nil
	}
	short := strings.TrimPrefix(opt, "-")
	return cmd.Flags().ShorthandLookup(short) != nil || cmd.InheritedFlags().ShorthandLookup(short) != nil
}

// TestREADMECommands: every cfi2sframe command has a paragraph in
// README.md that names it in code (`cfi2sframe dump …`), and every
// command and option the README names in code exists in the command tree.
// An option is the command's when it follows `cfi2sframe [COMMAND]` in a
// span or a line of code (up to a pipe, && or a redirection), and any
// command's when a span starts with it (`--keep-going`) or prose names it
// outside code; options of another program's command line (`objdump
// --sframe`) are not ours. A file argument right after `cfi2sframe` is
// written as a path (testdata/example/hello, ./prog), not to be taken for
// a command.
func TestREADMECommands(t *testing.T) {
	root := newRootCmd()
	root.InitDefaultHelpFlag()
	root.InitDefaultVersionFlag()
	cmds := map[string]*cobra.Command{}
	for _, c := range root.Commands() {
		c.InitDefaultHelpFlag()
		if c.IsAvailableCommand() {
			cmds[c.Name()] = c
		}
	}
	if len(cmds) < 5 {
		t.Fatalf("%d commands under the root", len(cmds))
	}
	r := readREADME(t)
	anyCommandHas := func(opt string) bool {
		if hasOption(root, opt) {
			return true
		}
		for _, c := range cmds {
			if hasOption(c, opt) {
				return true
			}
		}
		return false
	}
	// check checks the command and options named in one command line of
	// a span or a line of code; it returns the command named.
	check := func(code string) string {
		if loc := commandWord.FindStringSubmatchIndex(code); loc != nil {
			word := code[loc[2]:loc[3]]
			cmd := cmds[word]
			if cmd == nil {
				t.Errorf("README.md names `cfi2sframe %s`, which is no command: %q", word, code)
				return ""
			}
			for _, m := range option.FindAllStringSubmatch(code[loc[3]:], -1) {
				if !hasOption(cmd, m[1]) {
					t.Errorf("README.md gives `cfi2sframe %s` the option %s, which it does not take: %q", word, m[1], code)
				}
			}
			return word
		}
		has := anyCommandHas
		if i := strings.Index(code, "cfi2sframe"); i >= 0 && (i == 0 || strings.ContainsAny(code[i-1:i], " /")) {
			code, has = code[i:], func(opt string) bool { return hasOption(root, opt) }
		} else if !strings.HasPrefix(code, "-") {
			return "" // another program's command line
		}
		for _, m := range option.FindAllStringSubmatch(code, -1) {
			if !has(m[1]) {
				t.Errorf("README.md names the option %s, which cfi2sframe does not take: %q", m[1], code)
			}
		}
		return ""
	}
	checkAll := func(code string) (named []string) {
		for _, c := range shellEnd.Split(code, -1) {
			if name := check(strings.TrimSpace(c)); name != "" {
				named = append(named, name)
			}
		}
		return named
	}
	described := map[string]bool{}
	for _, s := range r.spans {
		for _, name := range checkAll(s) {
			described[name] = true
		}
	}
	for _, l := range r.codeLines {
		checkAll(l)
	}
	for _, p := range r.prose {
		for _, m := range option.FindAllStringSubmatch(p, -1) {
			if strings.HasPrefix(m[1], "--") && !anyCommandHas(m[1]) {
				t.Errorf("README.md names the option %s, which no cfi2sframe command takes: %q", m[1], p)
			}
		}
	}
	for name := range cmds {
		if !described[name] {
			t.Errorf("README.md has no paragraph on `cfi2sframe %s` (a span of code naming it, as **`cfi2sframe %s …`** does)", name, name)
		}
	}
}
