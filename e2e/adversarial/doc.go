// Package adversarial is caravan's adversarial e2e suite: on the real local
// cluster (scripts/cluster.sh), tasks, progress reports and outages attack
// the driver, the store, the device plugin and the planner. Each test states
// what is expected and checks that nothing outside the task directory and the
// store changed and that no newer checkpoint was lost. container_test.go runs
// the checkpoint attacks from inside a docker container (the
// caravan-adversary image) against caravan's checkpoint role tasks. Tests
// are skipped unless CARAVAN_E2E=1.
//
//	CARAVAN_E2E=1 CARAVAN_PORT_BASE=15200 CARAVAN_CLUSTER_DIR=$PWD/build/cluster-adv \
//	  go test -p 1 -count=1 -timeout 30m ./e2e/adversarial -v
package adversarial
