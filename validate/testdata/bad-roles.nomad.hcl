# What the driver refuses across tasks and blocks when the tasks start,
# and a typo beside other errors of its block: each must be reported, in
# one run.
job "bad-roles" {
  group "train" {
    reschedule {
      unlimited = true
    }
    task "counter" {
      driver = "docker"
      config {
        image = "localhost/counter:local"
      }
    }
    # checkpoint.task names no task of the group.
    task "restore" {
      driver = "caravan"
      lifecycle {
        hook = "prestart"
      }
      config {
        checkpoint {
          role = "restore"
          task = "countr"
          dir  = "checkpoint"
        }
      }
    }
    # A restore in a poststart hook, a typo beside a bad scope.
    task "restore-late" {
      driver = "caravan"
      lifecycle {
        hook = "poststart"
      }
      config {
        checkpoint {
          role      = "restore"
          task      = "counter"
          dir       = "checkpoint"
          intervall = "1m"
          scope     = "job"
        }
      }
    }
    # The sidecar keys its checkpoints by group, the commit by allocation.
    task "sidecar" {
      driver = "caravan"
      lifecycle {
        hook    = "poststart"
        sidecar = true
      }
      config {
        checkpoint {
          role  = "sidecar"
          task  = "counter"
          dir   = "checkpoint"
          scope = "group"
        }
      }
    }
    task "commit" {
      driver = "caravan"
      lifecycle {
        hook = "poststop"
      }
      config {
        checkpoint {
          role = "commit"
          task = "counter"
          dir  = "checkpoint"
        }
      }
    }
  }
  group "gpu" {
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/true"
      }
      resources {
        device "caravan/gpushare" {
          count = 6
        }
      }
    }
  }
}
