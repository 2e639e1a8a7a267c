package objectstore

import (
	"strings"

	"github.com/caravan-nomad/caravan/driver/store"
)

// Object names, relative to the backend's prefix.
const (
	objChunks  = "chunks/"
	objKeys    = "keys/"
	objLeases  = "leases/"
	objGCLease = objLeases + "gc"
	objLatest  = "latest"
	objWriters = "writers/" // writer leases
	objMarker  = "caravan-store.json"
	// objLeaseIndex names the live commit and restore leases, so GC reads
	// them by key (with a Swapper; see lease_index.go). It is not
	// below leases/, where plugins of older versions would take it for a
	// lease.
	objLeaseIndex = "lease-index.json"
)

func chunkObject(d string) string { return objChunks + d[:2] + "/" + d }

// keyObjectPrefix is the key's folder of manifests: keys/<escaped parts>/.
func keyObjectPrefix(k store.Key) (string, error) {
	parts, err := k.Parts()
	if err != nil {
		return "", err
	}
	return objKeys + strings.Join(parts, "/") + "/", nil
}
