package s3store

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cpuMeter reports, as benchmark metrics, the CPU time per operation spent
// by this process (the client: SDK, hashing, writing) and by the SeaweedFS
// server, which runs on the same cores: where a benchmark's time goes.
type cpuMeter struct {
	pid            int
	client, server time.Duration
}

// meterCPU starts measuring; call its report at the end of b's loop.
func meterCPU(srv *server) *cpuMeter {
	m := &cpuMeter{pid: srv.srv.Pid()}
	m.client, m.server = selfCPU(), procCPU(m.pid)
	return m
}

// report adds client_cpu_ms/op and server_cpu_ms/op to b.
func (m *cpuMeter) report(b *testing.B) {
	if b.N == 0 {
		return
	}
	n := float64(b.N)
	b.ReportMetric(float64((selfCPU()-m.client).Milliseconds())/n, "client_cpu_ms/op")
	if s := procCPU(m.pid); s >= 0 && m.server >= 0 {
		b.ReportMetric(float64((s-m.server).Milliseconds())/n, "server_cpu_ms/op")
	}
}

// selfCPU is this process's user plus system time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU is process pid's user plus system time from /proc (Linux; -1
// elsewhere), in clock ticks of 10 ms.
func procCPU(pid int) time.Duration {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return -1
	}
	// Fields after the command name (which may hold spaces): state is
	// field 3, utime 14, stime 15.
	s := string(raw)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return -1
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return -1
	}
	return time.Duration(ut+st) * 10 * time.Millisecond
}
