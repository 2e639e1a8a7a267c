package store

// Named steps of Commit and Restore. Tests install testHook to pause or kill
// the process at a step and check that every crash leaves either the old or
// the new checkpoint.
const (
	StepChunkTempWritten    = "chunk_temp_written"    // a chunk's temp file is written, not yet synced
	StepChunkPublished      = "chunk_published"       // a chunk was renamed into .chunks/
	StepChunksSynced        = "chunks_synced"         // all chunks and their directories are durable
	StepManifestTempWritten = "manifest_temp_written" // the manifest temp file is written and synced
	StepManifestPublished   = "manifest_published"    // the manifest was renamed into place
	StepCommitted           = "committed"             // the key directory is synced; commit is durable
	StepRestoreStaged       = "restore_staged"        // the temp sibling holds the verified restore
	StepRestoreSwapped      = "restore_swapped"       // the temp sibling replaced dstDir
	StepGCSweeping          = "gc_sweeping"           // GC holds the store lock and is deleting chunks
)

// testHook, when set (by tests only), is called at each named step.
var testHook func(step string)

// Hook calls the test hook at a named step; both engines call it.
func Hook(step string) {
	if testHook != nil {
		testHook(step)
	}
}
