package main

import (
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	classifier "github.com/google/licenseclassifier/v2"
	"github.com/google/licenseclassifier/v2/assets"
)

// allowed is the allowlist of licences, by the classifier's names (SPDX
// identifiers). Every one is OSI-approved; README.md says why each is here.
var allowed = map[string]bool{
	"Apache-2.0":                    true,
	"BSD-2-Clause":                  true,
	"BSD-2-Clause-FreeBSD":          true,
	"BSD-3-Clause":                  true,
	"ISC":                           true,
	"MIT":                           true,
	"MPL-2.0":                       true,
	"MPL-2.0-no-copyleft-exception": true,
	"Unicode-DFS-2016":              true,
}

// busl is the Terms part of the Business Source License 1.1, the part every
// BUSL-1.1 licence file carries. The classifier's own BUSL entry also holds
// MariaDB's covenants, which HashiCorp's licence files leave out, so they
// fall below its threshold; with this entry they are named BUSL-1.1 rather
// than unclassified (failing either way).
//
//go:embed corpus/BUSL-1.1.txt
var busl []byte

// Classifier names the licences in licence files, caching per file.
type Classifier struct {
	c     *classifier.Classifier
	cache map[string]File
}

// NewClassifier loads the classifier's corpus and caravan's BUSL entry.
func NewClassifier() (*Classifier, error) {
	c, err := assets.DefaultClassifier()
	if err != nil {
		return nil, fmt.Errorf("loading the licence classifier: %w", err)
	}
	c.AddContent("License", "BUSL-1.1", "terms", busl)
	return &Classifier{c: c, cache: map[string]File{}}, nil
}

// Identify names the licences found in text, sorted and deduplicated:
// whole licence texts and their standard notices (headers).
func (c *Classifier) Identify(text []byte) []string {
	seen := map[string]bool{}
	for _, m := range c.c.Match(text).Matches {
		if m.MatchType == "License" || m.MatchType == "Header" {
			seen[m.Name] = true
		}
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// File is one licence file of a module and the licences found in it.
type File struct {
	Name     string // base name, e.g. LICENSE
	Path     string
	Licences []string
	SPDX     string // the file's own SPDX-License-Identifier expression, if any
	Docs     bool   // it covers documentation only (LICENSE.docs): listed, not judged
}

// Verdict is what the check says of one module.
type Verdict struct {
	Module   Module
	Files    []File
	Problems []string // empty: allowed
}

// Licences lists the licences of all the module's files.
func (v Verdict) Licences() string {
	seen := map[string]bool{}
	var out []string
	for _, f := range v.Files {
		if f.SPDX != "" && spdxAllowed(f.SPDX) && len(f.Licences) > 1 {
			if !seen[f.SPDX] {
				seen[f.SPDX] = true
				out = append(out, f.SPDX)
			}
			continue
		}
		for _, l := range f.Licences {
			if f.Docs {
				l += " (docs)"
			}
			if !seen[l] {
				seen[l] = true
				out = append(out, l)
			}
		}
	}
	if len(out) == 0 {
		return "unclassified"
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// isLicenceFile tells the files a module's licence is judged by: LICENSE,
// LICENCE, COPYING, UNLICENSE and NOTICE, with any suffix (LICENSE.md,
// LICENSE-APACHE).
func isLicenceFile(name string) bool {
	n := strings.ToLower(name)
	for _, p := range []string{"license", "licence", "copying", "unlicense", "notice"} {
		if strings.HasPrefix(n, p) {
			return true
		}
	}
	return false
}

func isNotice(name string) bool { return strings.HasPrefix(strings.ToLower(name), "notice") }

// Judge classifies the licence files in the module's own directory (never
// a parent's: a sub-module without a LICENSE of its own fails). The rule:
// at least one licence is found; every licence found in any of its files is
// allowed; every LICENSE/COPYING file names a licence (a NOTICE file may
// name none: it carries attributions).
func (c *Classifier) Judge(m Module) Verdict {
	v := Verdict{Module: m}
	if m.Dir == "" {
		why := "no source: not in the module cache"
		if m.fetchErr != "" {
			why += " (go mod download: " + m.fetchErr + ")"
		} else if m.Replace != nil && m.Replace.Version == "" {
			why = "no source: replaced by a directory of its build that is not here"
		}
		v.Problems = append(v.Problems, why)
		return v
	}
	entries, err := os.ReadDir(m.Dir)
	if err != nil {
		v.Problems = append(v.Problems, fmt.Sprintf("reading its directory: %v", err))
		return v
	}
	for _, e := range entries {
		if !e.Type().IsRegular() || !isLicenceFile(e.Name()) {
			continue
		}
		f, err := c.file(filepath.Join(m.Dir, e.Name()))
		if err != nil {
			v.Problems = append(v.Problems, err.Error())
			continue
		}
		v.Files = append(v.Files, f)
		v.Problems = append(v.Problems, fileProblems(f)...)
	}
	if len(v.Files) == 0 {
		v.Problems = append(v.Problems, "unclassified: no LICENSE, COPYING or NOTICE file in "+m.Dir)
	} else if v.Licences() == "unclassified" && len(v.Problems) == 0 {
		v.Problems = append(v.Problems, "unclassified: no licence found in "+fileNames(v.Files))
	}
	return v
}

// fileProblems judges one licence file. A file that declares a choice
// (SPDX-License-Identifier: BSD-3-Clause OR GPL-2.0-only) that the
// allowlist satisfies may also carry the texts of its other alternatives.
func fileProblems(f File) []string {
	if f.Docs {
		return nil
	}
	if len(f.Licences) == 0 && !isNotice(f.Name) {
		return []string{f.Name + ": unclassified"}
	}
	var problems []string
	for _, l := range f.Licences {
		if !allowed[l] && !(f.SPDX != "" && spdxAllowed(f.SPDX) && spdxNames(f.SPDX, l)) {
			problems = append(problems, fmt.Sprintf("%s: %s is not allowed", f.Name, l))
		}
	}
	return problems
}

// isDocsLicence tells a licence file that covers documentation only
// (LICENSE.docs, LICENSE-docs): documentation is not linked into a binary.
func isDocsLicence(name string) bool {
	n := strings.ToLower(name)
	return strings.HasSuffix(n, ".docs") || strings.HasSuffix(n, "-docs")
}

func (c *Classifier) file(path string) (File, error) {
	if f, ok := c.cache[path]; ok {
		return f, nil
	}
	f := File{Name: filepath.Base(path), Path: path, Docs: isDocsLicence(filepath.Base(path))}
	b, err := os.ReadFile(path)
	if err != nil {
		return f, fmt.Errorf("reading %s: %w", f.Name, err)
	}
	f.Licences = c.Identify(b)
	f.SPDX = spdxExpr(b)
	c.cache[path] = f
	return f, nil
}

func fileNames(fs []File) string {
	names := make([]string, len(fs))
	for i, f := range fs {
		names[i] = f.Name
	}
	return strings.Join(names, ", ")
}
