package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/shoenig/test/must"
)

// readmeCommands returns the commands a Markdown text shows: its inline
// code spans and the lines of its sh code blocks, comments dropped.
func readmeCommands(text string) []string {
	var out []string
	fenced := regexp.MustCompile("(?s)```sh\n(.*?)```")
	for _, m := range fenced.FindAllStringSubmatch(text, -1) {
		for _, line := range strings.Split(m[1], "\n") {
			if i := strings.Index(line, "#"); i >= 0 {
				line = line[:i]
			}
			if line = strings.TrimSpace(line); line != "" {
				out = append(out, line)
			}
		}
	}
	text = fenced.ReplaceAllString(text, "")
	text = regexp.MustCompile("(?s)```.*?```").ReplaceAllString(text, "")
	for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(text, -1) {
		out = append(out, strings.Join(strings.Fields(m[1]), " "))
	}
	return out
}

// makeTargets are the targets GNUmakefile defines.
func makeTargets(t *testing.T) map[string]bool {
	t.Helper()
	mk, err := os.ReadFile("GNUmakefile")
	must.NoError(t, err)
	targets := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^([a-z][a-z0-9-]*):`).FindAllStringSubmatch(string(mk), -1) {
		targets[m[1]] = true
	}
	return targets
}

// TestREADMECommandsRunAsWritten: every command the README shows names
// what exists from the repository root: make targets, caravan
// subcommands, Go packages and repository files; the other Markdown files'
// make targets and subcommands exist too.
func TestREADMECommandsRunAsWritten(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	must.NoError(t, err)
	checked := checkCommands(t, "README.md", readmeCommands(string(readme)), true)
	must.Greater(t, 20, checked)
	docs, err := filepath.Glob("*/*.md")
	must.NoError(t, err)
	more, err := filepath.Glob("*/*/*.md")
	must.NoError(t, err)
	for _, doc := range append(docs, more...) {
		if strings.HasPrefix(doc, "build/") {
			continue
		}
		text, err := os.ReadFile(doc)
		must.NoError(t, err)
		checkCommands(t, doc, readmeCommands(string(text)), false)
	}
}

// checkCommands checks the commands of one document and returns how many
// names it checked; withPaths checks repository paths too (they are
// relative to the root only in the top README).
func checkCommands(t *testing.T, doc string, cmds []string, withPaths bool) int {
	t.Helper()
	targets := makeTargets(t)
	repoPath := regexp.MustCompile(`^\.?/?((jobspecs|scripts|docs|device|driver|planner|trainer|progress|python|e2e|demo|testbed|internal|validate)(/[A-Za-z0-9_.*-]+)*/?)$`)
	checked := 0
	for _, cmd := range cmds {
		f := shellFields(cmd)
		if len(f) == 0 {
			continue
		}
		switch {
		case f[0] == "make" && len(f) > 1:
			for _, a := range f[1:] {
				if !strings.Contains(a, "=") {
					must.True(t, targets[a], must.Sprintf("%s: %q: no make target %q", doc, cmd, a))
					checked++
				}
			}
		case (f[0] == "caravan" || f[0] == "build/caravan") && len(f) > 1:
			for _, sub := range strings.Split(f[1], "|") {
				if sub == "executor" || strings.HasPrefix(sub, "-") || strings.HasSuffix(sub, ":") {
					continue // the driver's executor re-exec: not in the table
				}
				_, ok := subcommands[sub]
				must.True(t, ok, must.Sprintf("%s: %q: no caravan subcommand %q", doc, cmd, sub))
				checked++
			}
		}
		if withPaths && (f[0] == "make" || f[0] == "go" || f[0] == "caravan" || f[0] == "build/caravan" || f[0] == "scripts/cluster.sh") {
			for _, a := range f[1:] {
				if m := repoPath.FindStringSubmatch(a); m != nil && !strings.Contains(a, "*") {
					p := strings.TrimSuffix(strings.TrimPrefix(m[1], "./"), "/...")
					_, err := os.Stat(filepath.FromSlash(p))
					must.NoError(t, err, must.Sprintf("%s: %q names %s", doc, cmd, a))
					checked++
				}
			}
		}
	}
	return checked
}

// shellFields splits a command line into words, a double-quoted part
// staying within its word.
func shellFields(cmd string) []string {
	var out []string
	var cur strings.Builder
	quoted, inWord := false, false
	for _, r := range cmd {
		switch {
		case r == '"':
			quoted, inWord = !quoted, true
		case r == ' ' && !quoted:
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out
}

// slug is GitHub's anchor for a Markdown heading: lower case, punctuation
// other than '-' and '_' dropped, spaces as '-'.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors are the anchors of a Markdown text: its headings' slugs (a
// repeated heading's with -1, -2, ...) and explicit <a name|id="..."> tags.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	text = regexp.MustCompile("(?s)```.*?```").ReplaceAllString(text, "")
	for _, m := range regexp.MustCompile(`(?m)^#{1,6}\s+(.+?)\s*#*$`).FindAllStringSubmatch(text, -1) {
		s := slug(m[1])
		for i := 1; out[s]; i++ {
			if !out[fmt.Sprintf("%s-%d", slug(m[1]), i)] {
				s = fmt.Sprintf("%s-%d", slug(m[1]), i)
			}
		}
		out[s] = true
	}
	for _, m := range regexp.MustCompile(`<a (?:name|id)="([^"]+)"`).FindAllStringSubmatch(text, -1) {
		out[m[1]] = true
	}
	return out
}

// TestDocLinksResolve: every relative link of the repository's Markdown
// files names a file that exists, and its #anchor a heading of that file
// (a renamed heading broke python/README.md's link into driver/README.md).
func TestDocLinksResolve(t *testing.T) {
	var docs []string
	must.NoError(t, filepath.WalkDir(".", func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (p == "build" || strings.HasPrefix(d.Name(), ".")) && p != "." {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			docs = append(docs, p)
		}
		return nil
	}))
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	checked := 0
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		must.NoError(t, err)
		text := regexp.MustCompile("(?s)```.*?```").ReplaceAllString(string(b), "")
		for _, m := range link.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := doc
			if file != "" {
				path = filepath.Join(filepath.Dir(doc), file)
				_, err := os.Stat(path)
				must.NoError(t, err, must.Sprintf("%s links to %s, which does not exist", doc, target))
			}
			if anchor == "" || !strings.HasSuffix(path, ".md") {
				continue
			}
			tb, err := os.ReadFile(path)
			must.NoError(t, err)
			must.True(t, anchors(string(tb))[anchor], must.Sprintf("%s links to %s: %s has no heading #%s", doc, target, path, anchor))
			checked++
		}
	}
	must.Greater(t, 10, checked)
}
