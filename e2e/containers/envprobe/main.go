// Command envprobe is the program of the caravan-envprobe test image (a
// FROM scratch image, scripts/build-images.sh): it prints its environment,
// sorted, one NAME=value a line, then which of the paths given as arguments
// exist and are directories, then sleeps until stopped, so the container e2e
// tests read what a task sees inside its container.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"sort"
	"syscall"
)

func main() {
	env := os.Environ()
	sort.Strings(env)
	for _, kv := range env {
		fmt.Println(kv)
	}
	for _, p := range os.Args[1:] {
		st, err := os.Stat(p)
		fmt.Printf("PATH %s dir=%t err=%v\n", p, err == nil && st.IsDir(), err)
	}
	fmt.Println("ENVPROBE_DONE=1")
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
}
