// Package s3 holds the e2e tests of the S3 checkpoint store on a local
// cluster whose two clients share no checkpoint directory: their driver
// plugins' `store` block points at a real S3 server, SeaweedFS, that
// scripts/cluster.sh starts on loopback with an identities file when
// CARAVAN_STORE=s3 (scripts/cluster/s3.sh). They check that the server
// refuses wrong credentials and keeps teams apart by prefix; suspend and
// resume, migration, a drain and an elastic job scaled 1 -> 3 -> 2, each
// ending bit for bit; a kill -9 of the driver plugin in the middle of an
// upload; and the S3 server stopped during a commit, then restarted. The
// fault cases run on a standalone agent whose store is reached through
// internal/s3fault's proxy, which slows uploads on demand.
//
// A cluster without the S3 store fails these tests, it does not skip them
// (and `scripts/cluster.sh up` fails without the weed binary):
//
//	make seaweedfs dev
//	CARAVAN_STORE=s3 CARAVAN_RUNTIMES=none CARAVAN_PORT_BASE=14800 CARAVAN_CLUSTER_DIR=$PWD/build/cluster-e2e-s3 scripts/cluster.sh up
//	CARAVAN_E2E=1 CARAVAN_STORE=s3 CARAVAN_PORT_BASE=14800 CARAVAN_CLUSTER_DIR=$PWD/build/cluster-e2e-s3 go test -p 1 ./e2e/s3 -v
//
// or `make e2e-s3`, which `make test` runs.
package s3
