# Client plugin block for caravan's fractional-GPU device plugin (owned by the
# device plugin; see device/README.md). scripts/cluster.sh substitutes
# @CLUSTER_DIR@ and @NODE@ (client1|client2).
#
# The local cluster has no GPU: each client gets two SIMULATED GPUs of four
# shares each (attribute backend = "simulated" on every device group). Lines
# "<gpu index or UUID> <xid>" appended to the xid_file raise simulated Xid
# events, and lines "<gpu index, UUID or *> <reason>" appended to the
# mps_fault_file simulated MPS server faults, for health checks. The
# state_dir holds one occupancy file per GPU (who holds it, with what
# shares and GPU use), from which the trainer's MODELLED compute slows down
# when its GPU is shared (device/README.md, "Simulated GPU occupancy").
plugin "caravan-gpu" {
  args = ["device"]

  config {
    backend            = "simulated"
    shares             = 4
    fingerprint_period = "5s"
    # Prometheus metrics (shares allocated and in use, memory, SM use).
    metrics_address = "127.0.0.1:@P_DEVICE_METRICS@"

    health {
      recovery_period = "20s"
    }

    # Tasks get the CUDA_MPS_* pipe and log directories, bind-mounted into
    # containers. No MPS control daemon runs here (the GPUs are simulated):
    # the directories, which scripts/cluster.sh creates, stand in for its.
    mps {
      enabled  = true
      pipe_dir = "@CLUSTER_DIR@/mps/@NODE@/pipe"
      log_dir  = "@CLUSTER_DIR@/mps/@NODE@/log"
    }

    simulated {
      seed     = "@CLUSTER_DIR@/@NODE@"
      xid_file       = "@CLUSTER_DIR@/xid-@NODE@"
      mps_fault_file = "@CLUSTER_DIR@/mps-faults-@NODE@"
      state_dir      = "@CLUSTER_DIR@/gpu-state/@NODE@"

      gpu {
        model      = "NVIDIA A100-SXM4-40GB"
        memory_mib = 40960

        usage {
          memory_mib = 1024
          sm_percent = 20
        }
      }

      gpu {
        model      = "NVIDIA A100-SXM4-40GB"
        memory_mib = 40960

        usage {
          memory_mib = 1024
          sm_percent = 20
        }
      }
    }
  }
}
