package store

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Writer leases: a writer of a key (the driver: an allocation whose task
// may write, or is committing, a newer generation) says so in a small
// record per key and holder, renewed while it works, so that a restore of
// the key elsewhere can wait for it. The store only keeps the records and
// says how long ago each was renewed; what a state means, and how old a
// lease may be before it is ignored, is the caller's.
//
//   - directory store: <root>/.writers/<hash>/<holder>.json, written by
//     rename; the age is measured from the renewal time the writer put in
//     it (the hosts' clocks);
//   - object store: writers/<hash>/<holder>.json below the prefix; the age
//     is measured on the server's clock (its modification time against the
//     server's time now), never a client's. It is found by a listing, which
//     shows an object once written on S3 (strongly consistent since 2020)
//     and SeaweedFS; a lease is written when its holder starts and renewed
//     every few seconds, long before a restore looks for it.
//
// <hash> is the SHA-256 of the key's String form (its first 16 bytes, in
// hex), so any key fits one name component.

// WriterLease is one holder's lease on a key, as WriterLeases reads it.
type WriterLease struct {
	// Holder is who holds it (the driver: an allocation ID); Node where.
	Holder, Node string
	// State is the holder's own word for what it does.
	State string
	// Age is how long ago the lease was last written.
	Age time.Duration
}

// WriterBody is a writer lease's stored form (the driver's lease files,
// unchanged).
type WriterBody struct {
	Key     string    `json:"key"`
	AllocID string    `json:"alloc_id"`
	Node    string    `json:"node"`
	State   string    `json:"state"`
	Renewed time.Time `json:"renewed"`
}

const (
	writersDir = ".writers" // below a directory store's root
	// MaxWriterSize bounds a writer lease read back.
	MaxWriterSize = 4 << 10
)

// writersHash names the key's folder of writer leases (below the root, or
// below the prefix): <hash> above.
func writersHash(k Key) (string, error) {
	if err := k.Validate(); err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(k.String()))
	return hex.EncodeToString(sum[:16]), nil
}

// writersOf is the key's folder of writer leases in a directory store.
func (s *dirEngine) writersOf(h string) string {
	return filepath.Join(s.root, writersDir, h)
}

// checkHolder refuses a holder that is not one plain name component.
func checkHolder(holder string) error {
	if holder == "" || strings.ContainsAny(holder, "/\\\x00") || strings.HasPrefix(holder, ".") || len(holder) > 200 {
		return fmt.Errorf("%w: writer lease: bad holder %q", ErrInvalid, holder)
	}
	return nil
}

// PutWriterLease writes, or renews, holder's lease on k.
func (s *Store) PutWriterLease(ctx context.Context, k Key, holder, node, state string) error {
	if err := checkHolder(holder); err != nil {
		return err
	}
	h, err := writersHash(k)
	if err != nil {
		return err
	}
	b, err := json.Marshal(WriterBody{Key: k.String(), AllocID: holder, Node: node, State: state, Renewed: s.now().UTC()})
	if err != nil {
		return err
	}
	return s.eng.PutWriter(ctx, h, holder, b)
}

// putWriter writes the lease by rename below the root.
func (s *dirEngine) PutWriter(_ context.Context, h, holder string, b []byte) error {
	dir := s.writersOf(h)
	if err := s.statRoot(); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, dirPerm); err != nil {
		return fmt.Errorf("writer lease: %w", s.classify(err))
	}
	if err := writeFileAtomic(dir, holder+".json", b); err != nil {
		return fmt.Errorf("writer lease: %w", s.classify(err))
	}
	return nil
}

// writeFileAtomic writes name in dir through a temporary file renamed into
// place, so a reader sees the old contents or the new, never a part.
func writeFileAtomic(dir, name string, b []byte) error {
	f, err := os.CreateTemp(dir, "."+name+"-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, name))
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}

// DropWriterLease deletes holder's lease on k; a lease already gone is not
// an error.
func (s *Store) DropWriterLease(ctx context.Context, k Key, holder string) error {
	if err := checkHolder(holder); err != nil {
		return err
	}
	h, err := writersHash(k)
	if err != nil {
		return err
	}
	return s.eng.DropWriter(ctx, h, holder)
}

// dropWriter deletes the lease's file.
func (s *dirEngine) DropWriter(_ context.Context, h, holder string) error {
	dir := s.writersOf(h)
	if err := os.Remove(filepath.Join(dir, holder+".json")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("writer lease: %w", s.classify(err))
	}
	return nil
}

// WriterLeases returns the leases on k, least recently renewed first.
// Unreadable records, and records of another key, are skipped.
func (s *Store) WriterLeases(ctx context.Context, k Key) ([]WriterLease, error) {
	h, err := writersHash(k)
	if err != nil {
		return nil, err
	}
	out, err := s.eng.Writers(ctx, k, h)
	if err != nil {
		return nil, fmt.Errorf("writer leases: %w", err)
	}
	slices.SortStableFunc(out, func(a, b WriterLease) int { return cmp.Compare(b.Age, a.Age) })
	return out, nil
}

// ParseWriter reads one stored lease of k.
func ParseWriter(k Key, b []byte) (WriterBody, bool) {
	var w WriterBody
	if len(b) > MaxWriterSize || json.Unmarshal(b, &w) != nil || w.Key != k.String() || checkHolder(w.AllocID) != nil {
		return WriterBody{}, false
	}
	return w, true
}

// writers reads the key's lease files, measuring their age on this host's
// clock against the renewal time their writers put in them.
func (s *dirEngine) Writers(_ context.Context, k Key, h string) ([]WriterLease, error) {
	dir := s.writersOf(h)
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, s.statRoot()
	}
	if err != nil {
		return nil, s.classify(err)
	}
	now := s.now()
	var out []WriterLease
	for _, e := range ents {
		name := e.Name()
		if !e.Type().IsRegular() || strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ".json") {
			continue
		}
		b, err := readSmallFile(filepath.Join(dir, name), MaxWriterSize)
		if err != nil {
			continue
		}
		if w, ok := ParseWriter(k, b); ok && w.AllocID+".json" == name {
			out = append(out, WriterLease{Holder: w.AllocID, Node: w.Node, State: w.State, Age: now.Sub(w.Renewed)})
		}
	}
	return out, nil
}

// readSmallFile reads at most limit+1 bytes of path.
func readSmallFile(path string, limit int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, limit+1)
	n, err := f.Read(b)
	if n > limit {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, limit)
	}
	if n == 0 && err != nil {
		return nil, err
	}
	return b[:n], nil
}
