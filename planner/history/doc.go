// Package history turns what a training job has done so far into the part
// of a policy.Job every policy may know (its age, the GPU-seconds it has
// consumed, how often it was restarted). The simulator and the live service
// both describe a job's history as a Record and convert it with Record.Job,
// so a policy sees the same inputs for the same history in both; the live
// service builds its Record from Nomad's allocation history (FromAllocs).
// Both size a job by its Request (Record.PolicyJob); the live service and
// the step engine queue it under time-slicing by its TimeSlice (QueueKey).
package history
