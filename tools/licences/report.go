package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
)

// reportTitle opens every report; scripts/dist.sh --check looks for it.
const reportTitle = "Third-party licences"

// Report writes the third-party licence report of a binary: a table of
// every module linked into it (from its build information) with its
// licence, then each module's licence files in full. The binary's own main
// module is left out when it is the local module (its LICENSE ships beside
// the report). It fails, writing nothing, when a module is not allowed.
func (c *checker) report(dir, bin, file string) error {
	local, err := LocalModule(dir)
	if err != nil {
		return err
	}
	mods, err := BinaryModules(bin, local)
	if err != nil {
		return err
	}
	if mods[0].Path == local.Path {
		mods = mods[1:]
	}
	if err := c.judge(mods, " (in "+bin+")"); err != nil || c.failed > 0 {
		return err
	}
	var verdicts []Verdict
	for _, m := range mods {
		verdicts = append(verdicts, c.cls.Judge(m))
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s of %s\n\n", reportTitle, filepath.Base(bin))
	fmt.Fprintf(&b, "Every module linked into this binary (its Go build information), with the\n")
	fmt.Fprintf(&b, "licence of its LICENSE, COPYING and NOTICE files as github.com/google/licenseclassifier/v2\n")
	fmt.Fprintf(&b, "names it, then those files in full. \"std\" is the Go standard library.\n\n")
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MODULE\tVERSION\tLICENCE")
	for _, v := range verdicts {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", displayPath(v.Module), displayVersion(v.Module), v.Licences())
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, v := range verdicts {
		for _, f := range v.Files {
			text, err := os.ReadFile(f.Path)
			if err != nil {
				return fmt.Errorf("reading %s: %w", f.Path, err)
			}
			fmt.Fprintf(&b, "\n%s\n%s %s: %s (%s)\n%s\n\n", strings.Repeat("=", 78), displayPath(v.Module),
				displayVersion(v.Module), f.Name, strings.Join(f.Licences, ", "), strings.Repeat("-", 78))
			b.Write(bytes.TrimRight(text, "\n"))
			b.WriteString("\n")
		}
	}
	return os.WriteFile(file, b.Bytes(), 0o644)
}

func displayPath(m Module) string {
	if m.Replace != nil && m.Replace.Version != "" && m.Replace.Path != m.Path {
		return m.Path + " => " + m.Replace.Path
	}
	return m.Path
}

func displayVersion(m Module) string {
	if m.Replace != nil && m.Replace.Version != "" {
		return m.Replace.Version
	}
	return m.Version
}
