"""NCCL all-reduce check: 10 all-reduces of 1M floats and 5 broadcasts
between the ranks torchrun starts (one GPU: each rank poses as its own host)."""
import os

import torch
import torch.distributed as dist

rank = int(os.environ["RANK"])
os.environ.setdefault("NCCL_HOSTID", "pipescope-check-%d" % rank)
torch.cuda.set_device(0)
dist.init_process_group("nccl", device_id=torch.device("cuda", 0))
t = torch.ones(1 << 20, device="cuda")
for _ in range(10):
    dist.all_reduce(t)
for _ in range(5):
    dist.broadcast(t, 0)
torch.cuda.synchronize()
print("RESULT allreduce rank=%d value=%g" % (rank, t[0].item()))
dist.destroy_process_group()
