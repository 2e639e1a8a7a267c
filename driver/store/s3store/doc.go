// Package s3store is the store.Backend for S3 and S3-compatible servers:
// the object requests (put, conditional create and swap, get, stat, list,
// delete, touch), their retries and the credentials. It holds no store
// logic: commits, restores, GC and leases on S3 are made by the store's
// object engine, driver/store/objectstore (objectstore/commit.go for a commit).
package s3store
