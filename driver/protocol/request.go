package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// RequestName is the request file a checkpoint sidecar writes into the
// checkpoint directory of a task it cannot signal (a docker or podman main
// task, driver/README.md "Containers"). The task polls it between steps: a
// sequence above the one it last saw asks for a checkpoint, answered with a
// marker as for the checkpoint signal. The sidecar writes it atomically.
const RequestName = "caravan-checkpoint-request.json"

// maxRequestSize bounds the request file the task reads.
const maxRequestSize = 4 << 10

// Request is the content of RequestName.
type Request struct {
	// Sequence increases with every request the sidecar writes.
	Sequence uint64 `json:"sequence"`
}

// ReadRequest reads dir's request file: ErrNoMarker-style fs.ErrNotExist
// when there is none; a symlink, FIFO or oversized file is refused.
func ReadRequest(dir string) (*Request, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	return ReadRequestIn(root)
}

// ReadRequestIn is ReadRequest in an opened checkpoint directory.
func ReadRequestIn(root *os.Root) (*Request, error) {
	b, err := readRegular(root, RequestName, maxRequestSize)
	if err != nil {
		return nil, err
	}
	var r Request
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", RequestName, err)
	}
	return &r, nil
}

// WriteRequest writes r into dir atomically.
func WriteRequest(dir string, r *Request) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return WriteFileAtomic(filepath.Join(dir, RequestName), b)
}

// RequestSequence is the sequence of dir's request file, 0 when there is
// none or it cannot be read (a task polling it treats both as "no request").
func RequestSequence(dir string) uint64 {
	r, err := ReadRequest(dir)
	if err != nil {
		return 0
	}
	return r.Sequence
}

// IsNoRequest reports whether err means dir holds no request file.
func IsNoRequest(err error) bool { return errors.Is(err, fs.ErrNotExist) }
