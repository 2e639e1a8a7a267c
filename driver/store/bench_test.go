package store

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"
)

// Benchmark size: -store.bench-bytes, else $CARAVAN_STORE_BENCH_BYTES, else
// 1 GiB (64 MiB with -short). Run:
//
//	go test ./driver/store -run '^$' -bench . -benchtime 3x
var benchBytes = flag.Int64("store.bench-bytes", 0, "checkpoint size for the store benchmarks (default 1 GiB, 64 MiB with -short)")

// benchFiles is how many files a benchmark checkpoint is split into.
const benchFiles = 8

func benchSize(b *testing.B) int64 {
	if *benchBytes > 0 {
		return *benchBytes
	}
	if v := os.Getenv("CARAVAN_STORE_BENCH_BYTES"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		must.NoError(b, err)
		return n
	}
	if testing.Short() {
		return 64 << 20
	}
	return 1 << 30
}

// writeBenchTree writes size bytes of incompressible data as benchFiles files
// plus a small metadata file.
func writeBenchTree(b *testing.B, dir string, size int64) {
	b.Helper()
	per := size / benchFiles
	for i := 0; i < benchFiles; i++ {
		must.NoError(b, os.WriteFile(filepath.Join(dir, fmt.Sprintf("shard-%02d.bin", i)), randomBytes(uint64(i+1), int(per)), 0o644))
	}
	must.NoError(b, os.WriteFile(filepath.Join(dir, "meta.json"), []byte(`{"step": 1}`), 0o644))
}

// benchSource writes a benchmark checkpoint of benchSize bytes into src
// below a fresh work directory.
func benchSource(b *testing.B) (size int64, work, src string) {
	b.Helper()
	size = benchSize(b)
	work = b.TempDir()
	src = filepath.Join(work, "src")
	must.NoError(b, os.Mkdir(src, 0o755))
	writeBenchTree(b, src, size)
	return size, work, src
}

func benchStore(b *testing.B, root string) *Store {
	b.Helper()
	must.NoError(b, os.MkdirAll(root, 0o755))
	w, _ := strconv.Atoi(os.Getenv("CARAVAN_STORE_BENCH_WORKERS"))
	s, err := Open(root, Options{Logger: benchLogger(), Workers: w})
	must.NoError(b, err)
	return s
}

// BenchmarkCommit commits a fresh checkpoint into an empty store (every
// chunk new) and compares with cp -r of the same files on the same disk, and
// with the disk itself: raw parallel direct writes of the same bytes plus
// fdatasync, the least time any durable copy can take; and with SHA-256 of
// the same chunks alone, the CPU no commit can skip. The source tree is in
// the page cache, as after a trainer wrote it. Sub-benchmarks per memory
// state (see memoryState).
func BenchmarkCommit(b *testing.B) {
	forMemoryStates(b, func(b *testing.B, mem memoryState) {
		size, work, src := benchSource(b)
		ctx := context.Background()
		r := newRounds(b, mem, work, size)
		for r.next() {
			r.baseline("cp", timeCp(b, r, src, filepath.Join(work, "cp"), false))
			r.baseline("cp_fsync", timeCp(b, r, src, filepath.Join(work, "cp"), true))
			r.baseline("disk", timeDiskWrite(b, r, src, filepath.Join(work, "disk")))

			s := benchStore(b, filepath.Join(work, "store"))
			r.baseline("hash", timeHash(b, r, src, s.chunkSize, s.workers))
			var stats CommitStats
			r.op(r.timed(false, func() {
				var err error
				b.StartTimer()
				_, stats, err = s.Commit(ctx, testKey("bench"), src, "n", nil)
				b.StopTimer()
				must.NoError(b, err)
			}))
			must.Eq(b, stats.Bytes, stats.NewBytes)
			must.NoError(b, os.RemoveAll(filepath.Join(work, "store")))
		}
		r.report()
	})
}

// BenchmarkRestore restores a checkpoint into a fresh directory and compares
// with cp -r of the same files on the same disk. Both start cold: the source
// tree and the store are evicted from the page cache before each timed step,
// as on a node that restores a checkpoint another node wrote.
func BenchmarkRestore(b *testing.B) {
	forMemoryStates(b, func(b *testing.B, mem memoryState) {
		size, work, src := benchSource(b)
		ctx := context.Background()
		s := benchStore(b, filepath.Join(work, "store"))
		key := testKey("bench")
		_, _, err := s.Commit(ctx, key, src, "n", nil)
		must.NoError(b, err)
		r := newRounds(b, mem, work, size)
		for r.next() {
			evict(b, src)
			r.baseline("cp", timeCp(b, r, src, filepath.Join(work, "cp"), false))
			evict(b, src)
			r.baseline("cp_fsync", timeCp(b, r, src, filepath.Join(work, "cp"), true))

			dst := filepath.Join(work, "dst")
			evict(b, filepath.Join(work, "store"))
			r.op(r.timed(false, func() {
				b.StartTimer()
				_, err := s.Restore(ctx, key, dst)
				b.StopTimer()
				must.NoError(b, err)
			}))
			must.NoError(b, os.RemoveAll(dst))
		}
		r.report()
	})
}

// BenchmarkSecondCommit changes 10% of a committed checkpoint and measures
// the second commit and the fraction of its bytes that had to be written:
// "region" rewrites one contiguous 10% range at a random offset of every
// file, "files" rewrites 10% of the files entirely.
func BenchmarkSecondCommit(b *testing.B) {
	cases := []struct {
		name   string
		change func(b *testing.B, dir string, r *rand.Rand)
	}{
		{"region", func(b *testing.B, dir string, r *rand.Rand) {
			for i := 0; i < benchFiles; i++ {
				p := filepath.Join(dir, fmt.Sprintf("shard-%02d.bin", i))
				fi, err := os.Stat(p)
				must.NoError(b, err)
				n := fi.Size() / 10
				off := r.Int64N(fi.Size() - n + 1)
				f, err := os.OpenFile(p, os.O_WRONLY, 0)
				must.NoError(b, err)
				_, err = f.WriteAt(randomBytes(r.Uint64(), int(n)), off)
				must.NoError(b, err)
				must.NoError(b, f.Close())
			}
		}},
		{"files", func(b *testing.B, dir string, r *rand.Rand) {
			// 10 files of size/10: rewrite one.
			ents, err := os.ReadDir(dir)
			must.NoError(b, err)
			for _, e := range ents {
				if e.Name() == "part-3.bin" {
					fi, _ := e.Info()
					must.NoError(b, os.WriteFile(filepath.Join(dir, e.Name()), randomBytes(r.Uint64(), int(fi.Size())), 0o644))
				}
			}
		}},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			size := benchSize(b)
			ctx := context.Background()
			r := rand.New(rand.NewPCG(1, 2))
			var dur time.Duration
			var written, total int64
			b.ResetTimer()
			b.StopTimer()
			for i := 0; i < b.N; i++ {
				work := b.TempDir()
				src := filepath.Join(work, "src")
				must.NoError(b, os.Mkdir(src, 0o755))
				if tc.name == "files" {
					for f := 0; f < 10; f++ {
						must.NoError(b, os.WriteFile(filepath.Join(src, fmt.Sprintf("part-%d.bin", f)), randomBytes(uint64(f+10), int(size/10)), 0o644))
					}
				} else {
					writeBenchTree(b, src, size)
				}
				s := benchStore(b, filepath.Join(work, "store"))
				key := testKey("bench")
				_, _, err := s.Commit(ctx, key, src, "n", nil)
				must.NoError(b, err)
				tc.change(b, src, r)
				syscall.Sync()
				start := time.Now()
				b.StartTimer()
				_, stats, err := s.Commit(ctx, key, src, "n", nil)
				b.StopTimer()
				dur += time.Since(start)
				must.NoError(b, err)
				written += stats.NewBytes
				total += stats.Bytes
				must.NoError(b, os.RemoveAll(work))
			}
			b.SetBytes(size)
			b.ReportMetric(float64(written)/float64(total), "new_bytes_fraction")
			b.ReportMetric(float64(total)/dur.Seconds()/1e6, "MB/s")
		})
	}
}

// benchLogger logs at $CARAVAN_STORE_BENCH_LOG (e.g. debug for phase
// timings), silent by default.
func benchLogger() hclog.Logger {
	lvl := os.Getenv("CARAVAN_STORE_BENCH_LOG")
	if lvl == "" {
		return hclog.NewNullLogger()
	}
	return hclog.New(&hclog.LoggerOptions{Level: hclog.LevelFromString(lvl), Output: os.Stderr})
}
