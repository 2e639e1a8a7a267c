# The smallest job: one raw_exec task on a chosen client of the local
# cluster. e2e runs it on each client to prove the cluster works.
#
#   nomad job run -var node=client2 jobspecs/hello.nomad.hcl

variable "node" {
  description = "The client (node name) to run on."
  type        = string
  default     = "client1"
}

job "hello" {
  type = "batch"

  constraint {
    attribute = "${node.unique.name}"
    value     = var.node
  }

  group "hello" {
    task "hello" {
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        args    = ["-c", "echo hello from ${node.unique.name}"]
      }

      resources {
        cpu    = 50
        memory = 32
      }
    }
  }
}
