package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
)

// checker runs the checks, printing each thing not allowed as it finds it,
// and counts.
type checker struct {
	out         io.Writer
	verbose     bool
	requireBins bool
	cls         *Classifier

	failed  int
	seen    map[string]bool // modules judged, by Module.String()
	didBins bool
	didHdrs bool
	bins    int
	skipped []string
	files   int
}

func (c *checker) classifier() (*Classifier, error) {
	if c.cls == nil {
		cls, err := NewClassifier()
		if err != nil {
			return nil, err
		}
		c.cls = cls
	}
	return c.cls, nil
}

// check runs all three: the build graph's modules, the binaries' and the
// headers of what is compiled into the main package.
func (c *checker) check(dir string, bins []string) error {
	if err := c.modules(dir); err != nil {
		return err
	}
	if err := c.binaries(dir, bins); err != nil {
		return err
	}
	return c.headers(dir)
}

// judge judges modules, printing each one not allowed with its licence and
// why; where names a binary ("" for the build graph).
func (c *checker) judge(mods []Module, where string) error {
	cls, err := c.classifier()
	if err != nil {
		return err
	}
	if c.seen == nil {
		c.seen = map[string]bool{}
	}
	for _, m := range mods {
		v := cls.Judge(m)
		c.seen[m.String()] = true
		if c.verbose {
			fmt.Fprintf(c.out, "  %-60s %s%s\n", m.String(), v.Licences(), where)
		}
		if len(v.Problems) > 0 {
			c.failed++
			fmt.Fprintf(c.out, "NOT ALLOWED%s: %s: %s (%s)\n", where, m.String(), v.Licences(), strings.Join(v.Problems, "; "))
		}
	}
	return nil
}

// modules judges every module in the build graph of dir's packages and
// their tests, and the standard library.
func (c *checker) modules(dir string) error {
	mods, err := GraphModules(dir)
	if err != nil {
		return err
	}
	std, err := StdModule("")
	if err != nil {
		return err
	}
	return c.judge(append(mods, std), "")
}

// binaries judges every module embedded in each binary; one that does not
// exist is skipped (or fails, with -require-binaries).
func (c *checker) binaries(dir string, bins []string) error {
	c.didBins = true
	local, err := LocalModule(dir)
	if err != nil {
		return err
	}
	for _, bin := range bins {
		if _, err := os.Stat(bin); errors.Is(err, fs.ErrNotExist) {
			if c.requireBins {
				c.failed++
				fmt.Fprintf(c.out, "NOT ALLOWED: %s: not built (-require-binaries)\n", bin)
			} else {
				c.skipped = append(c.skipped, bin)
			}
			continue
		}
		mods, err := BinaryModules(bin, local)
		if err != nil {
			return err
		}
		c.bins++
		if err := c.judge(mods, " (in "+bin+")"); err != nil {
			return err
		}
	}
	return nil
}

// headers checks every file compiled into the main package in dir.
func (c *checker) headers(dir string) error {
	c.didHdrs = true
	files, err := CompiledFiles(dir)
	if err != nil {
		return err
	}
	for _, f := range files {
		why, err := HeaderProblem(f)
		if err != nil {
			return err
		}
		c.files++
		if why != "" {
			c.failed++
			fmt.Fprintf(c.out, "NOT ALLOWED: %s is compiled into the binary and %s\n", f, why)
		}
	}
	return nil
}

// summary is the one line make licences ends with.
func (c *checker) summary() string {
	parts := []string{fmt.Sprintf("%d modules", len(c.seen))}
	if c.didBins {
		s := fmt.Sprintf("%d binaries", c.bins)
		if len(c.skipped) > 0 {
			s += fmt.Sprintf(" (%d not built, skipped: %s)", len(c.skipped), strings.Join(c.skipped, " "))
		}
		parts = append(parts, s)
	}
	if c.didHdrs {
		parts = append(parts, fmt.Sprintf("%d files compiled into the main package", c.files))
	}
	return "licences: " + strings.Join(parts, ", ") + ": all allowed"
}
