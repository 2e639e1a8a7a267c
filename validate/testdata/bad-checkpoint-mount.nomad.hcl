# A docker task whose checkpoint directory is hidden by a bind mount: it
# would save into the mount, the commit would see nothing, and every
# checkpoint would be lost (caravan validate refuses it).
job "bad-mount" {
  group "train" {
    task "trainer" {
      driver = "docker"
      config {
        image   = "localhost/caravan-trainer:local"
        volumes = ["local/ckpt-bind:${NOMAD_ALLOC_DIR}/checkpoint"]
      }
    }
    task "restore" {
      driver = "caravan"
      lifecycle { hook = "prestart" }
      config { checkpoint = { role = "restore", task = "trainer", dir = "checkpoint" } }
    }
    task "commit" {
      driver = "caravan"
      lifecycle { hook = "poststop" }
      config { checkpoint = { role = "commit", task = "trainer", dir = "checkpoint" } }
    }
  }

  group "other" {
    task "ps" {
      driver = "docker"
      config {
        image = "localhost/caravan-trainer:local"
        mount {
          type   = "bind"
          source = "local/state"
          target = "/alloc"
        }
        volumes = ["local/data:/alloc/data"]
      }
    }
    task "commit" {
      driver = "caravan"
      lifecycle { hook = "poststop" }
      config { checkpoint = { role = "commit", task = "ps", dir = "state/ps" } }
    }
  }
}
