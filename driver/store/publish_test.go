package store

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/shoenig/test/must"
)

// TestPublishChunks checks publishing new chunks: when it returns nil every
// chunk is under its final name with its contents; when one chunk fails,
// every chunk under its final name is complete, the failed one is not, and
// no temp file is left.
func TestPublishChunks(t *testing.T) {
	cases := []struct {
		name    string
		missing int // index of a pending chunk whose temp file is gone; -1: none
	}{
		{"all published", -1},
		{"first fails", 0},
		{"middle fails", 7},
		{"last fails", 19},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := openTestStore(t, Options{Workers: 4})
			var pending []pendingChunk
			for i := 0; i < 20; i++ {
				data := []byte(fmt.Sprintf("chunk %d", i))
				sum := sha256.Sum256(data)
				d := hex.EncodeToString(sum[:])
				tmp := filepath.Join(s.tmpDir(), "chunk-"+d[:16]+"-"+RandomSuffix())
				if i != tc.missing {
					must.NoError(t, os.WriteFile(tmp, data, filePerm))
				}
				pending = append(pending, pendingChunk{tmp: tmp, final: s.chunkPath(d)})
			}
			_, err := s.publishChunks(pending)
			if tc.missing < 0 {
				must.NoError(t, err)
			} else {
				must.ErrorIs(t, err, os.ErrNotExist)
			}
			for i, pc := range pending {
				got, err := os.ReadFile(pc.final)
				switch {
				case i == tc.missing:
					must.ErrorIs(t, err, os.ErrNotExist)
				case tc.missing < 0:
					must.NoError(t, err)
				}
				if err == nil {
					must.Eq(t, fmt.Sprintf("chunk %d", i), string(got))
				}
			}
			tmps, err := os.ReadDir(s.tmpDir())
			must.NoError(t, err)
			must.SliceEmpty(t, tmps)
		})
	}
}
