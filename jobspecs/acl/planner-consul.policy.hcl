# Least-privilege Consul ACL policy for the caravan planner: register its own
# service (with its HTTP health check), create the session that holds the
# leader lock, and write only the lock key (the default lock_key; change
# the prefix with it).
#
#   consul acl policy create -name caravan-planner -rules @jobspecs/acl/planner-consul.policy.hcl
#   consul acl token create -description "caravan planner" -policy-name caravan-planner

service "caravan-planner" {
  policy = "write"
}

# Sessions are created on the local agent's node, whose name the policy
# cannot know in advance: narrow "" to it where node names are fixed. Tying
# the session to the node's serfHealth and the service check needs no
# node read (e2e/planner's TestPlanner_ConsulACL runs with exactly this
# policy on a default-deny Consul).
session_prefix "" {
  policy = "write"
}

key_prefix "caravan/planner/" {
  policy = "write"
}

# Training jobs find the planner through Consul (their Nomad templates use the
# client's Consul identity, not this token).
