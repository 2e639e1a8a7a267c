# Least-privilege Nomad ACL policy for the caravan planner: read what it
# decides on, and change jobs only by scaling them (count changes, with the
# planner's scaling events; suspend = scale to 0, resume = scale up). That is
# every decision of the default configuration on single-group jobs.
#
# Three features register a new job version instead, and need submit-job
# too (planner-nomad-register.policy.hcl, attached beside this one):
#   - jobs whose workers and parameter servers change together
#     (meta caravan_ps_group), in one version, so no mismatched pair runs,
#     and stopping such a job whose training ended while stray workers wait;
#   - stopping a converged job (meta caravan_stop_on_converge = "true");
#   - policy { placement_affinity = true } (the count change of a resize is
#     a scale and still applies; only the affinity is not registered).
# On a Nomad agent that ignores a scale's JobModifyIndex (before 1.8.2, the
# open-source 1.6 line included) every count change is such a registration
# (planner/README.md, "ACLs"): attach the add-on there too.
# Without it those decisions are refused by Nomad (403); the planner logs
# the missing capability once, at error level, and GET /v1/plan shows each
# refused action with the reason.
#
# It cannot read secrets, exec into or signal allocations, read logs, or
# touch ACLs, variables, volumes or the operator API. (The planner checks
# progress tokens by reading a job's variables path with the task's own
# token, not with this one.)
#
#   nomad acl policy apply -description "caravan planner" caravan-planner \
#     jobspecs/acl/planner-nomad.policy.hcl
#   nomad acl token create -name caravan-planner -policy caravan-planner
#
# or, when the planner runs as jobspecs/planner.nomad.hcl, attach it to the
# planner's workload identity instead of minting a token:
#
#   nomad acl policy apply -namespace default -job caravan-planner \
#     caravan-planner jobspecs/acl/planner-nomad.policy.hcl

# Team queues: the planner needs these capabilities in every namespace a
# queue lists (and in those whose jobs fall into the default queue), and in
# no other. "*" covers them all; to grant no more, replace the block below
# with one block per managed namespace, the same capabilities in each:
#
#   namespace "team-a" { capabilities = ["list-jobs", "read-job", "scale-job"] }
#   namespace "team-b" { capabilities = ["list-jobs", "read-job", "scale-job"] }
#
# (and narrow planner-nomad-register.policy.hcl the same way). Jobs of other
# namespaces are then invisible to the planner: it neither plans nor counts
# them. e2e/planner's TestPlanner_QueuesUnderACL runs the planner with
# exactly that narrowing of both files, on an ACL-enabled Nomad: it reads
# both teams' jobs, suspends one team's borrower for the other's queue and
# starts the other's job after Nomad's plan, and is refused nothing.

# GET /v1/job/:id/scale (the planner's own scaling events) accepts read-job
# or read-job-scaling (Nomad v1.11.3), so read-job-scaling is not granted.
namespace "*" {
  capabilities = [
    "list-jobs", # GET /v1/jobs (long-polled)
    "read-job",  # GET /v1/job/:id, /v1/allocations, /v1/job/:id/scale
    "scale-job", # POST /v1/job/:id/scale (count changes, suspend, resume, reclaim)
  ]
}

# Capacity: nodes and their GPU share devices.
node {
  policy = "read"
}
