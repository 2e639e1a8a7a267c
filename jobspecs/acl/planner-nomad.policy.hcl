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
# Without it those decisions are refused by Nomad (403); the planner logs
# the missing capability once, at error level, and GET /v1/plan shows each
# refused action with the reason.
#
# It cannot read secrets, exec into or signal allocations, read logs, or
# touch ACLs, variables, volumes or the operator API.
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

namespace "*" {
  capabilities = [
    "list-jobs",        # GET /v1/jobs (long-polled)
    "read-job",         # GET /v1/job/:id, /v1/allocations
    "read-job-scaling", # GET /v1/job/:id/scale (the planner's own events)
    "scale-job",        # POST /v1/job/:id/scale (count changes, suspend, resume)
  ]
}

# Capacity: nodes and their GPU share devices.
node {
  policy = "read"
}
