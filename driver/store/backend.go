package store

import (
	"context"
	"errors"
	"io"
	"time"
)

// Backend is an object store the checkpoint store can keep its chunks,
// manifests and leases in (S3 and S3-compatible servers: see s3store).
// Names are slash-separated, relative to the backend's own prefix.
//
// The store relies on: a Put that returned nil is durable and visible to
// every later Get and Stat (read-after-write, as S3 has guaranteed since
// 2020); a Put with ifAbsent is a conditional create (If-None-Match: *) that
// fails with ErrObjectExists when the name is taken; listings may lag, so
// the store never uses one to find what it has just written.
type Backend interface {
	// Put stores data under name, replacing any object there unless ifAbsent.
	Put(ctx context.Context, name string, data []byte, ifAbsent bool) error
	// Get opens the object; its size is returned with it. A missing object
	// is ErrObjectNotFound.
	Get(ctx context.Context, name string) (io.ReadCloser, int64, error)
	// Stat returns the object's size and the server's modification time,
	// or ErrObjectNotFound.
	Stat(ctx context.Context, name string) (ObjectInfo, error)
	// List calls fn for every object whose name starts with prefix.
	List(ctx context.Context, prefix string, fn func(ObjectInfo) error) error
	// Delete removes the object; a missing object is not an error.
	Delete(ctx context.Context, name string) error
	// String describes the backend for logs (never its credentials).
	String() string
}

// UploadCleaner is a Backend that can find and abort the multipart uploads
// a crashed writer left behind (S3 keeps their parts, and bills for them,
// until they are aborted).
type UploadCleaner interface {
	// AbortStaleUploads aborts every incomplete upload below the backend's
	// prefix started before cutoff and returns how many it aborted.
	AbortStaleUploads(ctx context.Context, cutoff time.Time) (int, error)
}

// Swapper is a Backend with compare-and-swap: writes and deletes
// conditional on the object's entity tag (If-Match), which S3 honours on
// PutObject since 2024 and SeaweedFS on PutObject and DeleteObject (checked
// against the pinned server by TestS3_ConditionalWritesHonoured). With one,
// two hosts taking over one expired key lock cannot both win, and GC finds
// the leases of commits and restores by key in an index object instead of
// by a listing (README.md, "GC without file locks").
type Swapper interface {
	// PutIfMatch writes data under name only if the object's ETag is etag,
	// or, with etag "", only if there is no object of that name. It returns
	// the new object's ETag. A mismatch is ErrObjectChanged (ErrObjectExists
	// when etag is ""; ErrObjectNotFound when the object is gone).
	PutIfMatch(ctx context.Context, name string, data []byte, etag string) (string, error)
	// DeleteIfMatch deletes name only if its ETag is etag, else
	// ErrObjectChanged; a missing object is not an error.
	DeleteIfMatch(ctx context.Context, name, etag string) error
}

// Toucher is a Backend that can set an object's modification time to the
// server's present time without sending its contents again (S3: a copy of
// the object onto itself). A commit touches the old chunks it reuses, so GC
// never finds a chunk a recent manifest names old enough to delete, even
// when a listing does not show that manifest yet. Without one the commit
// uploads the chunk again.
type Toucher interface {
	Touch(ctx context.Context, name string) error
}

// Unwrapper is a Backend wrapping another (a test's fault injector): the
// store looks for Swapper and Toucher on the wrapped backend too.
type Unwrapper interface {
	Unwrap() Backend
}

// DigestPutter is a Backend that can store data whose SHA-256 the store has
// already computed (a chunk's name is its digest) without hashing it again:
// S3 signs each body's SHA-256, which the SDK would otherwise compute a
// second time over plain HTTP, and the server checks the body against it,
// so a chunk damaged on its way is refused instead of stored.
type DigestPutter interface {
	// PutSHA256 is Put of data whose SHA-256 is sum.
	PutSHA256(ctx context.Context, name string, data []byte, sum [32]byte, ifAbsent bool) error
}

// ObjectInfo describes one stored object.
type ObjectInfo struct {
	Name     string
	Size     int64
	Modified time.Time // the server's clock
	ETag     string    // the server's entity tag; "" where the backend has none
}

var (
	// ErrObjectNotFound is returned by a Backend for a missing object.
	ErrObjectNotFound = errors.New("object not found")
	// ErrObjectExists is returned by a Backend's conditional Put when the
	// name is taken.
	ErrObjectExists = errors.New("object exists")
	// ErrObjectChanged is returned by a Swapper when the object's ETag is
	// not the one the write or delete was conditional on.
	ErrObjectChanged = errors.New("object changed")
)
