// Command header is a fixture of the licence check: its main package
// compiles in a file with a BUSL header (vendored.go).
package main

import "fmt"

func main() { fmt.Println(vendored()) }
