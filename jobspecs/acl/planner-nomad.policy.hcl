# Least-privilege Nomad ACL policy for the caravan planner.
#
# It reads every job, allocation and node it needs to decide, and changes
# jobs only through scaling (count changes, with scaling events) and job
# registration with an enforced modify index (changes a scale cannot express,
# and stopping a converged job). It cannot read secrets, exec into or signal
# allocations, read logs, or touch ACLs, variables, volumes or the operator
# API.
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
    "scale-job",        # PUT /v1/job/:id/scale (count changes, suspend, resume)
    "submit-job",       # PUT /v1/jobs with EnforceIndex (full updates, stop at convergence)
  ]
}

# Capacity: nodes and their GPU share devices.
node {
  policy = "read"
}
