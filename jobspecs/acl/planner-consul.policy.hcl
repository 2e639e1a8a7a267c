# Least-privilege Consul ACL policy for the caravan planner: register its own
# service (with its HTTP health check), create the session that holds the
# leader lock, and write only the lock key.
#
#   consul acl policy create -name caravan-planner -rules @jobspecs/acl/planner-consul.policy.hcl
#   consul acl token create -description "caravan planner" -policy-name caravan-planner

service "caravan-planner" {
  policy = "write"
}

# Sessions are created on the local agent's node; tying them to the node's
# serfHealth and the service check needs read on both.
session_prefix "" {
  policy = "write"
}

node_prefix "" {
  policy = "read"
}

key_prefix "caravan/planner/" {
  policy = "write"
}

# Training jobs find the planner through Consul (their Nomad templates use the
# client's Consul identity, not this token).
