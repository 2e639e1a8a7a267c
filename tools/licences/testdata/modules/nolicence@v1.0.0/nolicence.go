// Package nolicence is a fixture of the licence check.
package nolicence

// Name names the module.
func Name() string { return "nolicence" }
