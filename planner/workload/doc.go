// Package workload reads the planner's input files: job workloads (the
// Pollux artifact's name,time,application,num_replicas,batch_size), the
// per-model measurement traces (placements.csv, scalability.csv,
// validation-<batch>.csv), the Philly job log (philly-jobs.csv) and the
// published average JCT table. Every parse error names the file, the line
// and the column (see ParseError).
package workload
