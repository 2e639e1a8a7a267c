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
	"Apache-2.0":       true,
	"BSD-2-Clause":     true,
	"BSD-3-Clause":     true,
	"ISC":              true,
	"MIT":              true,
	"MPL-2.0":          true,
	"Unicode-DFS-2016": true,
}

// Review is a module a person has judged where its licence files cannot
// be: the licence it is under (an SPDX expression), and why.
type Review struct {
	Licence string
	Why     string
}

// reviewed lists, by path@version (a new version is judged again), the
// modules whose files the rules cannot judge, each with the evidence.
// README.md lists them too.
var reviewed = map[string]Review{
	// In the Nomad v1.6 agent (go-discover's vSphere provider).
	"github.com/hashicorp/vic@v1.5.1-0.20190403131502-bbfe86ec9443": {"Apache-2.0",
		"its LICENSE is VIC's Apache-2.0 followed by the licences of the components VIC's product bundles; " +
			"the one package linked, pkg/vsphere/tags, carries Apache-2.0 headers"},
	// In the Nomad v1.6 agent (the CLI's spinner, through go-glint).
	"github.com/tj/go-spin@v1.1.0": {"MIT", "no LICENSE file; its Readme.md's License section says MIT"},
	// In the Nomad v1.6 agent (libcap, for capabilities).
	"kernel.org/pub/linux/libs/security/libcap/psx@v1.2.66": {"BSD-3-Clause",
		"its License offers BSD-3-Clause or GPL-2.0, one or the other (v1.2.71 says so in an SPDX line)"},
	// In SeaweedFS.
	"github.com/apache/thrift@v0.24.0": {"Apache-2.0",
		"its LICENSE is Apache-2.0 followed by the terms of bundled files of other languages and of its build " +
			"(an autoconf macro under the GNU all-permissive licence); the Go library, lib/go, carries Apache-2.0 headers"},
	"github.com/google/flatbuffers/go@v0.0.0-20230108230133-3b8644d32c50": {"Apache-2.0",
		"a sub-module whose zip holds no LICENSE; the flatbuffers repository's LICENSE.txt, one directory up, is Apache-2.0"},
	// In Consul v1.14.11.
	"github.com/hashicorp/consul-net-rpc@v0.0.0-20220307172752-3602954411b4": {"BSD-3-Clause AND MIT",
		"no LICENSE at its root: it forks Go's net/rpc (its files' headers: the Go Authors' BSD licence), " +
			"hashicorp/go-msgpack (MIT) and hashicorp/net-rpc-msgpackrpc (MIT: its LICENSE.md is in that sub-directory)"},
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
	Reviewed *Review  // judged by a person, not by its files
}

// Licences lists the licences of all the module's files.
func (v Verdict) Licences() string {
	if v.Reviewed != nil {
		return v.Reviewed.Licence + " (reviewed: " + v.Reviewed.Why + ")"
	}
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
	if r, ok := reviewed[m.Path+"@"+m.Version]; ok && m.Replace == nil {
		v.Reviewed = &r
		if !spdxAllowed(r.Licence) {
			v.Problems = append(v.Problems, fmt.Sprintf("reviewed as %s, which is not allowed", r.Licence))
		}
		v.Files, _ = c.files(m.Dir)
		return v
	}
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
	files, err := c.files(m.Dir)
	if err != nil {
		v.Problems = append(v.Problems, err.Error())
		return v
	}
	v.Files = files
	for _, f := range files {
		v.Problems = append(v.Problems, fileProblems(f)...)
	}
	if len(v.Files) == 0 {
		v.Problems = append(v.Problems, "unclassified: no LICENSE, COPYING or NOTICE file in "+m.Dir)
	} else if !judged(v.Files) && len(v.Problems) == 0 {
		v.Problems = append(v.Problems, "unclassified: no licence found in "+fileNames(v.Files))
	}
	return v
}

// judged tells whether a licence was found in a file that is judged (not
// one for documentation only).
func judged(files []File) bool {
	for _, f := range files {
		if !f.Docs && len(f.Licences) > 0 {
			return true
		}
	}
	return false
}

// files classifies the licence files in dir.
func (c *Classifier) files(dir string) ([]File, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading its directory: %w", err)
	}
	var files []File
	for _, e := range entries {
		if !e.Type().IsRegular() || !isLicenceFile(e.Name()) {
			continue
		}
		f, err := c.file(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
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
