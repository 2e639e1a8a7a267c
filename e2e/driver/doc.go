// Package driver holds the e2e tests of caravan's checkpointing task driver
// on the local two-client cluster: suspend and resume by scaling, migration
// by `nomad alloc stop`, a node drain, and a kill -9 of the plugin, each
// ending with the trainer's parameters bit-for-bit equal to an uninterrupted
// run. The PyTorch jobspecs run here too, on CPU with Debian's python3-torch
// and the repository's Python helper (python/): the single-process one
// suspended and resumed bit for bit, the elastic one (torch.distributed.elastic
// with DDP over gloo) through 1 -> 2 -> 1 workers, a suspend and a resume,
// against an uninterrupted run's evaluation loss.
//
//	CARAVAN_E2E=1 CARAVAN_PORT_BASE=15100 CARAVAN_CLUSTER_DIR=$PWD/build/cluster-driver go test ./e2e/driver -v
package driver
