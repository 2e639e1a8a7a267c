"""A CUDA process for metering: holds MEM_GIB of GPU memory and runs matmuls until killed."""
import os, sys, time, torch
mem_gib = float(sys.argv[1]); ready = sys.argv[2]
hold = torch.empty(int(mem_gib * (1 << 30)), dtype=torch.uint8, device="cuda")
a = torch.randn(4096, 4096, device="cuda")
torch.cuda.synchronize()
open(ready, "w").write(f"{os.getpid()} {torch.cuda.get_device_name()} {os.environ.get('CUDA_VISIBLE_DEVICES')}\n")
while True:
    for _ in range(20):
        b = a @ a
    torch.cuda.synchronize()
    time.sleep(0.01)
