# The caravan planner as a Nomad service job: two instances (one leads
# through a Consul lock, the other serves reads and takes over within seconds
# when the leader dies), each registering itself in Consul as service
# "caravan-planner" with an HTTP health check on /v1/health. The planner
# registers itself, rather than through a `service` block, because its
# leadership session is tied to that check's ID.
#
# Nomad access uses the task's own workload identity (NOMAD_TOKEN) with the
# least-privilege policy in jobspecs/acl/planner-nomad.policy.hcl attached to
# this job (clusters with ACLs enabled):
#
#   nomad acl policy apply -namespace default -job caravan-planner \
#     caravan-planner jobspecs/acl/planner-nomad.policy.hcl
#
# (plus jobspecs/acl/planner-nomad-register.policy.hcl, the same way, for
# parameter-server jobs, caravan_stop_on_converge or placement_affinity).
#
# and a Consul token with jobspecs/acl/planner-consul.policy.hcl in the
# variable consul_token (or CONSUL_HTTP_TOKEN from Vault/Nomad Variables).
#
#   nomad job run -var caravan_bin=$PWD/build/caravan \
#     -var nomad_addr=$NOMAD_ADDR -var consul_addr=$CONSUL_HTTP_ADDR jobspecs/planner.nomad.hcl
#
# Team queues (planner/README.md, "Team queues"): pass the blocks as the
# variable queues, e.g. -var-file with
#
#   queues = <<-Q
#     queue "team-a" {
#       namespaces = ["team-a"]
#       guarantee  = 2
#     }
#     queue "team-b" {
#       namespaces = ["team-b"]
#       guarantee  = 2
#     }
#   Q
#
# The shipped ACL policies grant their capabilities on namespace "*", so they
# already reach every namespace a queue lists.

variable "caravan_bin" {
  description = "Absolute path of the caravan binary on the clients."
  type        = string
}

variable "nomad_addr" {
  type    = string
  default = "http://127.0.0.1:4646"
}

variable "consul_addr" {
  type    = string
  default = "127.0.0.1:8500"
}

variable "consul_token" {
  type    = string
  default = ""
}

variable "count" {
  description = "Planner instances (one leader, the rest followers)."
  type        = number
  default     = 2
}

variable "policy" {
  description = "Allocation policy: goodput (the default), optimus, pollux, tiresias, drf or fifo."
  type        = string
  default     = "goodput"
}

variable "device" {
  description = "The GPU share device the planner allocates."
  type        = string
  default     = "caravan/gpushare"
}

variable "interval" {
  description = "Time between two decision rounds."
  type        = string
  default     = "30s"
}

variable "cooldown" {
  description = "Minimum time between two changes of one job."
  type        = string
  default     = "3m"
}

variable "suspend_quantum" {
  description = "Time slice under overload (Gandiva): a job that runs is not suspended for a waiting one before this."
  type        = string
  default     = "10m"
}

variable "queues" {
  description = "Team queues: the planner config's queues and queue blocks (planner/README.md, \"Team queues\"), inserted verbatim; \"\" for one pool."
  type        = string
  default     = ""
}

variable "dry_run" {
  type    = bool
  default = false
}

job "caravan-planner" {
  type     = "service"
  priority = 80

  group "planner" {
    count = var.count

    # Instances on different clients, so one client's death cannot take
    # every instance with it.
    constraint {
      operator = "distinct_hosts"
      value    = "true"
    }

    network {
      port "http" {}
    }

    task "planner" {
      driver = "raw_exec"

      config {
        command = var.caravan_bin
        args = [
          "planner", "-config", "local/planner.hcl",
          "-port", "${NOMAD_PORT_http}",
          "-service-id", "caravan-planner-${NOMAD_ALLOC_ID}",
        ]
      }

      # NOMAD_TOKEN: the planner's Nomad credential (workload identity).
      identity {
        env = true
      }

      env {
        CONSUL_HTTP_TOKEN = var.consul_token
      }

      template {
        destination   = "local/planner.hcl"
        change_mode   = "signal"
        change_signal = "SIGHUP"
        data          = <<-EOT
          log_level = "info"
          bind_addr = "{{ env "NOMAD_IP_http" }}"
          dry_run   = ${var.dry_run}
          nomad {
            address = "${var.nomad_addr}"
          }
          consul {
            address        = "${var.consul_addr}"
            check_interval = "2s"
          }
          policy {
            name            = "${var.policy}"
            interval        = "${var.interval}"
            cooldown        = "${var.cooldown}"
            restart_cost    = "30s"
            suspend_quantum = "${var.suspend_quantum}"
          }
          capacity {
            device = "${var.device}"
          }
          ${var.queues}
        EOT
      }

      kill_signal  = "SIGTERM"
      kill_timeout = "15s"

      resources {
        cpu    = 200
        memory = 128
      }
    }
  }
}
