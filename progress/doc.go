// Package progress is caravan's progress wire: what a training task sends to
// the planner (POST <planner>/v1/progress) and how it finds the planner and
// its own identity. Like nomad-autoscaler's sdk it is a shared types layer,
// standard library only, imported by both sides: the task-side clients
// (caravan trainer, `caravan planner report`, `caravan planner relay`) and
// the planner's server. A report is received, verified and stored by
// planner/service/ingest, not here.
//
// It holds the Sample type and its validation with plausibility bounds
// (sample.go), the environment variables and token discovery (env.go), and
// the client (client.go). The body is JSON with snake_case keys; which job a
// sample belongs to never comes from the body but from the task's verified
// Nomad workload identity, sent as `Authorization: Bearer <JWT>`.
package progress
