# Client plugin block for caravan's checkpointing task driver (owned by the
# driver; see driver/README.md). scripts/cluster.sh substitutes @CLUSTER_DIR@
# and @NODE@ (client1|client2). The checkpoint store is one directory both
# clients reach, standing in for an NFS mount in a real cluster.
plugin "caravan" {
  args = ["driver"]
  config {
    # Off until enabled, like raw_exec.
    enabled           = true
    checkpoint_store  = "@CLUSTER_DIR@/checkpoints"
    checkpoint_retain = 3
    # The agent the driver asks for a job's incarnation (its create index),
    # so a purged and resubmitted job starts fresh: this client's HTTP API.
    nomad_address = "http://127.0.0.1:@P_CLIENT_HTTP@"
    # Prometheus metrics (checkpoint durations, sizes, outcomes).
    metrics_address = "127.0.0.1:@P_DRIVER_METRICS@"
  }
}
