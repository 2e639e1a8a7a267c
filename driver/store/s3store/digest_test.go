package s3store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"path"
	"strings"
	"sync"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/driver/store"
)

// TestS3_ChunkPutsCarryTheStoreDigest commits through a proxy that records
// each chunk PUT's signed payload hash: every one is the chunk's own
// SHA-256, the digest the store computed (the SDK does not hash the body a
// second time).
func TestS3_ChunkPutsCarryTheStoreDigest(t *testing.T) {
	srv := requireServer(t)
	var mu sync.Mutex
	sent := map[string]string{} // chunk name -> x-amz-content-sha256
	b := proxiedBackend(t, srv, func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/chunks/") {
			mu.Lock()
			sent[path.Base(r.URL.Path)] = r.Header.Get("X-Amz-Content-Sha256")
			mu.Unlock()
		}
		return false
	})
	s, k, _, data := commitData(t, b)
	must.MapNotEmpty(t, sent)
	for name, hash := range sent {
		must.Eq(t, name, hash)
	}
	dst := t.TempDir() + "/out"
	_, err := s.Restore(context.Background(), k, dst)
	must.NoError(t, err)
	sameFile(t, dst, data)
}

// TestS3_PutSHA256RefusesAMismatchedBody gives the server a body whose
// SHA-256 is not the one signed: the server refuses it and stores nothing,
// so a chunk damaged between hashing and upload never lands under its name.
func TestS3_PutSHA256RefusesAMismatchedBody(t *testing.T) {
	srv := requireServer(t)
	b, err := New(context.Background(), srv.newBucket(t))
	must.NoError(t, err)
	dp := b.(store.DigestPutter)
	ctx := context.Background()
	good := []byte("the chunk's bytes")
	sum := sha256.Sum256(good)
	name := "chunks/" + hex.EncodeToString(sum[:])
	must.NoError(t, dp.PutSHA256(ctx, name, good, sum, false))
	rc, size, err := b.Get(ctx, name)
	must.NoError(t, err)
	_ = rc.Close()
	must.Eq(t, int64(len(good)), size)

	bad := []byte("the chunk's bytez")
	must.Error(t, dp.PutSHA256(ctx, "chunks/other", bad, sum, false))
	_, _, err = b.Get(ctx, "chunks/other")
	must.ErrorIs(t, err, store.ErrObjectNotFound)
}

// TestS3_PutSHA256IfAbsent creates a chunk conditionally: a second create
// of the name is refused with ErrObjectExists and the object keeps its
// first contents.
func TestS3_PutSHA256IfAbsent(t *testing.T) {
	srv := requireServer(t)
	b, err := New(context.Background(), srv.newBucket(t))
	must.NoError(t, err)
	dp := b.(store.DigestPutter)
	ctx := context.Background()
	first, second := []byte("first"), []byte("second")
	must.NoError(t, dp.PutSHA256(ctx, "chunks/x", first, sha256.Sum256(first), true))
	err = dp.PutSHA256(ctx, "chunks/x", second, sha256.Sum256(second), true)
	must.ErrorIs(t, err, store.ErrObjectExists)
	rc, _, err := b.Get(ctx, "chunks/x")
	must.NoError(t, err)
	got, err := io.ReadAll(rc)
	_ = rc.Close()
	must.NoError(t, err)
	must.Eq(t, first, got)
}
