package store

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"time"
	"unicode/utf8"
)

// Names are bytes on Linux, and JSON strings are UTF-8: encoding/json
// replaces every invalid byte by U+FFFD, so a name such as "a\xff" would come
// back as "a\uFFFD" and two such names would collide. An entry whose path or
// symlink target is not valid UTF-8 therefore carries it in path_bytes /
// link_bytes (base64 of the raw bytes) instead of path / link. Entries whose
// names are valid UTF-8 encode exactly as manifests always have, and a
// manifest needs format 2 only when one of its entries carries bytes.

// fileEntryJSON is FileEntry's wire form.
type fileEntryJSON struct {
	Path      string      `json:"path,omitempty"`
	PathBytes []byte      `json:"path_bytes,omitempty"`
	Mode      fs.FileMode `json:"mode"`
	Size      int64       `json:"size"`
	SHA256    string      `json:"sha256,omitempty"`
	Chunks    []string    `json:"chunks,omitempty"`
	ModTime   time.Time   `json:"mod_time"`
	Link      string      `json:"link,omitempty"`
	LinkBytes []byte      `json:"link_bytes,omitempty"`
}

// MarshalJSON encodes e with its path and link as bytes where they are not
// valid UTF-8, so every name round-trips exactly.
func (e FileEntry) MarshalJSON() ([]byte, error) {
	w := fileEntryJSON{Mode: e.Mode, Size: e.Size, SHA256: e.SHA256, Chunks: e.Chunks, ModTime: e.ModTime}
	w.Path, w.PathBytes = splitName(e.Path)
	w.Link, w.LinkBytes = splitName(e.Link)
	return json.Marshal(w)
}

// UnmarshalJSON decodes an entry written by any version of the store.
func (e *FileEntry) UnmarshalJSON(b []byte) error {
	var w fileEntryJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	path, err := joinName("path", w.Path, w.PathBytes)
	if err != nil {
		return err
	}
	link, err := joinName("link", w.Link, w.LinkBytes)
	if err != nil {
		return err
	}
	*e = FileEntry{Path: path, Mode: w.Mode, Size: w.Size, SHA256: w.SHA256, Chunks: w.Chunks, ModTime: w.ModTime, Link: link}
	return nil
}

// splitName returns name as a JSON string when it is valid UTF-8, else as
// raw bytes.
func splitName(name string) (string, []byte) {
	if utf8.ValidString(name) {
		return name, nil
	}
	return "", []byte(name)
}

// joinName reads back a name written by splitName: one of the two forms,
// never both.
func joinName(field, s string, b []byte) (string, error) {
	if b == nil {
		return s, nil
	}
	if s != "" {
		return "", fmt.Errorf("entry has both %s and %s_bytes", field, field)
	}
	return string(b), nil
}

// needsBytes reports whether any entry of files has a name that JSON
// strings cannot carry.
func needsBytes(files []FileEntry) bool {
	for i := range files {
		if !utf8.ValidString(files[i].Path) || !utf8.ValidString(files[i].Link) {
			return true
		}
	}
	return false
}
