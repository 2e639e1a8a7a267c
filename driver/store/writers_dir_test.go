package store_test

import (
	"testing"

	"github.com/caravan-nomad/caravan/driver/store"
	"github.com/caravan-nomad/caravan/driver/store/storetest"
)

// TestDirectoryStoreWriterLeases runs the suite's writer lease checks on
// the directory store (two handles on one root, as two hosts share a
// mount).
func TestDirectoryStoreWriterLeases(t *testing.T) {
	storetest.RunWriterLeases(t, func(t *testing.T) (*store.Store, *store.Store) {
		root := t.TempDir()
		open := func() *store.Store {
			s, err := store.Open(root, storetest.Options())
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		return open(), open()
	})
}
