# Client plugin block for caravan's fractional-GPU device plugin (owned by the
# device plugin; see device/README.md). scripts/cluster.sh substitutes
# @CLUSTER_DIR@ and @NODE@ (client1|client2).
plugin "caravan-gpu" {
  args = ["device"]
}
