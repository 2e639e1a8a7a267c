package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shoenig/test/must"
	"golang.org/x/sys/unix"
)

// Sparse files: a checkpoint may hold a large file that is mostly holes (a
// preallocated buffer, a sparse embedding table). Commit must not read its
// holes into memory, and Restore must not write them out as zeros.

// envSparseSize sizes the sparse file of the sparse tests (bytes; default
// 1 GiB). CARAVAN_STORE_SPARSE_SIZE=8589934592 is the README's measurement.
const envSparseSize = "CARAVAN_STORE_SPARSE_SIZE"

// sparseChunkSize is the store's default chunk size: the measurement is of
// the store as the driver opens it.
const sparseChunkSize = DefaultChunkSize

func sparseSize(t testing.TB) int64 {
	v := os.Getenv(envSparseSize)
	if v == "" {
		return 1 << 30
	}
	n, err := strconv.ParseInt(v, 10, 64)
	must.NoError(t, err)
	return n
}

// sparseData is where writeSparse puts its 16 KiB of data in a file of
// size bytes: the first page, two pages in the middle, one chunk straddled,
// and the last page.
func sparseData(size int64) map[int64][]byte {
	return map[int64][]byte{
		0:                         randomBytes(1, 4<<10),
		size / 2:                  randomBytes(2, 4<<10),
		3*sparseChunkSize - 2<<10: randomBytes(3, 4<<10),
		size - 4<<10:              randomBytes(4, 4<<10),
	}
}

// writeSparse creates path as a sparse file of size bytes holding
// sparseData, and skips the test when the file system does not keep holes.
func writeSparse(t testing.TB, path string, size int64) {
	t.Helper()
	f, err := os.Create(path)
	must.NoError(t, err)
	defer f.Close()
	must.NoError(t, f.Truncate(size))
	for off, b := range sparseData(size) {
		_, err := f.WriteAt(b, off)
		must.NoError(t, err)
	}
	if used := allocated(t, path); used > size/4 {
		t.Skipf("the file system of %s does not keep holes (%d of %d bytes allocated)", path, used, size)
	}
	if _, err := unix.Seek(int(f.Fd()), 4<<10, unix.SEEK_DATA); err != nil && !errors.Is(err, unix.ENXIO) {
		t.Skipf("the file system of %s does not support SEEK_DATA: %v", path, err)
	}
}

// allocated returns the bytes of disk a file uses (st_blocks).
func allocated(t testing.TB, path string) int64 {
	t.Helper()
	var st syscall.Stat_t
	must.NoError(t, syscall.Stat(path, &st))
	return st.Blocks * 512
}

// checkSparseContents checks that path reads as writeSparse wrote it,
// zeros everywhere but at sparseData, reading only where it must: the
// data regions, and SEEK_DATA for anything else that is not a hole.
func checkSparseContents(t testing.TB, path string, size int64) {
	t.Helper()
	f, err := os.Open(path)
	must.NoError(t, err)
	defer f.Close()
	fi, err := f.Stat()
	must.NoError(t, err)
	must.Eq(t, size, fi.Size())
	data := sparseData(size)
	for off, b := range data {
		got := make([]byte, len(b))
		_, err := f.ReadAt(got, off)
		must.NoError(t, err)
		must.True(t, bytes.Equal(b, got), must.Sprintf("data at %d differs", off))
	}
	// Everything SEEK_DATA finds must be zeros or within a data region.
	buf := make([]byte, 1<<20)
	for off := int64(0); off < size; {
		next, err := unix.Seek(int(f.Fd()), off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break
		}
		must.NoError(t, err)
		end, err := unix.Seek(int(f.Fd()), next, unix.SEEK_HOLE)
		must.NoError(t, err)
		for p := next; p < end; {
			n, err := f.ReadAt(buf[:min(int64(len(buf)), end-p)], p)
			if err != nil && !errors.Is(err, io.EOF) {
				must.NoError(t, err)
			}
			for i := 0; i < n; i++ {
				if buf[i] != 0 && !inData(data, p+int64(i)) {
					t.Fatalf("byte %d is %#x, want 0", p+int64(i), buf[i])
				}
			}
			p += int64(n)
		}
		off = end
	}
}

func inData(data map[int64][]byte, p int64) bool {
	for off, b := range data {
		if p >= off && p < off+int64(len(b)) {
			return true
		}
	}
	return false
}

// TestRestoreKeepsHoles commits a sparse file and restores it: the restored
// file reads the same but keeps its holes (it used to be written out in
// full, so a 2 GiB sparse file could not be restored on a node with 256 MiB
// of free disk).
func TestRestoreKeepsHoles(t *testing.T) {
	size := sparseSize(t)
	src := t.TempDir()
	writeSparse(t, filepath.Join(src, "sparse.bin"), size)
	s := openTestStore(t, Options{ChunkSize: sparseChunkSize})
	key := testKey("sparse")
	ctx := context.Background()
	_, _, err := s.Commit(ctx, key, src, "n1", nil)
	must.NoError(t, err)

	dst := filepath.Join(t.TempDir(), "ckpt")
	_, err = s.Restore(ctx, key, dst)
	must.NoError(t, err)
	restored := filepath.Join(dst, "sparse.bin")
	used := allocated(t, restored)
	t.Logf("restored %d bytes using %d bytes of disk", size, used)
	must.LessEq(t, int64(4<<20), used, must.Sprint("the restored file's holes were written out"))
	checkSparseContents(t, restored, size)
}

// TestSparseCommitSameChunks checks that a sparse file commits to exactly
// the chunks and file digest of the same bytes written out in full, so
// checkpoints committed before holes were skipped stay compatible both
// ways.
func TestSparseCommitSameChunks(t *testing.T) {
	const size = 64 << 20
	sparse, dense := t.TempDir(), t.TempDir()
	writeSparse(t, filepath.Join(sparse, "f"), size)
	full := make([]byte, size)
	for off, b := range sparseData(size) {
		copy(full[off:], b)
	}
	must.NoError(t, os.WriteFile(filepath.Join(dense, "f"), full, 0o644))
	s := openTestStore(t, Options{ChunkSize: sparseChunkSize})
	ms, _, err := s.Commit(context.Background(), testKey("sparse"), sparse, "n1", nil)
	must.NoError(t, err)
	md, _, err := s.Commit(context.Background(), testKey("dense"), dense, "n1", nil)
	must.NoError(t, err)
	must.Eq(t, md.Files[0].Chunks, ms.Files[0].Chunks)
	must.Eq(t, md.Files[0].SHA256, ms.Files[0].SHA256)
}

// TestSparseCommitBoundedMemory commits a sparse file in a helper process
// and checks its peak resident memory (getrusage's maxrss): the commit used
// to map the whole file and read every page of its holes, so a commit of an
// 8 GiB sparse file peaked at about 7.5 GB resident.
func TestSparseCommitBoundedMemory(t *testing.T) {
	size := sparseSize(t)
	src := t.TempDir()
	writeSparse(t, filepath.Join(src, "sparse.bin"), size)
	root := t.TempDir()
	_, err := Open(root, Options{})
	must.NoError(t, err)
	chunk := envChunk + "=" + strconv.Itoa(sparseChunkSize)

	start := time.Now()
	cmd := helperCmd(t, "commit", root, src, "sparse", chunk)
	out, err := cmd.CombinedOutput()
	must.NoError(t, err, must.Sprint(string(out)))
	commitTime := time.Since(start)
	commitRSS := peakRSS(t, out)
	var stored int64
	must.NoError(t, filepath.WalkDir(filepath.Join(root, ".chunks"), func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			stored += allocated(t, p)
		}
		return err
	}))

	dst := filepath.Join(t.TempDir(), "ckpt")
	start = time.Now()
	cmd = helperCmd(t, "restore", root, dst, "sparse", chunk)
	out, err = cmd.CombinedOutput()
	must.NoError(t, err, must.Sprint(string(out)))
	restoreTime := time.Since(start)
	restoreRSS := peakRSS(t, out)
	used := allocated(t, filepath.Join(dst, "sparse.bin"))
	t.Logf("sparse file of %d bytes: commit %s, peak RSS %d MiB, %d bytes of chunks stored; restore %s, peak RSS %d MiB, %d bytes of disk",
		size, commitTime.Round(time.Millisecond), commitRSS>>20, stored, restoreTime.Round(time.Millisecond), restoreRSS>>20, used)
	must.Less(t, int64(256<<20), commitRSS, must.Sprintf("commit peak RSS %d MiB", commitRSS>>20))
	must.Less(t, int64(256<<20), restoreRSS, must.Sprintf("restore peak RSS %d MiB", restoreRSS>>20))
}

// printPeakRSS prints the helper's peak resident memory (VmHWM: the high
// water mark of its own address space; getrusage's maxrss of a child
// re-executed from the test binary also counts the test process's peak,
// which the child's address space started as).
func printPeakRSS() {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			fmt.Printf("peak_rss_kib %s\n", strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
		}
	}
}

// peakRSS reads printPeakRSS's line from a helper's output, in bytes.
func peakRSS(t testing.TB, out []byte) int64 {
	t.Helper()
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, "peak_rss_kib "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			must.NoError(t, err)
			return n << 10
		}
	}
	t.Fatalf("no peak_rss_kib in the helper's output:\n%s", out)
	return 0
}
