# Every kind of error caravan validate finds in a caravan task's config:
# each must be reported, with its field, in one run.
job "bad-checkpoint" {
  group "train" {
    task "trainer" {
      driver = "caravan"
      config {
        command       = ""
        work_dir      = "relative/dir"
        oom_score_adj = 5000
        checkpoint {
          signal           = "SIGFOO"
          interval         = "10ms"
          timeout          = "0s"
          on_restore_error = "retry"
          scope            = "job"
          key              = " padded"
        }
      }
    }
    task "other" {
      driver = "caravan"
      config {
        command = "/bin/true"
        commnd  = "typo"
      }
    }
  }
}
