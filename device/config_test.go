//go:build linux

package device

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	log "github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/device/nvml"
)

func parseHCL(t *testing.T, src string) (*settings, error) {
	t.Helper()
	c, err := pluginConfig(t, src)
	if err != nil {
		return nil, err
	}
	var cfg Config
	must.NoError(t, decodeConfig(c, &cfg))
	return parseConfig(&cfg)
}

func TestConfig_Defaults(t *testing.T) {
	s, err := parseHCL(t, `config {}`)
	must.NoError(t, err)
	must.True(t, s.enabled)
	must.Eq(t, BackendNVML, s.backend)
	must.Eq(t, defaultShares, s.shares)
	must.Eq(t, time.Minute, s.fingerprintPeriod)
	must.True(t, s.health.enabled)
	must.Eq(t, 5*time.Minute, s.health.recovery)
	for _, x := range []uint64{13, 31, 43, 45, 68, 109} {
		must.False(t, s.health.isCritical(x), must.Sprintf("xid %d", x))
	}
	must.True(t, s.health.isCritical(79))
	must.False(t, s.mps.Enabled)
}

func TestConfig_Health(t *testing.T) {
	s, err := parseHCL(t, `config {
		health {
			ignored_xids    = []
			recovery_period = "30s"
		}
	}`)
	must.NoError(t, err)
	must.True(t, s.health.isCritical(13), must.Sprint("an explicit empty ignore list ignores nothing"))
	must.Eq(t, 30*time.Second, s.health.recovery)

	s, err = parseHCL(t, `config {
		health {
			critical_xids = [48, 79]
		}
	}`)
	must.NoError(t, err)
	must.True(t, s.health.isCritical(79))
	must.False(t, s.health.isCritical(94))
	must.False(t, s.health.isCritical(13))

	s, err = parseHCL(t, `config {
		health {
			enabled = false
		}
	}`)
	must.NoError(t, err)
	must.False(t, s.health.isCritical(79))
}

func TestConfig_ClusterTemplateIsValid(t *testing.T) {
	b, err := os.ReadFile("../scripts/cluster/plugin-device.hcl")
	must.NoError(t, err)
	src := strings.NewReplacer("@NODE@", "client1", "@CLUSTER_DIR@", "/tmp/cluster").Replace(string(b))
	i := strings.Index(src, "config {")
	must.Positive(t, i)
	// The config block is the last block of the plugin stanza.
	body := strings.TrimSpace(src[i:])
	body = strings.TrimSuffix(body, "}")
	s, err := parseHCL(t, body)
	must.NoError(t, err)
	must.Eq(t, BackendSimulated, s.backend)
	must.Len(t, 2, s.simulated.GPUs)
	must.Eq(t, 4, s.shares)
}

func TestConfig_Errors(t *testing.T) {
	cases := []struct {
		name  string
		hcl   string
		field string
	}{
		{"zero shares", `config { shares = 0 }`, "shares: must be at least 1"},
		{"empty ignored gpu id", `config { ignored_gpu_ids = ["GPU-a", ""] }`, "ignored_gpu_ids[1]: must not be empty"},
		{"selector as ignored gpu id", `config { ignored_gpu_ids = ["index:0"] }`, "ignored_gpu_ids[0]: \"index:0\": list GPU UUIDs"},
		{"ignored id matches no simulated gpu", `config {
			backend = "simulated"
			ignored_gpu_ids = ["GPU-typo"]
			simulated {
				gpu {
					model      = "A100"
					memory_mib = 40960
				}
			}
		}`, `ignored_gpu_ids: "GPU-typo" names no simulated GPU`},
		{"shares 2^62", `config { shares = 4611686018427387904 }`, "shares: must be at most max_shares = 64"},
		{"shares two million", `config { shares = 2000000 }`, "shares: must be at most max_shares = 64, got 2000000"},
		{"max_shares too big", `config {
			max_shares = 1000000
			shares     = 1000000
		}`, "max_shares: must be between 1 and 4096"},
		{"override above max_shares", `config {
			share_override {
				gpu    = "index:0"
				shares = 65
			}
		}`, `share_override[0].shares: must be at most max_shares = 64`},
		{"shares below 1 MiB", `config {
			backend    = "simulated"
			max_shares = 1024
			shares     = 1000
			simulated {
				gpu {
					model      = "tiny"
					memory_mib = 512
				}
			}
		}`, "shares: 1000 shares of"},
		{"absurd simulated memory", `config {
			backend = "simulated"
			simulated {
				gpu {
					model      = "huge"
					memory_mib = 1000000000000000000
				}
			}
		}`, "simulated.gpu[0].memory_mib: must be at most"},
		{"unknown backend", `config { backend = "cuda" }`, `backend: unknown backend "cuda"`},
		{"bad duration", `config { fingerprint_period = "soon" }`, `fingerprint_period: invalid duration "soon"`},
		{"negative duration", `config { fingerprint_period = "-1s" }`, `fingerprint_period: must be positive`},
		{"wrong type", `config { shares = "four" }`, `shares`},
		{"unknown selector kind", `config {
			share_override {
				gpu    = "serial:1234"
				shares = 2
			}
		}`, `share_override[0].gpu: unknown GPU selector kind "serial"`},
		{"selector without kind", `config {
			share_override {
				gpu    = "GPU-1234"
				shares = 2
			}
		}`, `share_override[0].gpu: unknown GPU selector "GPU-1234"`},
		{"bad index", `config {
			share_override {
				gpu    = "index:first"
				shares = 2
			}
		}`, `share_override[0].gpu: GPU index must be a non-negative integer`},
		{"override zero shares", `config {
			share_override {
				gpu    = "index:0"
				shares = 0
			}
		}`, `share_override[0].shares: must be at least 1`},
		{"bad recovery period", `config {
			health {
				recovery_period = "later"
			}
		}`, `health.recovery_period: invalid duration "later"`},
		{"xid both critical and ignored", `config {
			health {
				critical_xids = [79, 13]
			}
		}`, `health.critical_xids: xid 13 is also in ignored_xids`},
		{"relative mps dir", `config {
			mps {
				enabled  = true
				pipe_dir = "mps"
			}
		}`, `mps.pipe_dir: must be an absolute path`},
		{"simulated without gpus", `config { backend = "simulated" }`, `simulated.gpu: backend "simulated" needs at least one gpu block`},
		{"simulated gpu without memory", `config {
			backend = "simulated"
			simulated {
				gpu {
					model      = "A100"
					memory_mib = 0
				}
			}
		}`, `simulated.gpu[0].memory_mib: must be at least 1`},
		{"simulated bad xid time", `config {
			backend = "simulated"
			simulated {
				gpu {
					model      = "A100"
					memory_mib = 40960
					xid {
						after = "tomorrow"
						xid   = 79
					}
				}
			}
		}`, `simulated.gpu[0].xid[0].after: invalid duration "tomorrow"`},
		{"simulated relative state_dir", `config {
			backend = "simulated"
			simulated {
				state_dir = "state"
				gpu {
					model      = "A100"
					memory_mib = 40960
				}
			}
		}`, `simulated.state_dir: must be an absolute path, got "state"`},
		{"simulated mig too large", `config {
			backend = "simulated"
			simulated {
				gpu {
					model      = "A100"
					memory_mib = 1000
					mig {
						profile    = "7g.40gb"
						memory_mib = 40000
					}
				}
			}
		}`, `simulated.gpu[0].mig: instances need 40000 MiB`},
		{"override matches no simulated gpu", `config {
			backend = "simulated"
			share_override {
				gpu    = "uuid:GPU-typo"
				shares = 1
			}
			simulated {
				gpu {
					model      = "A100"
					memory_mib = 40960
				}
			}
		}`, `share_override[0].gpu: selector "uuid:GPU-typo" matches no simulated GPU`},
		{"simulated block with nvml backend", `config {
			simulated {
				gpu {
					model      = "A100"
					memory_mib = 40960
				}
			}
		}`, `simulated: set, but backend is "nvml"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseHCL(t, tc.hcl)
			must.Error(t, err)
			must.True(t, errors.Is(err, ErrInvalidConfig), must.Sprint(err))
			must.StrContains(t, err.Error(), tc.field)
		})
	}
}

func TestConfig_SetConfigRejectsBadConfig(t *testing.T) {
	c, err := pluginConfig(t, `config { shares = 0 }`)
	must.NoError(t, err)
	p := NewPlugin(t.Context(), log.NewNullLogger())
	err = p.SetConfig(c)
	must.ErrorIs(t, err, ErrInvalidConfig)
	must.StrContains(t, err.Error(), "shares")
}

// TestBoundedShares: a share stands for at least 1 MiB of the GPU's memory,
// whatever the configuration says (the NVML backend learns the memory only
// at fingerprint time).
func TestBoundedShares(t *testing.T) {
	s := &settings{shares: 64}
	n, clamped := s.boundedShares(nvml.GPU{UUID: "GPU-a", MemoryBytes: 16 << 20})
	must.Eq(t, 16, n)
	must.Eq(t, 64, clamped)
	n, clamped = s.boundedShares(nvml.GPU{UUID: "GPU-b", MemoryBytes: 80 << 30})
	must.Eq(t, 64, n)
	must.Eq(t, 0, clamped)
	n, _ = s.boundedShares(nvml.GPU{UUID: "GPU-c", MemoryBytes: 0})
	must.Eq(t, 1, n)
}
