# A planner config file (caravan planner -config) with team queues:
# `caravan validate` recognises it by its blocks and checks it with the
# planner's own loader.
policy {
  interval = "30s"
}

queues {
  default = "research"
}

queue "research" {
  namespaces      = ["research"]
  guarantee       = 2
  borrowing_limit = 2
  # Right-sizing is applied to this queue's jobs that do not set
  # caravan_rightsize themselves (planner/README.md).
  rightsize = "apply"
}

queue "prod" {
  namespaces    = ["prod"]
  guarantee     = "1.5"
  lending_limit = "0.5"
  weight        = 2
}
