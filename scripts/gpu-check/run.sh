#!/bin/bash
# The real-GPU checklist (device/README.md, "Verified on real hardware"), run
# from the repository root on a GPU host after scripts/gpu-check/prepare.sh.
# Findings land in /tmp/r, tarred into $OUT/results.tgz (or /tmp/results.tgz).
# Assembled from the two scripts run on 2026-11-24; background jobs are
# waited for by PID (a bare `wait` also waits for the log's tee and hangs).
R=/tmp/r; mkdir -p $R; G=$PWD/build/gpu; OUT=${OUT:-/tmp}
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 CARAVAN_REAL_GPU_DIR=$R
exec > >(tee $R/run.log) 2>&1
finish() {
	echo quit | CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps nvidia-cuda-mps-control 2>/dev/null
	cp /var/log/nvidia-mps/*.log $R/ 2>/dev/null; tar czf $OUT/results.tgz -C $R .
}
trap finish EXIT
T0=$(date +%s); t() { echo "=== [$(($(date +%s) - T0))s] $*"; }
waitready() { for i in $(seq 120); do [ -s $1 ] && return 0; sleep 0.5; done; echo "NOT READY $1"; return 1; }
stats() {
	CARAVAN_REAL_GPU_LABEL=$1 CARAVAN_REAL_GPU_EXPECT=$2 timeout 90 $G/device.test -test.run 'RealGPU_Stats$' -test.v 2>&1 | tail -8
	nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv
}
pack2() { # pack2 MODE BATCH SECONDS [envA envB]: jobs A and B together
	([ -z "$4" ] || . $R/$4.env; PACK_BATCH=$2 exec python3 $G/pack.py A $3 $R/$1-A.json) & local a=$!
	([ -z "$5" ] || . $R/$5.env; PACK_BATCH=$2 exec python3 $G/pack.py B $3 $R/$1-B.json) & local b=$!
	wait $a $b
}

t probe
date -u; uname -r; nvidia-smi; nvidia-smi -q >$R/nvidia-smi-q.txt; nvidia-smi -L
nvidia-smi --query-gpu=uuid,name,memory.total,mig.mode.current,compute_cap,pci.bus_id,driver_version --format=csv
python3 -c 'import torch; print(torch.__version__, torch.cuda.is_available())'

t fingerprint+reserve; timeout 60 $G/device.test -test.run 'RealGPU_FingerprintAndReserve' -test.v 2>&1 | tail -3
t xid; timeout 60 $G/device.test -test.run 'RealGPU_XidWatch' -test.v 2>&1 | tail -3; cat $R/xid.json
t nvml-unit; timeout 60 $G/nvml.test -test.v 2>&1 | grep -E "^(---|ok|FAIL|PASS)"

t stats-one; (. $R/resA.env; exec python3 $G/loop.py 3 $R/readyA) & PA=$!; waitready $R/readyA; sleep 1; stats one resA
t stats-two; (. $R/resB.env; exec python3 $G/loop.py 6 $R/readyB) & PB=$!; waitready $R/readyB; sleep 1; stats two resA,resB
kill $PA $PB; wait $PA $PB

t checkpoint
CK=$R/ckpt; mkdir -p $CK /tmp/ckdir; S=10000; export CARAVAN_CHECKPOINT_SIGNAL=SIGUSR1
timeout 120 python3 -u $G/train_ckpt.py --steps $S >$CK/uninterrupted.log 2>&1
CARAVAN_CHECKPOINT_DIR=/tmp/ckdir python3 -u $G/train_ckpt.py --steps $S >$CK/part1.log 2>&1 & P=$!
for i in $(seq 240); do grep -q "step=3000 " $CK/part1.log && break; sleep 0.25; done
kill -USR1 $P; for i in $(seq 100); do [ -s /tmp/ckdir/caravan-checkpoint.json ] && break; sleep 0.1; done
sleep 0.5; kill -TERM $P; wait $P; echo "part1 rc=$?"
SEQ=$(python3 -c 'import json; print(json.load(open("/tmp/ckdir/caravan-checkpoint.json"))["sequence"])')
STP=$(python3 -c 'import json; print(json.load(open("/tmp/ckdir/caravan-checkpoint.json"))["step"])')
CARAVAN_CHECKPOINT_DIR=/tmp/ckdir CARAVAN_CHECKPOINT_GENERATION=1 CARAVAN_CHECKPOINT_SEQUENCE=$SEQ \
	CARAVAN_CHECKPOINT_STEP=$STP CARAVAN_CHECKPOINT_RESTORED_FROM=self \
	timeout 120 python3 -u $G/train_ckpt.py --steps $S >$CK/part2.log 2>&1
echo "part2 rc=$?"; tail -3 $CK/part1.log; head -1 $CK/part2.log; tail -1 $CK/part2.log
echo "uninterrupted: $(tail -1 $CK/uninterrupted.log)"

for b in 128 2048; do
	t "packing batch $b: exclusive, one after the other"
	PACK_BATCH=$b python3 $G/pack.py A 15 $R/excl-$b-A.json; PACK_BATCH=$b python3 $G/pack.py B 15 $R/excl-$b-B.json
	t "packing batch $b: time-sliced"; pack2 ts-$b $b 15
done

t mps-start
export CUDA_MPS_PIPE_DIRECTORY=$(grep MPS_PIPE $R/mpsA.env | cut -d"'" -f2) CUDA_MPS_LOG_DIRECTORY=$(grep MPS_LOG $R/mpsA.env | cut -d"'" -f2)
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY; nvidia-cuda-mps-control -d; echo "mps-control rc=$?"; sleep 1
# MPS packing first: clients killed by a signal left the next client failing (below).
for b in 128 2048; do t "packing batch $b: MPS halves"; pack2 mps-$b $b 15 mpsA mpsB; done
t mps-limit; (. $R/mpsA.env; timeout 90 python3 $G/mps_limit.py) | tee $R/mps-limit.json
t mps-stats; (. $R/mpsA.env; exec python3 $G/loop.py 3 $R/readyMA) & PA=$!; (. $R/mpsB.env; exec python3 $G/loop.py 6 $R/readyMB) & PB=$!
waitready $R/readyMA; waitready $R/readyMB; sleep 1; stats mps mpsA,mpsB
kill $PA $PB; wait $PA $PB
t client-after-killed-clients; sleep 2
(. $R/mpsA.env; timeout 60 python3 -c 'import torch; torch.zeros(1, device="cuda"); torch.cuda.synchronize(); print("ok")' 2>&1 | tail -1)
echo quit | nvidia-cuda-mps-control; sleep 1; unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY

t packing-results
python3 - <<'PY'
import json
for b in (128, 2048):
    r = {k: {j: json.load(open(f"/tmp/r/{k}-{b}-{j}.json"))["samples_per_s"] for j in "AB"} for k in ("excl", "ts", "mps")}
    for k in ("ts", "mps"):
        ratio = sum(r[k][j] / r["excl"][j] for j in "AB")
        print(f"batch {b} {k}: A {r[k]['A']:.0f} B {r[k]['B']:.0f} samples/s (exclusive {r['excl']['A']:.0f}, {r['excl']['B']:.0f}); combined {ratio:.2f}x exclusive one after the other")
PY
t containers; which docker podman nvidia-ctk nvidia-container-cli || echo "no docker, podman, nvidia-ctk or nvidia-container-cli"
t done
