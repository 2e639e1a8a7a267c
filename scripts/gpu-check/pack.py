"""A small training job (CNN on synthetic 32x32 images) timed for DURATION s after a warm-up; prints samples/s as JSON."""
import json, os, sys, time, torch, torch.nn as nn
name, duration, out = sys.argv[1], float(sys.argv[2]), sys.argv[3]
torch.manual_seed(hash(name) % 1000)
B = int(os.environ.get("PACK_BATCH", "128"))
model = nn.Sequential(
    nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
    nn.Linear(128, 10)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
x = torch.randn(B, 3, 32, 32, device="cuda"); y = torch.randint(0, 10, (B,), device="cuda")
lossf = nn.CrossEntropyLoss()
def step():
    opt.zero_grad(set_to_none=True); l = lossf(model(x), y); l.backward(); opt.step(); return l
for _ in range(50): step()
torch.cuda.synchronize()
n, t0 = 0, time.time()
while time.time() - t0 < duration:
    for _ in range(10): step()
    torch.cuda.synchronize(); n += 10
dt = time.time() - t0
json.dump({"job": name, "steps": n, "seconds": dt, "samples_per_s": n * B / dt, "batch": B,
           "threads": os.environ.get("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE")}, open(out, "w"))
