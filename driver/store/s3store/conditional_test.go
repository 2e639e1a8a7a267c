package s3store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/shoenig/test/must"
	"github.com/shoenig/test/wait"

	"github.com/caravan-nomad/caravan/driver/store"
)

// TestS3_ConditionalWritesHonoured checks, on the real server, what the
// store's key locks, GC lease and lease index rest on: If-None-Match: *
// and If-Match on PutObject and If-Match on DeleteObject are honoured, and
// of many clients swapping one ETag at the same instant exactly one wins,
// round after round; and a touch (a copy onto itself) moves an object's
// Last-Modified and keeps its contents.
func TestS3_ConditionalWritesHonoured(t *testing.T) {
	srv := requireServer(t)
	c := srv.newBucket(t)
	ctx := context.Background()
	const racers, rounds = 4, 25
	clients := make([]*Backend, racers)
	for i := range clients {
		b, err := newBackend(c)
		must.NoError(t, err)
		clients[i] = b
	}
	b := clients[0]

	etag, err := b.PutIfMatch(ctx, "lock", []byte("v0"), "")
	must.NoError(t, err)
	_, err = b.PutIfMatch(ctx, "lock", []byte("again"), "")
	must.ErrorIs(t, err, store.ErrObjectExists)
	_, err = b.PutIfMatch(ctx, "lock", []byte("wrong"), `"0123456789abcdef0123456789abcdef"`)
	must.ErrorIs(t, err, store.ErrObjectChanged)
	fi, err := b.Stat(ctx, "lock")
	must.NoError(t, err)
	must.Eq(t, etag, fi.ETag)

	for round := range rounds {
		var wg sync.WaitGroup
		var mu sync.Mutex
		var won []string
		start := make(chan struct{})
		for i, cl := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				body := fmt.Appendf(nil, "round %d client %d", round, i)
				e, err := cl.PutIfMatch(ctx, "lock", body, etag)
				switch {
				case err == nil:
					mu.Lock()
					won = append(won, e)
					mu.Unlock()
				case !errors.Is(err, store.ErrObjectChanged):
					t.Errorf("round %d client %d: %v", round, i, err)
				}
			}()
		}
		close(start)
		wg.Wait()
		must.SliceLen(t, 1, won, must.Sprintf("round %d: %d clients swapped one ETag", round, len(won)))
		etag = won[0]
	}

	must.ErrorIs(t, b.DeleteIfMatch(ctx, "lock", `"0123456789abcdef0123456789abcdef"`), store.ErrObjectChanged)
	_, err = b.Stat(ctx, "lock")
	must.NoError(t, err, must.Sprint("a delete with a wrong If-Match deleted the object"))
	must.NoError(t, b.DeleteIfMatch(ctx, "lock", etag))
	_, err = b.Stat(ctx, "lock")
	must.ErrorIs(t, err, store.ErrObjectNotFound)

	must.NoError(t, b.Put(ctx, "chunks/ab/abc", []byte("contents"), false))
	before, err := b.Stat(ctx, "chunks/ab/abc")
	must.NoError(t, err)
	// Last-Modified has whole seconds: touch until it moves.
	must.Wait(t, wait.InitialSuccess(wait.ErrorFunc(func() error {
		if err := b.Touch(ctx, "chunks/ab/abc"); err != nil {
			return err
		}
		after, err := b.Stat(ctx, "chunks/ab/abc")
		if err != nil {
			return err
		}
		if !after.Modified.After(before.Modified) {
			return fmt.Errorf("Last-Modified still %v", after.Modified)
		}
		return nil
	}), wait.Timeout(5*time.Second), wait.Gap(300*time.Millisecond)))
	rc, _, err := b.Get(ctx, "chunks/ab/abc")
	must.NoError(t, err)
	got, err := io.ReadAll(rc)
	_ = rc.Close()
	must.NoError(t, err)
	must.Eq(t, "contents", string(got))
	must.ErrorIs(t, b.Touch(ctx, "chunks/ab/missing"), store.ErrObjectNotFound)
}
