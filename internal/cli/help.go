package cli

import (
	"errors"
	"flag"
	"io"
	"reflect"
	"strings"
)

// IsHelp reports whether args ask for help: -h, -help or --help alone.
func IsHelp(args []string) bool {
	return len(args) == 1 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help")
}

// ParseExit is the exit status of a flag set's parse error: 0 for -h (the
// flag set printed its usage once), else ExitUsage.
func ParseExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return ExitUsage
}

// PrintFlags prints fs's flags to w as flag.PrintDefaults does, with one
// default per flag: Go's "(default X)" is left out when the flag's own
// usage says what its default is (it holds the word "default"), as for
// flags whose default comes from the environment.
func PrintFlags(w io.Writer, fs *flag.FlagSet) {
	saved := map[*flag.Flag]string{}
	fs.VisitAll(func(f *flag.Flag) {
		if !strings.Contains(f.Usage, "default") {
			return
		}
		if z, ok := zeroValue(f); ok {
			saved[f] = f.DefValue
			f.DefValue = z
		}
	})
	out := fs.Output()
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(out)
	for f, d := range saved {
		f.DefValue = d
	}
}

// zeroValue is the text of f's zero value, which PrintDefaults does not
// print as a default.
func zeroValue(f *flag.Flag) (string, bool) {
	t := reflect.TypeOf(f.Value)
	if t.Kind() != reflect.Pointer {
		return "", false
	}
	v, ok := reflect.New(t.Elem()).Interface().(flag.Value)
	if !ok {
		return "", false
	}
	return v.String(), true
}
