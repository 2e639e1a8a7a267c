// Package objectstore is the checkpoint store's object engine: a store
// whose chunks, manifests and leases are objects in a store.Backend, such as
// S3 (s3store). Open returns a *store.Store with the same calls and
// guarantees as a directory store; what rests on file locks there rests on
// leases here (see ../README.md, "Object stores").
//
// Where things happen: commit.go (Commit: chunk upload, manifest publish),
// restore.go, generations.go (listing, pruning, deletion), gc.go, lease.go
// and lease_index.go (commit, restore and GC leases), keylock.go (a key's
// exclusive lock), writers.go (writer leases), names.go (object names).
package objectstore
