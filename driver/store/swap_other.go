//go:build !linux

package store

// exchange is unsupported off Linux; swapDir falls back to two renames.
func exchange(dirfd int, a, b string) error { return errExchangeUnsupported }
