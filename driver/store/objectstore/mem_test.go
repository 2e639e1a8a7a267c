package objectstore_test

import (
	"testing"

	"github.com/caravan-nomad/caravan/driver/store"
	"github.com/caravan-nomad/caravan/driver/store/storetest"
)

// TestObjectStoreMem runs the object store suite on the in-memory backend.
func TestObjectStoreMem(t *testing.T) {
	storetest.Run(t, func(*testing.T) store.Backend { return storetest.NewMem() })
}
