// Package adversarial is caravan's adversarial e2e suite: on the real local
// cluster (scripts/cluster.sh), each test attacks one part the way a hostile
// task, a broken report or an outage would, and states what must hold
// afterwards. Tests are skipped unless CARAVAN_E2E=1.
//
//	CARAVAN_E2E=1 CARAVAN_PORT_BASE=15200 CARAVAN_CLUSTER_DIR=$PWD/build/cluster-adv \
//	  go test -p 1 -count=1 -timeout 30m ./e2e/adversarial -v
package adversarial
