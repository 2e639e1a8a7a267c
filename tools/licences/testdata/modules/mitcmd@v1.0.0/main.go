// Command mitcmd is a fixture of the licence check: an MIT binary whose
// only dependency is MIT.
package main

import (
	"fmt"

	"example.com/mitlib"
)

func main() { fmt.Println(mitlib.Name()) }
