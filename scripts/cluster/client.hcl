# One Nomad client of the local caravan cluster (@NODE@): loopback only. The
# caravan plugins' blocks come from plugin-device.hcl and plugin-driver.hcl.
name                 = "@NODE@"
region               = "global"
datacenter           = "dc1"
data_dir             = "@CLUSTER_DIR@/@NODE@"
plugin_dir           = "@CLUSTER_DIR@/plugins"
bind_addr            = "127.0.0.1"
disable_update_check = true
log_level            = "INFO"

ports {
  http = @P_CLIENT_HTTP@
  rpc  = @P_CLIENT_RPC@
  serf = @P_CLIENT_SERF@
}

advertise {
  http = "127.0.0.1"
  rpc  = "127.0.0.1"
  serf = "127.0.0.1"
}

client {
  enabled           = true
  servers           = ["127.0.0.1:@P_SERVER_RPC@"]
  node_class        = "caravan"
  network_interface = "lo"
  # An absolute path under cgroups v1 (Nomad 1.6's cpuset manager needs
  # one), a name under v2 (scripts/cluster.sh).
  cgroup_parent     = "@CGROUP_PARENT@"
  min_dynamic_port  = @P_DYN_MIN@
  max_dynamic_port  = @P_DYN_MAX@
  # Nomad caps a task's kill_timeout at this (30s by default); the S3
  # e2e stops a job with kill_timeout = "45s" (a checkpoint through 30 s of
  # throttling, e2e/s3 TestS3_StopCheckpointSurvivesSlowDown).
  max_kill_timeout  = "60s"

  # Keep finished allocations (their logs, their task state) until the
  # server collects them. Nomad's defaults destroy a terminal allocation as
  # soon as it ends whenever the disk is over 80% used or the inodes over
  # 70% (the GC runs each time an allocation ends), and beyond 50 allocations
  # per client: on a busy or nearly full build machine every test that reads
  # a finished task's logs then gets "state for allocation ... not found on
  # client". A real client with little disk wants the defaults.
  gc_disk_usage_threshold  = 99
  gc_inode_usage_threshold = 99
  gc_max_allocs            = 500

  meta {
    "caravan.node" = "@NODE@"
    # What runs this client's docker-driver tasks: docker (dockerd), podman
    # (its Docker-compatible API) or none (scripts/cluster/runtimes.sh).
    # Jobs pick a runtime with a constraint on ${meta.caravan.container_runtime}.
    "caravan.container_runtime" = "@CONTAINER_RUNTIME@"
  }

  options {
    # Without this list the client probes cloud metadata addresses.
    "fingerprint.denylist" = "env_aws,env_gce,env_azure,env_digitalocean"
    # No QEMU or Java here: skip their drivers. Docker is denied too when
    # the cluster runs no container runtimes (scripts/cluster/runtimes.sh).
    "driver.denylist" = "@DRIVER_DENYLIST@"
  }
}

plugin "raw_exec" {
  config {
    enabled = true
  }
}

consul {
  address = "127.0.0.1:@P_CONSUL_HTTP@"
}

telemetry {
  collection_interval        = "1s"
  publish_allocation_metrics = true
  publish_node_metrics       = true
}
