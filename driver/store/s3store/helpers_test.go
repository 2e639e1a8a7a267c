package s3store

import (
	"bytes"
	"context"
	"crypto/rand"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/caravan-nomad/caravan/driver/store"
	"github.com/caravan-nomad/caravan/driver/store/objectstore"
	"github.com/caravan-nomad/caravan/driver/store/storetest"
	"github.com/shoenig/test/must"
)

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }

// storetestData writes one random file of 40 KiB into dir.
func storetestData(t *testing.T, dir string) []byte {
	t.Helper()
	data := make([]byte, 40<<10)
	_, err := rand.Read(data)
	must.NoError(t, err)
	must.NoError(t, os.WriteFile(filepath.Join(dir, "state.bin"), data, 0o644))
	return data
}

func sameFile(t *testing.T, dir string, data []byte) {
	t.Helper()
	got, err := os.ReadFile(filepath.Join(dir, "state.bin"))
	must.NoError(t, err)
	must.True(t, bytes.Equal(data, got))
}

// proxiedBackend returns a backend on a fresh bucket of srv, reached
// through a proxy that hands each request to intercept first: where
// intercept answers it (returns true) the server never sees it.
func proxiedBackend(t *testing.T, srv *server, intercept func(w http.ResponseWriter, r *http.Request) bool) store.Backend {
	t.Helper()
	target, err := url.Parse("http://" + srv.endpoint)
	must.NoError(t, err)
	rp := httputil.NewSingleHostReverseProxy(target)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !intercept(w, r) {
			rp.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(proxy.Close)
	c := srv.newBucket(t)
	c.Endpoint = proxy.Listener.Addr().String()
	b, err := New(context.Background(), c)
	must.NoError(t, err)
	return b
}

// commitData opens a store with storetest.Options on b and commits 40 KiB
// of random data (storetestData, written into src) as k.
func commitData(t *testing.T, b store.Backend) (s *store.Store, k store.Key, src string, data []byte) {
	t.Helper()
	s, err := objectstore.Open(b, storetest.Options())
	must.NoError(t, err)
	k = store.Key{Namespace: "default", Job: "j", Group: "g", Task: "t"}
	src = t.TempDir()
	data = storetestData(t, src)
	_, _, err = s.Commit(context.Background(), k, src, "n", nil)
	must.NoError(t, err)
	return s, k, src, data
}
