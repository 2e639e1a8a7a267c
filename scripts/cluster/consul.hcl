# Consul dev agent for the local caravan cluster: loopback only.
node_name            = "caravan-consul"
datacenter           = "dc1"
bind_addr            = "127.0.0.1"
client_addr          = "127.0.0.1"
advertise_addr       = "127.0.0.1"
disable_update_check = true
log_level            = "INFO"

ports {
  http     = @P_CONSUL_HTTP@
  dns      = @P_CONSUL_DNS@
  serf_lan = @P_CONSUL_SERF_LAN@
  serf_wan = @P_CONSUL_SERF_WAN@
  server   = @P_CONSUL_SERVER@
  grpc     = @P_CONSUL_GRPC@
  grpc_tls = -1
}
