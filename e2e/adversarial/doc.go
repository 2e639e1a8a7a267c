// Package adversarial holds e2e tests in which tasks, reports and outages
// attack the cluster: each test says what is expected and checks that
// nothing outside the task directory and the store changed and that no
// newer checkpoint was lost.
//
//	CARAVAN_E2E=1 CARAVAN_PORT_BASE=15400 CARAVAN_CLUSTER_DIR=$PWD/build/cluster-hardening go test -p 1 ./e2e/adversarial -v
package adversarial
