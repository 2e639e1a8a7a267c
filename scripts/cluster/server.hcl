# Nomad server for the local caravan cluster: loopback only.
name                 = "server"
region               = "global"
datacenter           = "dc1"
data_dir             = "@CLUSTER_DIR@/server"
bind_addr            = "127.0.0.1"
disable_update_check = true
log_level            = "INFO"

ports {
  http = @P_SERVER_HTTP@
  rpc  = @P_SERVER_RPC@
  serf = @P_SERVER_SERF@
}

advertise {
  http = "127.0.0.1"
  rpc  = "127.0.0.1"
  serf = "127.0.0.1"
}

server {
  enabled          = true
  bootstrap_expect = 1
}

consul {
  address = "127.0.0.1:@P_CONSUL_HTTP@"
}
