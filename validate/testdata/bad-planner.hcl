# A planner config file with every kind of error the planner's loader
# finds: each must be reported, in one run.
policy {
  intervall = "1m"
  cooldown  = "soon"
}
queues {
  default = "ghost"
}
queue "a" {
  namespaces = ["x"]
  guarantee  = "lots"
  garantee   = 2
  rightsize  = "sometimes"
}
queue "b" {
  namespaces = ["x"]
  weight     = -1
}
