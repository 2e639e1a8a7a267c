package store

// Named steps of Commit and Restore. Tests install testHook to pause or kill
// the process at a step and check that every crash leaves either the old or
// the new checkpoint.
const (
	stepChunkTempWritten    = "chunk_temp_written"    // a chunk's temp file is written, not yet synced
	stepChunkPublished      = "chunk_published"       // a chunk was renamed into .chunks/
	stepChunksSynced        = "chunks_synced"         // all chunks and their directories are durable
	stepManifestTempWritten = "manifest_temp_written" // the manifest temp file is written and synced
	stepManifestPublished   = "manifest_published"    // the manifest was renamed into place
	stepCommitted           = "committed"             // the key directory is synced; commit is durable
	stepRestoreStaged       = "restore_staged"        // the temp sibling holds the verified restore
	stepRestoreSwapped      = "restore_swapped"       // the temp sibling replaced dstDir
	stepGCSweeping          = "gc_sweeping"           // GC holds the store lock and is deleting chunks
)

// testHook, when set (by tests only), is called at each named step.
var testHook func(step string)

func hook(step string) {
	if testHook != nil {
		testHook(step)
	}
}
