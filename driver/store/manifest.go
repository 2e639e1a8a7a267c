package store

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Manifest format versions. Format 2 is format 1 plus entries carrying
// names that are not valid UTF-8 as bytes (path_bytes, link_bytes; see
// names.go); a commit writes format 1 whenever no name needs that, so older
// readers keep reading what they can, and refuse the rest by its format.
const (
	manifestFormat      = 1
	manifestFormatBytes = 2
)

// FormatFor returns the manifest format that can carry files.
func FormatFor(files []FileEntry) int {
	if needsBytes(files) {
		return manifestFormatBytes
	}
	return manifestFormat
}

// Manifest describes one published checkpoint generation of one key.
type Manifest struct {
	// Format is the manifest format version (1, or 2 when a name is not
	// valid UTF-8).
	Format     int               `json:"format"`
	Key        string            `json:"key"`
	Generation uint64            `json:"generation"`
	Created    time.Time         `json:"created"`
	Node       string            `json:"node"`
	Meta       map[string]string `json:"meta,omitempty"`
	ChunkSize  int               `json:"chunk_size"`
	Files      []FileEntry       `json:"files"`
	TotalBytes int64             `json:"total_bytes"`
}

// FileEntry is one directory, regular file or symlink of a checkpoint, with
// a slash-separated Path relative to the checkpoint directory. Path and Link
// are bytes, as names are on Linux; they round-trip through the manifest
// exactly, valid UTF-8 or not (see names.go).
type FileEntry struct {
	Path string      `json:"path"`
	Mode fs.FileMode `json:"mode"`
	Size int64       `json:"size"`
	// SHA256 is the file's digest: the hex SHA-256 of the concatenation of
	// its chunks' raw SHA-256 digests (see TreeHash); empty for directories
	// and symlinks.
	SHA256 string `json:"sha256,omitempty"`
	// Chunks are the hex SHA-256 digests of the file's fixed-size chunks, in
	// order; each names a chunk file in the store.
	Chunks []string `json:"chunks,omitempty"`
	// ModTime is the file's modification time, restored on Restore.
	ModTime time.Time `json:"mod_time"`
	// Link is the target of a symlink (relative, inside the checkpoint).
	Link string `json:"link,omitempty"`

	// id is the file's identity when commit scanned it; commit reads only
	// a file that is still that one.
	id fileID
}

// CommitStats summarises one Commit.
type CommitStats struct {
	Generation uint64
	Files      int
	Bytes      int64
	// NewBytes counts chunk bytes actually written (chunks not already in
	// the store).
	NewBytes int64
	Duration time.Duration
}

// RestoreResult summarises one Restore.
type RestoreResult struct {
	// Manifest is the generation restored.
	Manifest *Manifest
	// FellBack lists newer generations skipped because they failed
	// verification, newest first.
	FellBack []uint64
	Duration time.Duration
}

// manifestPrefix and manifestSuffix frame a generation's manifest file name:
// gen-00000000000000000042.json (zero-padded so names sort by generation).
const (
	manifestPrefix = "gen-"
	manifestSuffix = ".json"
)

// ManifestName is the file or object name of generation gen's manifest.
func ManifestName(gen uint64) string {
	return fmt.Sprintf("%s%020d%s", manifestPrefix, gen, manifestSuffix)
}

// ParseManifestName reads the generation from a manifest's name.
func ParseManifestName(name string) (uint64, bool) {
	if !strings.HasPrefix(name, manifestPrefix) || !strings.HasSuffix(name, manifestSuffix) {
		return 0, false
	}
	n, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(name, manifestPrefix), manifestSuffix), 10, 64)
	return n, err == nil
}

// listGenerations returns the generations published in keyDir, ascending.
// A missing keyDir has none.
func listGenerations(keyDir string) ([]uint64, error) {
	ents, err := os.ReadDir(keyDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list generations: %w", err)
	}
	var gens []uint64
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, manifestPrefix) || !strings.HasSuffix(name, manifestSuffix) {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(name, manifestPrefix), manifestSuffix), 10, 64)
		if err != nil {
			continue
		}
		gens = append(gens, n)
	}
	slices.Sort(gens)
	return gens, nil
}

// readManifest reads and checks the manifest of one generation. A manifest
// that cannot be parsed or is inconsistent is ErrCorrupt; I/O errors are
// returned as they are.
func readManifest(keyDir string, gen uint64) (*Manifest, error) {
	b, err := os.ReadFile(filepath.Join(keyDir, ManifestName(gen)))
	if err != nil {
		return nil, fmt.Errorf("read manifest of generation %d: %w", gen, err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%w: manifest of generation %d: %w", ErrCorrupt, gen, err)
	}
	if err := m.Check(gen); err != nil {
		return nil, fmt.Errorf("%w: manifest of generation %d: %w", ErrCorrupt, gen, err)
	}
	return &m, nil
}

// Check verifies the manifest is self-consistent and that every path stays
// inside the checkpoint directory.
func (m *Manifest) Check(gen uint64) error {
	if m.Format != manifestFormat && m.Format != manifestFormatBytes {
		return fmt.Errorf("unsupported format %d", m.Format)
	}
	if m.Generation != gen {
		return fmt.Errorf("generation %d in a file named for %d", m.Generation, gen)
	}
	if m.ChunkSize < minChunkSize || m.ChunkSize > maxChunkSize {
		return fmt.Errorf("bad chunk size %d", m.ChunkSize)
	}
	var total int64
	seen := make(map[string]bool, len(m.Files))
	for i := range m.Files {
		f := &m.Files[i]
		if err := checkRelPath(f.Path); err != nil {
			return err
		}
		if seen[f.Path] {
			return fmt.Errorf("duplicate path %q", f.Path)
		}
		seen[f.Path] = true
		if d := path.Dir(f.Path); d != "." && !seen[d] {
			return fmt.Errorf("%q listed before its parent directory", f.Path)
		}
		switch {
		case f.Mode.IsDir():
		case f.Mode&fs.ModeSymlink != 0:
			if err := checkLink(f.Path, f.Link); err != nil {
				return err
			}
		case f.Mode.IsRegular():
			if f.Size < 0 {
				return fmt.Errorf("%q: negative size", f.Path)
			}
			want := (f.Size + int64(m.ChunkSize) - 1) / int64(m.ChunkSize)
			if int64(len(f.Chunks)) != want {
				return fmt.Errorf("%q: %d chunks for %d bytes", f.Path, len(f.Chunks), f.Size)
			}
			for _, c := range f.Chunks {
				if !isDigest(c) {
					return fmt.Errorf("%q: bad chunk digest %q", f.Path, c)
				}
			}
			if f.SHA256 != TreeHash(f.Chunks) {
				return fmt.Errorf("%q: file digest does not match its chunks", f.Path)
			}
			total += f.Size
		default:
			return fmt.Errorf("%q: unsupported file type %s", f.Path, f.Mode.Type())
		}
	}
	// Nothing may live below a symlink: Restore never writes through a link.
	modes := make(map[string]fs.FileMode, len(m.Files))
	for _, f := range m.Files {
		modes[f.Path] = f.Mode
	}
	for _, f := range m.Files {
		if d := path.Dir(f.Path); d != "." {
			if mode, ok := modes[d]; ok && !mode.IsDir() {
				return fmt.Errorf("%q: parent %q is not a directory", f.Path, d)
			}
		}
	}
	if total != m.TotalBytes {
		return fmt.Errorf("total_bytes %d, files sum to %d", m.TotalBytes, total)
	}
	return checkLinksResolve(m.Files)
}

// publishManifest publishes m in keyDir after checking that its encoding
// reads back as m (CheckEncoded).
func publishManifest(keyDir string, m *Manifest) error {
	b, err := json.MarshalIndent(m, "", " ")
	if err != nil {
		return fmt.Errorf("encode manifest: %w", err)
	}
	if err := CheckEncoded(b, m); err != nil {
		return err
	}
	return writeManifestBytes(keyDir, m.Generation, b)
}

// writeManifest publishes m in keyDir unchecked (tests forge manifests
// with it).
func writeManifest(keyDir string, m *Manifest) error {
	b, err := json.MarshalIndent(m, "", " ")
	if err != nil {
		return fmt.Errorf("encode manifest: %w", err)
	}
	return writeManifestBytes(keyDir, m.Generation, b)
}

// writeManifestBytes publishes the encoded manifest b of generation gen in
// keyDir: temp file, fsync, rename, fsync dir.
func writeManifestBytes(keyDir string, gen uint64, b []byte) error {
	f, err := os.CreateTemp(keyDir, ".tmp-"+ManifestName(gen)+"-*")
	if err != nil {
		return fmt.Errorf("create manifest: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op once renamed
	if _, err := f.Write(b); err != nil {
		_ = f.Close()
		return fmt.Errorf("write manifest: %w", err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("fsync manifest: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close manifest: %w", err)
	}
	Hook(StepManifestTempWritten)
	if err := os.Rename(tmp, filepath.Join(keyDir, ManifestName(gen))); err != nil {
		return fmt.Errorf("publish manifest: %w", err)
	}
	Hook(StepManifestPublished)
	if err := syncDir(keyDir); err != nil {
		return err
	}
	Hook(StepCommitted)
	return nil
}

// CheckEncoded decodes b, the encoding of m, as Restore will, and refuses
// to publish it unless it reads back with every name and link byte for byte:
// a generation that could not be restored is never published.
func CheckEncoded(b []byte, m *Manifest) error {
	var back Manifest
	if err := json.Unmarshal(b, &back); err != nil {
		return fmt.Errorf("encoded manifest does not decode: %w", err)
	}
	if err := back.Check(m.Generation); err != nil {
		return fmt.Errorf("encoded manifest does not verify: %w", err)
	}
	if len(back.Files) != len(m.Files) {
		return fmt.Errorf("encoded manifest has %d entries, want %d", len(back.Files), len(m.Files))
	}
	for i := range m.Files {
		if back.Files[i].Path != m.Files[i].Path || back.Files[i].Link != m.Files[i].Link {
			return fmt.Errorf("%w: %q does not survive the manifest encoding", ErrInvalid, m.Files[i].Path)
		}
	}
	return nil
}

// TreeHash is a file's SHA256 field: the hex SHA-256 of the concatenated raw
// SHA-256 digests of its chunks, in order. It commits to every byte of the
// file without a second sequential pass over the data.
func TreeHash(chunks []string) string {
	h := sha256.New()
	var raw [sha256.Size]byte
	for _, c := range chunks {
		if _, err := hex.Decode(raw[:], []byte(c)); err != nil {
			return ""
		}
		h.Write(raw[:])
	}
	return hex.EncodeToString(h.Sum(nil))
}

func isDigest(s string) bool {
	if len(s) != 2*sha256.Size {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// checkRelPath accepts a clean, relative, slash-separated path that stays
// inside the checkpoint directory.
func checkRelPath(p string) error {
	if p == "" || p == "." || strings.HasPrefix(p, "/") || strings.ContainsRune(p, 0) ||
		path.Clean(p) != p || p == ".." || strings.HasPrefix(p, "../") {
		return fmt.Errorf("%w: path %q escapes or is not clean", ErrInvalid, p)
	}
	return nil
}

// checkLink accepts a symlink target that is relative and, resolved from the
// link's directory, stays inside the checkpoint directory.
func checkLink(linkPath, target string) error {
	if target == "" || strings.HasPrefix(target, "/") || strings.ContainsRune(target, 0) {
		return fmt.Errorf("%w: symlink %q -> %q must be relative", ErrInvalid, linkPath, target)
	}
	r := path.Join(path.Dir(linkPath), target)
	if r == ".." || strings.HasPrefix(r, "../") {
		return fmt.Errorf("%w: symlink %q -> %q escapes the directory", ErrInvalid, linkPath, target)
	}
	return nil
}

// NewManifest is a manifest of files, created at created, without its
// generation (the engine sets it), and how many of the files are regular
// (their sizes sum to its TotalBytes).
func NewManifest(key Key, node string, meta map[string]string, chunkSize int, created time.Time, files []FileEntry) (*Manifest, int) {
	m := &Manifest{
		Format:    FormatFor(files),
		Key:       key.String(),
		Created:   created,
		Node:      node,
		Meta:      maps.Clone(meta),
		ChunkSize: chunkSize,
		Files:     files,
	}
	nfiles := 0
	for _, f := range files {
		if f.Mode.IsRegular() {
			m.TotalBytes += f.Size
			nfiles++
		}
	}
	return m, nfiles
}
