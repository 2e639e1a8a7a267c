// Package driver holds the e2e tests of caravan's checkpointing task driver
// on the local two-client cluster: suspend and resume by scaling, migration
// by `nomad alloc stop`, a node drain, and a kill -9 of the plugin, each
// ending with the trainer's parameters bit-for-bit equal to an uninterrupted
// run.
//
//	CARAVAN_E2E=1 CARAVAN_PORT_BASE=15100 CARAVAN_CLUSTER_DIR=$PWD/build/cluster-driver go test ./e2e/driver -v
package driver
