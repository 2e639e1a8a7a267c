// Package busl is a fixture of the licence check.
package busl

// Name names the module.
func Name() string { return "busl" }
