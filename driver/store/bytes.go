package store

import "github.com/caravan-nomad/caravan/internal/bytesize"

// HumanBytes renders a byte count the way Nomad's UI does (KiB, MiB, ...),
// for events and the operators' CLI (bytesize.Human).
func HumanBytes(n int64) string { return bytesize.Human(n) }
