#!/bin/bash
# Builds what the real-GPU checklist (run.sh) needs into build/gpu: the device
# and nvml test binaries (cgo; go-nvml dlopens libnvidia-ml on the GPU host),
# the Python probes, and the trainer of jobspecs/train-pytorch.nomad.hcl.
# Run from the repository root; then carry build/gpu to the GPU machine and
# run `bash build/gpu/run.sh` there from the repository root.
set -euo pipefail
out=build/gpu
mkdir -p "$out"
CGO_ENABLED=1 go test -ldflags="-s -w" -c -o "$out/device.test" ./device
CGO_ENABLED=1 go test -ldflags="-s -w" -c -o "$out/nvml.test" ./device/nvml
cp scripts/gpu-check/{run.sh,loop.py,mps_limit.py,pack.py} "$out/"
awk '/data            = <<-EOF/{f=1;next} f&&/^        EOF/{f=0} f' jobspecs/train-pytorch.nomad.hcl |
	sed 's/^          //' >"$out/train_ckpt.py"
du -sh "$out"
