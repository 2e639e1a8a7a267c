# Add-on Nomad ACL policy for the caravan planner: submit-job, for the
# decisions that register a new job version (always with an enforced modify
# index, so a user's concurrent edit is never overwritten):
#   - workers and parameter servers changed together (meta caravan_ps_group),
#     and stopping such a job whose training ended while stray workers wait;
#   - stopping a converged job (meta caravan_stop_on_converge = "true");
#   - policy { placement_affinity = true };
#   - with team queues, the dry run of a start (PUT /v1/job/:id/plan, Nomad's
#     job plan): Nomad v1.11.3 checks a plan with submit-job, as it checks a
#     submission, though a plan writes nothing (read-job is not enough).
#     Without it, starts are written unchecked.
#   - on a Nomad agent that ignores a scale's JobModifyIndex (Nomad 1.6 up to
#     1.8.1, e.g. the open-source 1.6 line): every count change, suspension
#     and resumption. Such an agent would apply a scale decided on an old
#     version over a user's concurrent edit, so the planner (which detects
#     this by behaviour) changes counts there with a registration that
#     enforces the index, then records a count-less scaling event with its
#     meta. scale-job alone is not enough on those agents.
# Attach it beside planner-nomad.policy.hcl when one of them is used (on a
# Nomad before 1.8.2: always):
#
#   nomad acl policy apply -description "caravan planner: job versions" \
#     caravan-planner-register jobspecs/acl/planner-nomad-register.policy.hcl
#   nomad acl token create -name caravan-planner \
#     -policy caravan-planner -policy caravan-planner-register
#
# submit-job lets a token register any job in these namespaces, which is
# most of what an operator can do to them: narrow "*" to the namespaces the
# planner manages (with team queues, those the queues list), one block per
# namespace, as planner-nomad.policy.hcl shows.

namespace "*" {
  capabilities = ["submit-job"] # PUT /v1/jobs with EnforceIndex; PUT /v1/job/:id/plan
}
