package store

// MinChunkSize and MaxChunkSize bound Options.ChunkSize, for a caller that
// checks a configured size before opening a store (the driver's config).
const (
	MinChunkSize = minChunkSize
	MaxChunkSize = maxChunkSize
)
