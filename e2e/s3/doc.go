// Package s3 holds the e2e tests of the S3 checkpoint store on a local
// cluster whose two clients share no checkpoint directory: their driver
// plugins' `store` block points at a real S3 server, SeaweedFS, that
// scripts/cluster.sh starts on loopback with an identities file when
// CARAVAN_STORE=s3 (scripts/cluster/s3.sh). They check that the server
// refuses wrong credentials and keeps teams apart by prefix; suspend and
// resume, migration, a drain and an elastic job scaled 1 -> 3 -> 2, each
// ending bit for bit; a kill -9 of the driver plugin in the middle of an
// upload; and the S3 server stopped during a commit, then restarted. Those
// two run on a standalone agent whose store is reached through an
// internal/s3fault proxy in the test's process, which holds uploads on
// demand.
//
// The faults a real server will not produce on demand run on the cluster's
// own clients: with CARAVAN_S3_FAULT_PROXY=1 (TEST ONLY; `make e2e-s3` sets
// it) scripts/cluster.sh puts internal/s3fault's proxy between the clients
// and SeaweedFS (127.0.0.1:base+17), and the tests set and clear faults at
// runtime on its loopback control endpoint (http://127.0.0.1:base+18,
// harness.S3Faults). No fault set, every request, the plugins' start check
// included, passes through unchanged. They check that 503 SlowDown during a
// stop's commit is retried and the commit saved within kill_timeout
// (TestS3_SlowDownDuringStopCommit), and that a connection reset midway
// through every upload of a chunk, then of the manifest, fails the stop's
// commit within kill_timeout with an event saying why and which generation
// is kept, which the replacement on the other client restores, and that
// the next commit works (TestS3_ResetMidUpload). TestS3_BadObjectsFallBack
// plants an object with the wrong checksum in place of a chunk and deletes
// a chunk a manifest names: the restore's event names both generations and
// the older one it fell back to, and the run resumes from it bit for bit.
//
// A cluster without the S3 store fails these tests, it does not skip them
// (and `scripts/cluster.sh up` fails without the weed binary):
//
//	make seaweedfs dev
//	export CARAVAN_STORE=s3 CARAVAN_S3_FAULT_PROXY=1 CARAVAN_RUNTIMES=none CARAVAN_PORT_BASE=14800 CARAVAN_CLUSTER_DIR=$PWD/build/cluster-e2e-s3
//	scripts/cluster.sh up
//	CARAVAN_E2E=1 go test -p 1 ./e2e/s3 -v
//	scripts/cluster.sh down
//
// or `make e2e-s3`, which `make test` runs.
package s3
