// Command licences checks that caravan is open source to the bottom (issue
// 28): every module in its build graph and in the binaries its scripts
// build is under an allowed licence, judged by its LICENSE files with
// github.com/google/licenseclassifier/v2, and no file compiled into caravan
// carries a BUSL header. It also writes the third-party licence report that
// make dist ships. README.md beside this file has the allowlist and the
// rules.
//
//	licences check [-module DIR] [-require-binaries] [-v] [BINARY...]
//	licences modules [-v] [DIR]
//	licences binaries [-module DIR] [-require-binaries] [-v] BINARY...
//	licences headers [DIR]
//	licences report [-module DIR] -o FILE BINARY
//
// It exits 1 when something is not allowed, naming it, and 2 on bad usage.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage: licences check|modules|binaries|headers|report [flags] [args]
  check     [-module DIR] [-require-binaries] [-v] [BINARY...]  all three checks
  modules   [-v] [DIR]       every module in DIR's build graph, tests included
  binaries  [-module DIR] [-require-binaries] [-v] BINARY...  every module a binary embeds
  headers   [DIR]            no file compiled into DIR's main package has a BUSL header
  report    [-module DIR] -o FILE BINARY  the third-party licence report of BINARY`

// run is main without the exit: 0 all allowed, 1 something is not, 2 bad
// usage or an error.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	fs := flag.NewFlagSet("licences "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	module := fs.String("module", ".", "the module checked (caravan's root)")
	requireBins := fs.Bool("require-binaries", false, "a binary that does not exist fails instead of being skipped")
	verbose := fs.Bool("v", false, "list every module with its licence")
	outFile := fs.String("o", "", "report: the file to write")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	c := &checker{out: stdout, verbose: *verbose, requireBins: *requireBins}
	var err error
	switch args[0] {
	case "check":
		err = c.check(*module, fs.Args())
	case "modules":
		dir := *module
		if fs.NArg() > 0 {
			dir = fs.Arg(0)
		}
		err = c.modules(dir)
	case "binaries":
		err = c.binaries(*module, fs.Args())
	case "headers":
		dir := *module
		if fs.NArg() > 0 {
			dir = fs.Arg(0)
		}
		err = c.headers(dir)
	case "report":
		if *outFile == "" || fs.NArg() != 1 {
			fmt.Fprintln(stderr, "licences report: want -o FILE and one BINARY")
			return 2
		}
		err = c.report(*module, fs.Arg(0), *outFile)
	default:
		fmt.Fprintln(stderr, usage)
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, "licences:", err)
		return 2
	}
	if c.failed > 0 {
		fmt.Fprintf(stderr, "licences: FAIL: %d not allowed (README: tools/licences/README.md)\n", c.failed)
		return 1
	}
	if args[0] != "report" {
		fmt.Fprintln(stdout, c.summary())
	}
	return 0
}
