// Package bytesize renders byte counts for people: the driver's events, the
// store's operator CLI and the testbed's tables share one format.
package bytesize

import "fmt"

// Human renders a byte count the way Nomad's UI does (KiB, MiB, ...).
func Human(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
