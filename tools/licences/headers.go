package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// CompiledFiles lists every file compiled or embedded into the main
// package in dir (go list -deps ., tests left out), standard library left
// out: Go files, cgo, C, assembly and embedded files.
func CompiledFiles(dir string) ([]string, error) {
	out, err := goCmd(dir, "list", "-deps", "-json=Dir,Standard,GoFiles,CgoFiles,CFiles,CXXFiles,HFiles,SFiles,EmbedFiles", ".")
	if err != nil {
		return nil, err
	}
	var files []string
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			Dir                                                             string
			Standard                                                        bool
			GoFiles, CgoFiles, CFiles, CXXFiles, HFiles, SFiles, EmbedFiles []string
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("go list: decoding its output: %w", err)
		}
		if p.Standard {
			continue
		}
		for _, list := range [][]string{p.GoFiles, p.CgoFiles, p.CFiles, p.CXXFiles, p.HFiles, p.SFiles, p.EmbedFiles} {
			for _, f := range list {
				files = append(files, filepath.Join(p.Dir, f))
			}
		}
	}
	return files, nil
}

// buslText is the licence's own name, which every BUSL licence text and
// most BUSL headers carry.
const buslText = "Business Source License"

// HeaderProblem says why a file's header is not allowed, or "" when it is:
// an SPDX-License-Identifier line whose expression no allowed licence
// satisfies, or the words "Business Source License".
func HeaderProblem(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", path, err)
	}
	if bytes.Contains(b, []byte(buslText)) {
		return "mentions the " + buslText, nil
	}
	for _, expr := range spdxExprs(b) {
		if !spdxAllowed(expr) {
			return "SPDX-License-Identifier: " + expr, nil
		}
	}
	return "", nil
}

// spdxExprs returns the expression of every SPDX-License-Identifier line.
func spdxExprs(b []byte) []string {
	var exprs []string
	for _, line := range strings.Split(string(b), "\n") {
		_, expr, ok := strings.Cut(line, "SPDX-License-Identifier:")
		if ok {
			exprs = append(exprs, strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(expr), "*/")))
		}
	}
	return exprs
}

// spdxExpr is the SPDX-License-Identifier expression of a licence file's
// head (its first 5 lines): the file's own declaration, not that of a
// component whose licence it quotes further down.
func spdxExpr(b []byte) string {
	head := strings.SplitN(string(b), "\n", 6)
	if len(head) > 5 {
		head = head[:5]
	}
	if e := spdxExprs([]byte(strings.Join(head, "\n"))); len(e) > 0 {
		return e[0]
	}
	return ""
}

// spdxNames tells whether an SPDX expression names the licence as the
// classifier names it (GPL-2.0 for GPL-2.0-only and GPL-2.0-or-later).
func spdxNames(expr, licence string) bool {
	for _, f := range strings.Fields(strings.NewReplacer("(", " ", ")", " ").Replace(expr)) {
		id := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(f, "+"), "-only"), "-or-later")
		if id == licence {
			return true
		}
	}
	return false
}

// spdxAllowed evaluates an SPDX licence expression against the allowlist:
// one of its OR alternatives must have every AND term allowed. A WITH
// exception is judged by its licence alone; parentheses are not nested.
func spdxAllowed(expr string) bool {
	expr = strings.NewReplacer("(", " ", ")", " ").Replace(expr)
	for _, alt := range strings.Split(expr, " OR ") {
		ok := true
		for _, term := range strings.Split(alt, " AND ") {
			id, _, _ := strings.Cut(strings.TrimSpace(term), " WITH ")
			if !allowed[strings.TrimSpace(id)] {
				ok = false
			}
		}
		if ok {
			return true
		}
	}
	return false
}
