package store

import (
	"crypto/sha256"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/shoenig/test/must"
)

// memoryState is the state of the page-cache memory a timed step starts
// with. It matters on VMs with free page reporting (virtio-balloon, as on
// Firecracker; here page_reporting_order=11): memory freed by one step goes
// back to the host about 2 s later, and touching it again costs host page
// faults, about 2-3 s of system time per GiB against 0.3 s for memory freed
// just before. Without care the first step after a free would get cheap
// memory and the next one dear memory, and the ratios would measure that
// order. So every timed step, ours and the baselines', starts in the same
// named state.
type memoryState string

const (
	// memoryIdle: sync, then wait until freed memory went back to the host,
	// like a node that has been running for a while: new page-cache pages
	// are expensive. The default.
	memoryIdle memoryState = "idle"
	// memoryWarm: sync, then write and delete a scratch file of twice the
	// checkpoint size, so the step allocates from freshly freed, cheap
	// memory: the best case for anything that writes through the page cache.
	memoryWarm memoryState = "warm"
)

// settleTime is how long the idle state waits after sync(2): longer than the
// kernel's page reporting delay (2 s).
const settleTime = 3 * time.Second

// forMemoryStates runs fn as one sub-benchmark per memory state:
// $CARAVAN_STORE_BENCH_MEMORY (idle, warm or both; default both).
func forMemoryStates(b *testing.B, fn func(*testing.B, memoryState)) {
	states := []memoryState{memoryIdle, memoryWarm}
	switch v := os.Getenv("CARAVAN_STORE_BENCH_MEMORY"); v {
	case "", "both":
	case string(memoryIdle), string(memoryWarm):
		states = []memoryState{memoryState(v)}
	default:
		b.Fatalf("CARAVAN_STORE_BENCH_MEMORY=%q: want idle, warm or both", v)
	}
	for _, st := range states {
		b.Run("memory="+string(st), func(b *testing.B) { fn(b, st) })
	}
}

// sample is the wall and CPU time of one timed step.
type sample struct{ wall, cpu time.Duration }

// rounds runs a benchmark's rounds: one untimed warm-up round (first use of
// files and disk blocks), then b.N timed ones. Each round times our
// operation and the baselines; the report compares medians.
type rounds struct {
	b         *testing.B
	mem       memoryState
	scratch   string
	size      int64
	i         int
	ops       []sample
	baselines map[string][]sample
}

func newRounds(b *testing.B, mem memoryState, work string, size int64) *rounds {
	b.ResetTimer()
	b.StopTimer()
	return &rounds{b: b, mem: mem, scratch: filepath.Join(work, "scratch"), size: size, i: -2,
		baselines: map[string][]sample{}}
}

// next starts the next round and reports whether there is one.
func (r *rounds) next() bool {
	r.i++
	if r.i == 0 {
		// The warm-up round does not count.
		r.b.ResetTimer()
		r.ops = nil
		clear(r.baselines)
	}
	return r.i < r.b.N
}

func (r *rounds) op(s sample) { r.ops = append(r.ops, s) }

func (r *rounds) baseline(name string, s sample) {
	r.baselines[name] = append(r.baselines[name], s)
}

// timed brings memory into the round's state, runs fn and returns its wall
// time and the CPU time (user+system) of this process, plus its children's
// when children is set.
func (r *rounds) timed(children bool, fn func()) sample {
	r.b.Helper()
	syscall.Sync()
	switch r.mem {
	case memoryIdle:
		time.Sleep(settleTime)
	case memoryWarm:
		r.prime()
	}
	self0, child0 := cpuTime()
	start := time.Now()
	fn()
	wall := time.Since(start)
	self1, child1 := cpuTime()
	cpu := self1 - self0
	if children {
		cpu += child1 - child0
	}
	return sample{wall, cpu}
}

// prime writes a scratch file of twice the checkpoint size into the page
// cache and deletes it before writeback, leaving that much freshly freed
// memory.
func (r *rounds) prime() {
	f, err := os.Create(r.scratch)
	must.NoError(r.b, err)
	buf := make([]byte, 4<<20)
	for n := int64(0); n < 2*r.size; n += int64(len(buf)) {
		_, err := f.Write(buf)
		must.NoError(r.b, err)
	}
	must.NoError(r.b, f.Close())
	must.NoError(r.b, os.Remove(r.scratch))
}

// report reports our throughput and, per baseline, its median time divided
// by ours (1 = as fast as the baseline), by wall time and (except for the
// disk, which has no CPU share to speak of) by CPU time. Medians, not sums:
// on a shared VM one round can stall for seconds on the host.
func (r *rounds) report() {
	m := median(r.ops)
	r.b.SetBytes(r.size)
	r.b.ReportMetric(float64(r.size)/m.wall.Seconds()/1e6, "MB/s")
	disk, hash := r.baselines["disk"], r.baselines["hash"]
	if len(disk) > 0 && len(hash) > 0 {
		// The slower of the two is the least time a commit can take.
		bound := max(median(disk).wall, median(hash).wall)
		r.b.ReportMetric(bound.Seconds()/m.wall.Seconds(), "ratio_vs_bound")
	}
	for name, base := range r.baselines {
		bm := median(base)
		r.b.ReportMetric(bm.wall.Seconds()/m.wall.Seconds(), "ratio_vs_"+name)
		if name != "disk" {
			r.b.ReportMetric(bm.cpu.Seconds()/m.cpu.Seconds(), "cpu_ratio_vs_"+name)
		}
	}
}

// median returns the median wall and the median CPU time of ss.
func median(ss []sample) sample {
	walls := make([]time.Duration, len(ss))
	cpus := make([]time.Duration, len(ss))
	for i, s := range ss {
		walls[i], cpus[i] = s.wall, s.cpu
	}
	return sample{medianOf(walls), medianOf(cpus)}
}

func medianOf(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	n := len(ds)
	if n%2 == 1 {
		return ds[n/2]
	}
	return (ds[n/2-1] + ds[n/2]) / 2
}

// cpuTime returns the CPU time (user+system) used so far by this process and
// by its waited-for children.
func cpuTime() (self, children time.Duration) {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru)
	children = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return self, children
}

// timeCp copies src to dst with `cp -r` and removes the copy again; with
// fsync it also fsyncs every copied file and directory, the durability a
// commit provides.
func timeCp(b *testing.B, r *rounds, src, dst string, fsync bool) sample {
	b.Helper()
	s := r.timed(true, func() {
		out, err := exec.Command("cp", "-r", src, dst).CombinedOutput()
		must.NoError(b, err, must.Sprintf("cp: %s", out))
		if fsync {
			must.NoError(b, filepath.WalkDir(dst, func(p string, d fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				f, err := os.Open(p)
				if err != nil {
					return err
				}
				defer f.Close()
				return f.Sync()
			}))
		}
	})
	must.NoError(b, os.RemoveAll(dst))
	return s
}

// timeDiskWrite writes the regular files of src below dst with O_DIRECT
// from memory, 4 MiB at a time on 8 goroutines, then fdatasyncs them, and
// removes them again: the disk's durable write bandwidth, with no hashing and
// no page cache.
func timeDiskWrite(b *testing.B, r *rounds, src, dst string) sample {
	b.Helper()
	must.NoError(b, os.Mkdir(dst, 0o755))
	ents, err := os.ReadDir(src)
	must.NoError(b, err)
	type part struct {
		f   *os.File
		off int64
		buf []byte
	}
	var parts []part
	var files []*os.File
	for _, e := range ents {
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		must.NoError(b, err)
		f, direct, err := openDirect(func(flag int) (*os.File, error) {
			return os.OpenFile(filepath.Join(dst, e.Name()), flag, 0o644)
		}, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
		must.NoError(b, err)
		files = append(files, f)
		const step = 4 << 20
		for off := 0; off < len(data); off += step {
			n := min(step, len(data)-off)
			if direct {
				n &^= directAlign - 1 // an unaligned tail is not worth a bounce buffer here
			}
			if n > 0 {
				buf := alignedBuf(n)
				copy(buf, data[off:off+n])
				parts = append(parts, part{f, int64(off), buf})
			}
		}
	}
	s := r.timed(false, func() {
		must.NoError(b, parallel(8, len(parts), func(i int) error {
			_, err := parts[i].f.WriteAt(parts[i].buf, parts[i].off)
			return err
		}))
		must.NoError(b, parallel(8, len(files), func(i int) error { return fdatasync(files[i]) }))
	})
	for _, f := range files {
		must.NoError(b, f.Close())
	}
	must.NoError(b, os.RemoveAll(dst))
	return s
}

// timeHash hashes every chunk of the regular files of src with SHA-256 from
// read-only maps, as a commit does, on workers goroutines, and writes
// nothing: the CPU a commit cannot avoid. A commit cannot beat the slower of
// this and the disk.
func timeHash(b *testing.B, r *rounds, src string, chunkSize, workers int) sample {
	b.Helper()
	ents, err := os.ReadDir(src)
	must.NoError(b, err)
	var files []*os.File
	var chunks [][]byte
	var maps [][]byte
	s := r.timed(false, func() {
		for _, e := range ents {
			f, err := os.Open(filepath.Join(src, e.Name()))
			must.NoError(b, err)
			files = append(files, f)
			fi, err := f.Stat()
			must.NoError(b, err)
			if fi.Size() == 0 {
				continue
			}
			data, _, err := mapRange(f, 0, int(fi.Size()))
			must.NoError(b, err)
			maps = append(maps, data)
			for off := 0; off < len(data); off += chunkSize {
				chunks = append(chunks, data[off:min(off+chunkSize, len(data))])
			}
		}
		must.NoError(b, parallel(workers, len(chunks), func(i int) error {
			_ = sha256.Sum256(chunks[i])
			return nil
		}))
		for _, m := range maps {
			unmapFile(m)
		}
	})
	for _, f := range files {
		must.NoError(b, f.Close())
	}
	return s
}
