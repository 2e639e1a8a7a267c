// Package ckptcmd is `caravan checkpoint`: list, show and delete the
// checkpoints in a caravan checkpoint store, for operators. It uses the
// store package only (no Nomad): point it at the store directory the
// driver's checkpoint_store option names.
package ckptcmd

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/caravan-nomad/caravan/driver/store"
	icli "github.com/caravan-nomad/caravan/internal/cli"
)

// EnvStore names the store when -store is not given.
const EnvStore = "CARAVAN_CHECKPOINT_STORE"

// EnvStoreConfig names the S3 store config file when -store-config is not
// given.
const EnvStoreConfig = "CARAVAN_CHECKPOINT_STORE_CONFIG"

// gcTimeout bounds delete -gc's wait for commits and restores in flight.
const gcTimeout = 5 * time.Minute

const usage = `usage: caravan checkpoint <command> [-store DIR | -store-config FILE] [args]

commands:
  list [-json]         keys with their generations, newest step, size and time
  show [-json] KEY     one key's generations and manifest meta
  delete [-gc] KEY     delete every generation of KEY (-gc: free unreferenced chunks now)
  delete [-gc] -generation N KEY
                       delete generation N of KEY only: the generation before it becomes
                       the newest (restored, and ordering the key's next commits)
  gc                   free the chunks no manifest references (and, on S3, abort stale
                       multipart uploads); waits for commits and restores in flight
  migrate -to-store-config FILE
                       copy every key's newest generation into the S3 store FILE names

KEY is printed by list: namespace/job[@incarnation]/group/task/slot.
-store defaults to $` + EnvStore + `; -store-config (an S3 store: a file holding the
plugin config's store { ... } block, HCL or JSON) to $` + EnvStoreConfig + `.
Credentials come from the block's credentials_file or AWS_ACCESS_KEY_ID and
AWS_SECRET_ACCESS_KEY.
`

// commandArgs are each command's arguments after its flags, for its usage.
var commandArgs = map[string]string{"list": "", "show": " KEY", "delete": " KEY", "gc": "", "migrate": ""}

// commandFlags registers cmd's own flags on fs and returns what runs it,
// or nil for an unknown command.
func commandFlags(cmd string, fs *flag.FlagSet, stdout io.Writer) func(*store.Store, []string) error {
	switch cmd {
	case "list":
		asJSON := fs.Bool("json", false, "print JSON")
		return func(s *store.Store, a []string) error { return list(s, a, stdout, *asJSON) }
	case "show":
		asJSON := fs.Bool("json", false, "print JSON")
		return func(s *store.Store, a []string) error { return show(s, a, stdout, *asJSON) }
	case "delete":
		gc := fs.Bool("gc", false, "after delete, free the chunks no manifest references")
		gen := fs.Uint64("generation", 0, "only this generation of KEY (as show prints it)")
		return func(s *store.Store, a []string) error {
			if genSet(fs) {
				return delGeneration(s, a, stdout, *gen, *gc)
			}
			return del(s, a, stdout, *gc)
		}
	case "gc":
		return func(s *store.Store, a []string) error { return freeChunks(s, stdout, true) }
	case "migrate":
		toConfig := fs.String("to-store-config", "", "the S3 store to copy into (a file with a store { ... } block)")
		return func(s *store.Store, a []string) error { return migrate(s, a, stdout, *toConfig) }
	}
	return nil
}

// Main runs the subcommand with the process's streams and environment.
func Main(args []string) int { return Run(args, os.Stdout, os.Stderr, os.Getenv) }

// Run runs `caravan checkpoint args...`: 0 on success, 1 on failure, 2 on
// bad usage.
func Run(args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	cmd, rest := args[0], args[1:]
	if cmd == "-h" || cmd == "-help" || cmd == "--help" || cmd == "help" {
		fmt.Fprint(stdout, usage)
		return 0
	}
	fs := flag.NewFlagSet("caravan checkpoint "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	root := fs.String("store", getenv(EnvStore), "checkpoint store directory (default $"+EnvStore+")")
	storeConfig := fs.String("store-config", getenv(EnvStoreConfig), "S3 checkpoint store: a file with a store { ... } block (default $"+EnvStoreConfig+")")
	run := commandFlags(cmd, fs, stdout)
	if run == nil {
		fmt.Fprintf(stderr, "caravan checkpoint: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: caravan checkpoint %s [flags]%s\n\nFlags:\n", cmd, commandArgs[cmd])
		icli.PrintFlags(stderr, fs)
	}
	if err := fs.Parse(rest); err != nil {
		return icli.ParseExit(err)
	}
	if *root == "" && *storeConfig == "" {
		fmt.Fprintf(stderr, "caravan checkpoint %s: -store: no store given (pass -store DIR or -store-config FILE, or set %s or %s)\n",
			cmd, EnvStore, EnvStoreConfig)
		return 2
	}
	if fsSet(fs, "store") && fsSet(fs, "store-config") {
		fmt.Fprintf(stderr, "caravan checkpoint %s: -store-config: give -store DIR or -store-config FILE, not both\n", cmd)
		return 2
	}
	var s *store.Store
	var err error
	if *storeConfig != "" && fsSet(fs, "store-config") || *storeConfig != "" && !fsSet(fs, "store") {
		s, err = openS3(*storeConfig)
	} else {
		s, err = openExisting(*root)
	}
	if err == nil {
		err = run(s, fs.Args())
	}
	if err != nil {
		fmt.Fprintf(stderr, "caravan checkpoint %s: %v\n", cmd, err)
		if errors.Is(err, errUsage) {
			return 2
		}
		return 1
	}
	return 0
}

var errUsage = errors.New("usage")

// fsSet reports whether the flag name was given.
func fsSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// genSet reports whether -generation was given (0 is refused by the store
// as a generation no key has).
func genSet(fs *flag.FlagSet) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == "generation" })
	return set
}

// openExisting opens a store that already exists: store.Open would create
// the store's directories in any writable directory it is given.
func openExisting(root string) (*store.Store, error) {
	fi, err := os.Stat(filepath.Join(root, ".chunks"))
	if err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("-store: %s is not a caravan checkpoint store (no .chunks directory)", root)
	}
	return store.Open(root, store.Options{})
}

// oneKey parses the single KEY argument.
func oneKey(args []string) (store.Key, error) {
	if len(args) != 1 {
		return store.Key{}, fmt.Errorf("%w: want exactly one KEY argument, got %d", errUsage, len(args))
	}
	return store.ParseKey(args[0])
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
