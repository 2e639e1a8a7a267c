package simulator

import "fmt"

// ReplayPhilly is implemented in philly_replay.go.
func ReplayPhilly(cfg Config, pol, path string) (string, error) {
	return "", fmt.Errorf("philly replay not implemented yet")
}
