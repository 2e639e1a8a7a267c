package workload

import (
	"strings"
	"testing"
)

// FuzzParseJobs: any input parses to jobs that satisfy the documented
// bounds, or to an error; never a panic.
func FuzzParseJobs(f *testing.F) {
	f.Add("name,time,application,num_replicas,batch_size\nj1,0,cifar10,2,128\nj2,1.5,bert,4,64\n")
	f.Add("name,time,application,num_replicas,batch_size\nj1,0,cifar10,1e18,128\n")
	f.Add("name,time,application,num_replicas,batch_size\nj1,NaN,cifar10,4.0,128\n")
	f.Add("name,time\n\"unterminated\n")
	f.Fuzz(func(t *testing.T, in string) {
		jobs, err := ParseJobs("fuzz.csv", strings.NewReader(in), nil)
		if err != nil {
			return
		}
		for _, j := range jobs {
			if j.Name == "" || j.Time < 0 || j.Replicas < 1 || j.Replicas > MaxReplicas ||
				j.BatchSize < 1 || j.BatchSize > MaxBatchSize {
				t.Fatalf("accepted an out-of-bounds job %+v", j)
			}
		}
	})
}

// FuzzParsePhilly: as FuzzParseJobs, for the Philly trace format.
func FuzzParsePhilly(f *testing.F) {
	f.Add("timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09 07:01:55,3600,8,28800,vc1\n")
	f.Add("timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09 07:01:55,3600,1e18,0,vc1\n")
	f.Add("timestamp,duration,num_gpus,cluster\n2017-10-09,1,1,x\n")
	f.Fuzz(func(t *testing.T, in string) {
		jobs, err := ParsePhilly("fuzz.csv", strings.NewReader(in))
		if err != nil {
			return
		}
		for _, j := range jobs {
			if j.Duration < 0 || j.GPUs < 1 || j.GPUs > MaxReplicas {
				t.Fatalf("accepted an out-of-bounds job %+v", j)
			}
		}
	})
}

// TestParseJobs_AbsurdValues: absurd counts are clear errors naming the
// column, never accepted or overflowed.
func TestParseJobs_AbsurdValues(t *testing.T) {
	cases := map[string]string{
		"1e18":  `column "num_replicas": 1e18 is more than 65536`,
		"1e300": `column "num_replicas": 1e300 is more than 65536`,
		"70000": `column "num_replicas": 70000 is more than 65536`,
	}
	for v, want := range cases {
		_, err := ParseJobs("w.csv", strings.NewReader("name,time,application,num_replicas,batch_size\nj,0,a,"+v+",32\n"), nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("num_replicas = %s: got %v, want %q", v, err, want)
		}
	}
}
