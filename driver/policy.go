package driver

import (
	"context"
	"fmt"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/api"
	"github.com/hashicorp/nomad/plugins/drivers"
)

// policyCheckTimeout bounds reading the task's job from Nomad.
const policyCheckTimeout = 10 * time.Second

// jobReader reads a job from Nomad's API (a Nomad client agent proxies
// reads to the servers).
type jobReader interface {
	Info(jobID string, q *api.QueryOptions) (*api.Job, *api.QueryMeta, error)
}

// checkReschedulePolicy warns, in a task event, when the job of a
// checkpointing task has a reschedule policy that would end its training
// early: Nomad counts every `nomad alloc stop`, drain and preemption
// replacement as a reschedule, so a finite policy (a batch job's default is
// one in 24 h) leaves the job dead mid-training after that many
// migrations. The task driver API does not carry the policy, so the job is
// read from Nomad; when it cannot be, the check is skipped with a log line.
func checkReschedulePolicy(ctx context.Context, jobs jobReader, cfg *drivers.TaskConfig, events *taskEmitter, logger hclog.Logger) {
	if jobs == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, policyCheckTimeout)
	defer cancel()
	job, _, err := jobs.Info(cfg.JobID, (&api.QueryOptions{Namespace: cfg.Namespace}).WithContext(ctx))
	if err != nil {
		logger.Info("cannot read the job to check its reschedule policy (see the plugin options nomad_address and nomad_token_file)",
			"job_id", cfg.JobID, "error", err)
		return
	}
	if msg := reschedulePolicyWarning(job, cfg.TaskGroupName); msg != "" {
		events.emit(map[string]string{annotationReason: "reschedule_policy"}, "%s", msg)
	}
}

// reschedulePolicyWarning is the warning for group's reschedule policy in
// job, or "" when the policy lets training survive any number of moves.
func reschedulePolicyWarning(job *api.Job, group string) string {
	if job == nil {
		return ""
	}
	jobType := api.JobTypeService
	if job.Type != nil {
		jobType = *job.Type
	}
	rp := api.NewDefaultReschedulePolicy(jobType)
	if job.Reschedule != nil {
		rp.Merge(job.Reschedule)
	}
	for _, tg := range job.TaskGroups {
		if tg.Name != nil && *tg.Name == group && tg.ReschedulePolicy != nil {
			rp.Merge(tg.ReschedulePolicy)
		}
	}
	if rp.Unlimited != nil && *rp.Unlimited {
		return ""
	}
	attempts, interval := 0, time.Duration(0)
	if rp.Attempts != nil {
		attempts = *rp.Attempts
	}
	if rp.Interval != nil {
		interval = *rp.Interval
	}
	return fmt.Sprintf("Checkpoint warning: group %q allows %d reschedule(s) in %s; Nomad counts `nomad alloc stop`, "+
		"drains and preemptions as reschedules, so a further move leaves the job dead mid-training "+
		`(set reschedule { unlimited = true, delay = "5s", delay_function = "constant" })`, group, attempts, interval)
}
