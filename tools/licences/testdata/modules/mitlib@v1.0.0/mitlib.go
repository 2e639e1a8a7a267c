// Package mitlib is a fixture of the licence check.
package mitlib

// Name names the module.
func Name() string { return "mitlib" }
