// Command image is the caravan binary of the trainer container image
// (scripts/build-images.sh caravan-trainer): `caravan trainer ...` and
// `caravan version`, built without cgo so that it runs FROM scratch. The
// full caravan binary needs cgo (the task driver's executor, from Nomad's
// v1.6 plugin SDK, links runc's cgroup code), and a container runs only the
// trainer.
package main

import (
	"fmt"
	"os"

	"github.com/caravan-nomad/caravan/internal/version"
	"github.com/caravan-nomad/caravan/trainer"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: caravan trainer [args] | caravan version (the trainer image's caravan: the plugins, planner and tools are in the full binary)")
		return 2
	}
	switch args[0] {
	case "trainer":
		return trainer.Main(args[1:])
	case "version", "-v", "-version", "--version":
		fmt.Println(version.String())
		return 0
	default:
		fmt.Fprintf(os.Stderr, "caravan (trainer image): unknown command %q: this image's binary runs only `trainer` and `version`\n", args[0])
		return 2
	}
}
