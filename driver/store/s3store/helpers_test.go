package s3store

import (
	"bytes"
	"crypto/rand"
	"os"
	"path/filepath"
	"testing"

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
