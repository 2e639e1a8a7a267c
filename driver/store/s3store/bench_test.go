package s3store

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/driver/store"
	"github.com/caravan-nomad/caravan/driver/store/objectstore"
)

// benchBytes is the checkpoint the benchmark moves: 1 GiB, or
// $CARAVAN_STORE_BENCH_BYTES (as the store's benchmarks), or 8 MiB with
// -short (make bench-smoke).
func benchBytes() int64 {
	if v, err := strconv.ParseInt(os.Getenv("CARAVAN_STORE_BENCH_BYTES"), 10, 64); err == nil && v >= store.DefaultChunkSize {
		return v / store.DefaultChunkSize * store.DefaultChunkSize
	}
	if testing.Short() {
		return 8 << 20
	}
	return 1 << 30
}

// benchChunkSize is the store's chunk size in the benchmark: the default
// (4 MiB), or $CARAVAN_STORE_BENCH_CHUNK bytes (as a driver's
// checkpoint_chunk_size would set it). The second commit's changes are
// placed the same way whatever the chunk size.
func benchChunkSize() int {
	v, _ := strconv.Atoi(os.Getenv("CARAVAN_STORE_BENCH_CHUNK"))
	return v
}

// BenchmarkS3 puts, side by side in one run against the real SeaweedFS
// server (CARAVAN_S3_TESTS=1, else skipped), the store's commit and restore
// of a 1 GiB checkpoint (one file; 4 MiB chunks, or CARAVAN_STORE_BENCH_CHUNK
// bytes) and the same client's raw single-object PUT and GET
// of the same bytes, then a second commit with 10% of the chunks changed
// (metric uploaded_%: bytes uploaded / checkpoint bytes). Each part also
// reports the CPU time per operation of this process (client_cpu_ms/op)
// and of the server (server_cpu_ms/op), untimed set-up included: where
// client and server share the machine's cores, their sum bounds the speed.
// CARAVAN_S3_BENCH_RTT (e.g. 5ms) puts a proxy adding that round trip
// between client and server, as a remote server would (its copying counts
// as the client's CPU).
//
//	CARAVAN_S3_TESTS=1 go test -run '^$' -bench BenchmarkS3 -benchtime 3x ./driver/store/s3store
func BenchmarkS3(b *testing.B) {
	srv := requireServer(b)
	c := srv.newBucket(b)
	if rtt := benchRTT(b); rtt > 0 {
		c.Endpoint = latencyProxy(b, c.Endpoint, rtt)
	}
	benchSize := benchBytes()
	be, err := newBackend(c)
	must.NoError(b, err)
	src := b.TempDir()
	data := make([]byte, benchSize)
	_, _ = rand.Read(data)
	must.NoError(b, os.WriteFile(filepath.Join(src, "model.bin"), data, 0o644))
	ctx := context.Background()
	s, err := objectstore.Open(be, store.Options{Retain: 2, ChunkSize: benchChunkSize()})
	must.NoError(b, err)
	key := store.Key{Namespace: "bench", Job: "j", Group: "g", Task: "t"}

	b.Run("raw_put", func(b *testing.B) {
		b.SetBytes(benchSize)
		cpu := meterCPU(srv)
		defer cpu.report(b)
		for b.Loop() {
			_, err := be.client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(c.Bucket), Key: be.key("raw/model.bin"),
				Body: bytes.NewReader(data), ContentLength: aws.Int64(benchSize)})
			must.NoError(b, err)
		}
	})
	b.Run("commit", func(b *testing.B) {
		b.SetBytes(benchSize)
		cpu := meterCPU(srv)
		defer cpu.report(b)
		for b.Loop() {
			b.StopTimer()
			// A fresh key and an empty chunk space each time: every byte
			// is uploaded, as the raw PUT uploads them.
			clearStore(b, be)
			b.StartTimer()
			_, st, err := s.Commit(ctx, key, src, "bench", nil)
			must.NoError(b, err)
			must.Eq(b, int64(benchSize), st.NewBytes)
		}
	})
	b.Run("raw_get", func(b *testing.B) {
		b.SetBytes(benchSize)
		cpu := meterCPU(srv)
		defer cpu.report(b)
		for b.Loop() {
			out, err := be.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(c.Bucket), Key: be.key("raw/model.bin")})
			must.NoError(b, err)
			n, err := io.Copy(io.Discard, out.Body)
			_ = out.Body.Close()
			must.NoError(b, err)
			must.Eq(b, int64(benchSize), n)
		}
	})
	b.Run("raw_get_to_file", func(b *testing.B) {
		// What a restore without the store does (aws s3 cp): the object
		// written to a local file, not verified.
		b.SetBytes(benchSize)
		cpu := meterCPU(srv)
		defer cpu.report(b)
		for b.Loop() {
			f, err := os.Create(filepath.Join(b.TempDir(), "model.bin"))
			must.NoError(b, err)
			out, err := be.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(c.Bucket), Key: be.key("raw/model.bin")})
			must.NoError(b, err)
			n, err := io.Copy(f, out.Body)
			_ = out.Body.Close()
			must.NoError(b, err)
			must.NoError(b, f.Close())
			must.Eq(b, int64(benchSize), n)
		}
	})
	b.Run("raw_get_to_file_sha256", func(b *testing.B) {
		// The work a restore must do, through the same client on one
		// stream: the object written to a local file and its SHA-256
		// checked (each 128 KiB piece hashed while in cache, as Restore
		// does), against the digest known beforehand.
		want := sha256.Sum256(data)
		buf := make([]byte, 128<<10)
		b.SetBytes(benchSize)
		cpu := meterCPU(srv)
		defer cpu.report(b)
		for b.Loop() {
			f, err := os.Create(filepath.Join(b.TempDir(), "model.bin"))
			must.NoError(b, err)
			out, err := be.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(c.Bucket), Key: be.key("raw/model.bin")})
			must.NoError(b, err)
			h := sha256.New()
			n, err := io.CopyBuffer(io.MultiWriter(h, f), out.Body, buf)
			_ = out.Body.Close()
			must.NoError(b, err)
			must.NoError(b, f.Close())
			must.Eq(b, int64(benchSize), n)
			must.Eq(b, want[:], h.Sum(nil))
		}
	})
	b.Run("raw_get_chunks", func(b *testing.B) {
		// The restore's own GETs (the generation's chunk objects, as many
		// in flight as restore workers) into io.Discard: the server's cost
		// of many objects against one, without verifying or writing.
		m, err := s.Latest(key)
		must.NoError(b, err)
		b.SetBytes(benchSize)
		cpu := meterCPU(srv)
		defer cpu.report(b)
		for b.Loop() {
			getAll(b, be, m.Files[0].Chunks, 16)
		}
	})
	b.Run("restore", func(b *testing.B) {
		b.SetBytes(benchSize)
		cpu := meterCPU(srv)
		defer cpu.report(b)
		for b.Loop() {
			b.StopTimer()
			dst := filepath.Join(b.TempDir(), "out")
			b.StartTimer()
			_, err := s.Restore(ctx, key, dst)
			must.NoError(b, err)
			b.StopTimer()
			_ = os.RemoveAll(dst)
			b.StartTimer()
		}
	})
	b.Run("second_commit_10pct_changed", func(b *testing.B) {
		var uploaded, total int64
		for i := 0; b.Loop(); i++ {
			b.StopTimer()
			// Change every tenth chunk.
			for off := int64(i%10) * store.DefaultChunkSize; off < benchSize; off += 10 * store.DefaultChunkSize {
				_, _ = rand.Read(data[off : off+4096])
			}
			must.NoError(b, os.WriteFile(filepath.Join(src, "model.bin"), data, 0o644))
			b.StartTimer()
			_, st, err := s.Commit(ctx, key, src, "bench", nil)
			must.NoError(b, err)
			uploaded += st.NewBytes
			total += st.Bytes
		}
		b.ReportMetric(100*float64(uploaded)/float64(total), "uploaded_%")
	})
}

// getAll GETs every chunk object of digests into io.Discard, par at a time.
func getAll(b *testing.B, be *Backend, digests []string, par int) {
	ctx := context.Background()
	names := make(chan string)
	var wg sync.WaitGroup
	var failed atomic.Bool
	for range par {
		wg.Go(func() {
			for n := range names {
				rc, _, err := be.Get(ctx, n)
				if err == nil {
					_, err = io.Copy(io.Discard, rc)
					_ = rc.Close()
				}
				if err != nil {
					failed.Store(true)
				}
			}
		})
	}
	for _, d := range digests {
		names <- "chunks/" + d[:2] + "/" + d
	}
	close(names)
	wg.Wait()
	must.False(b, failed.Load())
}

// clearStore deletes every chunk and manifest below the backend's prefix.
func clearStore(b *testing.B, be *Backend) {
	ctx := context.Background()
	var names []string
	for _, p := range []string{"chunks/", "keys/"} {
		must.NoError(b, be.List(ctx, p, func(o store.ObjectInfo) error {
			names = append(names, o.Name)
			return nil
		}))
	}
	for _, n := range names {
		must.NoError(b, be.Delete(ctx, n))
	}
}
