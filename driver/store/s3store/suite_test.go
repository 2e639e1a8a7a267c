package s3store

import (
	"context"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/driver/store"
	"github.com/caravan-nomad/caravan/driver/store/storetest"
)

// TestS3Suite runs the object store suite against a real SeaweedFS server.
func TestS3Suite(t *testing.T) {
	srv := requireServer(t)
	storetest.Run(t, func(t *testing.T) store.Backend {
		b, err := New(context.Background(), srv.newBucket(t))
		must.NoError(t, err)
		return b
	})
}
