package cli

import "strings"

// Example is one example command line of a usage text.
type Example struct {
	// Line is the example as written, without its comment.
	Line string
	// Args are the arguments after the command; optional parts written
	// in brackets ([--nodes 128]) are kept, without the brackets.
	Args []string
	// Stdout is the file the example redirects its output to (> FILE).
	Stdout string
}

// Examples returns the example lines of usage that start with command
// ("caravan planner simulate"), so tests can run them as written.
func Examples(usage, command string) []Example {
	var out []Example
	for _, line := range strings.Split(usage, "\n") {
		line = strings.TrimSpace(line)
		if i := strings.Index(line, " #"); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		rest, ok := strings.CutPrefix(line, command+" ")
		if !ok && line != command {
			continue
		}
		if !ok {
			rest = ""
		}
		ex := Example{Line: line}
		if i := strings.Index(rest, ">"); i >= 0 {
			ex.Stdout = strings.TrimSpace(rest[i+1:])
			rest = rest[:i]
		}
		for _, f := range strings.Fields(rest) {
			if f = strings.Trim(f, "[]"); f != "" {
				ex.Args = append(ex.Args, f)
			}
		}
		out = append(out, ex)
	}
	return out
}
