"""Under MPS with CUDA_MPS_PINNED_DEVICE_MEM_LIMIT: an allocation within the limit succeeds, one past it fails."""
import json, os, sys, torch
limit = int(os.environ["CARAVAN_GPU_MEMORY_LIMIT_BYTES"].split(",")[0])
out = {"limit_bytes": limit, "pinned": os.environ.get("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"),
       "threads": os.environ.get("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE")}
free, total = torch.cuda.mem_get_info()
out["mem_get_info"] = [free, total]
try:
    out["sm_count"] = torch.cuda.get_device_properties(0).multi_processor_count
except Exception as e:
    out["sm_count"] = repr(e)
def alloc(n):
    try:
        x = torch.empty(n, dtype=torch.uint8, device="cuda"); torch.cuda.synchronize(); return x, "ok"
    except Exception as e:  # torch.OutOfMemoryError
        return None, type(e).__name__ + ": " + str(e).splitlines()[0][:200]
within = limit - (3 << 30)
x, out["alloc_within_limit_minus_3GiB"] = alloc(within)
y, out["alloc_4GiB_more_past_limit"] = alloc(4 << 30)
del x, y
torch.cuda.empty_cache()
z, out["alloc_1.5x_limit_at_once"] = alloc(int(limit * 1.5))
print(json.dumps(out)); sys.stdout.flush()
