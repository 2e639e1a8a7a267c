package s3store

import "testing"

// NewTestStoreConfig returns the config of a fresh prefix on the package's
// real SeaweedFS server (starting it on first use; skipped unless
// CARAVAN_S3_TESTS=1), for the external tests of this directory.
func NewTestStoreConfig(t *testing.T) Config { return requireServer(t).newBucket(t) }

// TestCredentials are the credentials the test server accepts.
var TestCredentials = [2]string{testAK, testSK}
