# Client plugin block for caravan's checkpointing task driver (owned by the
# driver; see driver/README.md). scripts/cluster.sh substitutes @CLUSTER_DIR@
# and @NODE@ (client1|client2), and its store line by the checkpoint store: one
# directory both clients reach, standing in for an NFS mount in a real
# cluster, or with CARAVAN_STORE=s3 a `store` block naming the cluster's S3
# server (scripts/cluster/s3.sh).
plugin "caravan" {
  args = ["driver"]
  config {
    # Off until enabled, like raw_exec.
    enabled           = true
@STORE@
    checkpoint_retain = 3
    # The agent the driver asks for a job's incarnation (its create index),
    # so a purged and resubmitted job starts fresh: this client's HTTP API.
    nomad_address = "http://127.0.0.1:@P_CLIENT_HTTP@"
    # Prometheus metrics (checkpoint durations, sizes, outcomes).
    metrics_address = "127.0.0.1:@P_DRIVER_METRICS@"
    # The engine behind this client's docker driver (with container
    # runtimes; none without): the restore role asks it for the user a
    # container runs as, to give its checkpoint directory that owner.
@ENGINE@
  }
}
