//go:build linux

package device

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/nomad/plugins/device"
	"github.com/shoenig/test/must"
)

func TestReserve(t *testing.T) {
	f := newFakeGPUs(t)
	p := newTestPlugin(t, fmt.Sprintf(`config {
		shares = 4
		share_override {
			gpu    = "uuid:%s"
			shares = 2
		}
	}`, f.uuid(2)), f.srv, nil)
	p.fingerprintOnce()
	g0, g1, g2 := f.uuid(0), f.uuid(1), f.uuid(2)

	cases := []struct {
		name string
		ids  []string
		env  map[string]string
		err  error
		msgs []string
	}{
		{
			name: "two shares of one GPU",
			ids:  []string{shareID(g0, 3), shareID(g0, 1)},
			env: map[string]string{
				EnvNvidiaVisibleDevices: g0,
				EnvCUDAVisibleDevices:   g0,
				EnvMPSPinnedMemLimit:    "0=40960M",
				EnvMPSActiveThreadPct:   "50",
				EnvShareIDs:             shareID(g0, 1) + "," + shareID(g0, 3),
				EnvMemoryFraction:       "0.5000",
				EnvMemoryLimitBytes:     fmt.Sprint(uint64(40960) << 20),
				EnvComputePercent:       "50",
				EnvBackend:              "nvml",
			},
		},
		{
			name: "every share of a two-share GPU",
			ids:  []string{shareID(g2, 0), shareID(g2, 1)},
			env: map[string]string{
				EnvCUDAVisibleDevices: g2,
				EnvMPSPinnedMemLimit:  "0=81920M",
				EnvMPSActiveThreadPct: "100",
				EnvMemoryFraction:     "1.0000",
				EnvComputePercent:     "100",
			},
		},
		{
			name: "mixed GPUs are listed in index order",
			ids:  []string{shareID(g1, 0), shareID(g1, 2), shareID(g0, 0)},
			env: map[string]string{
				EnvNvidiaVisibleDevices: g0 + "," + g1,
				EnvCUDAVisibleDevices:   g0 + "," + g1,
				EnvMPSPinnedMemLimit:    "0=20480M,1=40960M",
				EnvMPSActiveThreadPct:   "25",
				EnvMemoryFraction:       "0.2500,0.5000",
				EnvMemoryLimitBytes:     fmt.Sprintf("%d,%d", uint64(20480)<<20, uint64(40960)<<20),
				EnvComputePercent:       "25,50",
			},
		},
		{
			name: "not a share ID",
			ids:  []string{"nvidia0"},
			err:  ErrUnknownShare,
			msgs: []string{`"nvidia0" is not a caravan share ID`},
		},
		{
			name: "GPU not on this node",
			ids:  []string{"GPU-00000000-0000-0000-0000-000000000000-share-0"},
			err:  ErrUnknownShare,
			msgs: []string{"no GPU GPU-00000000-0000-0000-0000-000000000000 on this node"},
		},
		{
			name: "share index beyond the GPU's share count",
			ids:  []string{shareID(g2, 3)},
			err:  ErrStaleShare,
			msgs: []string{"now has 2 shares"},
		},
		{
			name: "one bad ID fails the whole request and names each bad ID",
			ids:  []string{shareID(g0, 0), "bogus", shareID(g0, 9)},
			err:  ErrUnknownShare,
			msgs: []string{`"bogus"`, shareID(g0, 9)},
		},
		{
			name: "duplicate ID",
			ids:  []string{shareID(g0, 0), shareID(g0, 0)},
			err:  ErrUnknownShare,
			msgs: []string{"requested twice"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := p.Reserve(tc.ids)
			if tc.err != nil {
				must.ErrorIs(t, err, tc.err)
				must.Nil(t, res)
				for _, m := range tc.msgs {
					must.StrContains(t, err.Error(), m)
				}
				return
			}
			must.NoError(t, err)
			for k, v := range tc.env {
				must.Eq(t, v, res.Envs[k], must.Sprint(k))
			}
			must.Eq(t, 24, len(res.Envs[EnvReservation]), must.Sprint("token is 12 random bytes in hex"))
			must.MapNotContainsKey(t, res.Envs, EnvMPSPipeDirectory)
			must.SliceEmpty(t, res.Mounts)
		})
	}
}

func TestReserve_TokensDiffer(t *testing.T) {
	f := newFakeGPUs(t)
	p := newTestPlugin(t, `config {}`, f.srv, nil)
	p.fingerprintOnce()
	a, err := p.Reserve([]string{shareID(f.uuid(0), 0)})
	must.NoError(t, err)
	b, err := p.Reserve([]string{shareID(f.uuid(0), 1)})
	must.NoError(t, err)
	must.NotEq(t, a.Envs[EnvReservation], b.Envs[EnvReservation])
}

func TestReserve_Empty(t *testing.T) {
	f := newFakeGPUs(t)
	p := newTestPlugin(t, `config {}`, f.srv, nil)
	res, err := p.Reserve(nil)
	must.NoError(t, err)
	must.MapEmpty(t, res.Envs)
}

func TestReserve_StaleAfterGPUDisappears(t *testing.T) {
	f := newFakeGPUs(t)
	p := newTestPlugin(t, `config {}`, f.srv, nil)
	p.fingerprintOnce()
	gone := f.uuid(7)
	f.setVisible(7)
	p.fingerprintOnce()
	_, err := p.Reserve([]string{shareID(gone, 0)})
	must.ErrorIs(t, err, ErrStaleShare)
	must.StrContains(t, err.Error(), "no longer present")
	must.False(t, errors.Is(err, ErrUnknownShare))
}

func TestReserve_StaleAfterShareCountShrinks(t *testing.T) {
	f := newFakeGPUs(t)
	p := newTestPlugin(t, `config { shares = 8 }`, f.srv, nil)
	p.fingerprintOnce()
	c, err := pluginConfig(t, `config { shares = 4 }`)
	must.NoError(t, err)
	must.NoError(t, p.SetConfig(c))
	p.fingerprintOnce()
	_, err = p.Reserve([]string{shareID(f.uuid(0), 6)})
	must.ErrorIs(t, err, ErrStaleShare)
	_, err = p.Reserve([]string{shareID(f.uuid(0), 3)})
	must.NoError(t, err)
}

func TestReserve_MPS(t *testing.T) {
	f := newFakeGPUs(t)
	p := newTestPlugin(t, `config {
		mps {
			enabled  = true
			pipe_dir = "/run/nvidia-mps"
		}
	}`, f.srv, nil)
	p.fingerprintOnce()
	res, err := p.Reserve([]string{shareID(f.uuid(0), 0)})
	must.NoError(t, err)
	must.Eq(t, "/run/nvidia-mps", res.Envs[EnvMPSPipeDirectory])
	must.Eq(t, defaultMPSLogDir, res.Envs[EnvMPSLogDirectory])
	must.Eq(t, []*device.Mount{
		{TaskPath: "/run/nvidia-mps", HostPath: "/run/nvidia-mps"},
		{TaskPath: defaultMPSLogDir, HostPath: defaultMPSLogDir},
	}, res.Mounts)
	groups := p.fingerprintOnce()
	must.True(t, *groups[0].Attributes[AttrMPS].Bool)
	must.True(t, strings.HasPrefix(res.Envs[EnvMPSPinnedMemLimit], "0="))
}

// TestReserve_SimulatedStateDir: a task on simulated GPUs with a state_dir
// gets the directory's path and a mount of it at the same path, to read its
// GPU's occupancy file; NVML tasks get neither (TestReserve_MPS).
func TestReserve_SimulatedStateDir(t *testing.T) {
	dir := t.TempDir()
	p := newTestPlugin(t, `config {
		backend = "simulated"
		simulated {
			state_dir = "`+dir+`"
			gpu {
				model      = "A100"
				memory_mib = 40960
			}
		}
	}`, nil, nil)
	groups := p.fingerprintOnce()
	res, err := p.Reserve([]string{groups[0].Devices[0].ID})
	must.NoError(t, err)
	must.Eq(t, dir, res.Envs["CARAVAN_SIMULATED_GPU_STATE_DIR"])
	must.Eq(t, []*device.Mount{{TaskPath: dir, HostPath: dir}}, res.Mounts)
}
