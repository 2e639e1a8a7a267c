# Nomad client agent configuration for caravan's plugins on a GPU node.
# Add it to the client's configuration (nomad agent -config=...), and copy the
# caravan binary into plugin_dir twice: as caravan-gpu and as caravan (Nomad
# finds a plugin by its file name; `args` picks what the binary serves).

data_dir   = "/opt/nomad/data"
plugin_dir = "/opt/nomad/plugins"

client {
  enabled = true
}

# Fractional GPUs through NVML (device/README.md).
plugin "caravan-gpu" {
  args = ["device"]

  config {
    backend            = "nvml"
    shares             = 4
    fingerprint_period = "1m"

    # Whole GPUs for the H100s: one share each.
    share_override {
      gpu    = "model:NVIDIA H100 80GB HBM3"
      shares = 1
    }
  }
}

# The checkpointing task driver (driver/README.md). The store must be one
# directory every client reaches: an NFS or other shared mount.
plugin "caravan" {
  args = ["driver"]

  config {
    checkpoint_store  = "/mnt/caravan-checkpoints"
    checkpoint_retain = 3

    # The local agent the driver asks for a job's incarnation (its create
    # index), so a purged and resubmitted job starts fresh. Defaults to
    # NOMAD_ADDR, else http://127.0.0.1:4646. With ACLs, a token that may
    # read jobs (read-job) in the tasks' namespaces:
    # nomad_address    = "https://127.0.0.1:4646"
    # nomad_token_file = "/etc/nomad.d/caravan-driver.token"
  }
}
