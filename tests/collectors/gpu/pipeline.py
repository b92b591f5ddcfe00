"""A 1F1B pipeline on one GPU, one process per stage (run under torchrun),
annotated with pipescope_annotate. Activations and gradients go through NCCL
send/recv, paired the deadlock-free way (send forward + receive backward in
one batch); each rank poses as its own host (NCCL_HOSTID) so NCCL accepts
several ranks on one GPU. CHECK_BACKEND=gloo sends through the host instead.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "collectors", "python"))

import torch
import torch.distributed as dist

import pipescope_annotate as psa

MICROBATCHES, ITERATIONS, HIDDEN, BATCH = 8, 3, 2048, 64


def main():
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    os.environ.setdefault("NCCL_HOSTID", "pipescope-check-%d" % rank)
    torch.cuda.set_device(0)
    backend = os.environ.get("CHECK_BACKEND", "nccl")
    on_gpu = backend == "nccl"
    if on_gpu:
        dist.init_process_group(backend, device_id=torch.device("cuda", 0))
    else:
        dist.init_process_group(backend)
    torch.manual_seed(rank)
    layers = [torch.nn.Linear(HIDDEN, HIDDEN) for _ in range(2 + rank % 2)]  # uneven stages on purpose
    stage = torch.nn.Sequential(*[m for l in layers for m in (l, torch.nn.GELU())]).cuda()
    psa.annotate(stage, stage=rank)
    opt = torch.optim.SGD(stage.parameters(), lr=1e-3)
    shape = (BATCH, HIDDEN)
    first, last = rank == 0, rank == world - 1
    dev = "cuda" if on_gpu else "cpu"

    def exchange(sends, recvs):
        """sends: [(tensor, peer)], recvs: [peer] -> received tensors on the GPU."""
        bufs = [torch.empty(shape, device=dev) for _ in recvs]
        ops = [dist.P2POp(dist.isend, t if on_gpu else t.cpu(), p) for t, p in sends]
        ops += [dist.P2POp(dist.irecv, b, p) for b, p in zip(bufs, recvs)]
        if not ops:
            return []
        if on_gpu:
            reqs = dist.batch_isend_irecv(ops)
        else:
            reqs = [op.op(op.tensor, op.peer) for op in ops]
        for r in reqs:
            r.wait()
        return [b.cuda() for b in bufs]

    for _ in range(ITERATIONS):
        inputs, outputs = [], []
        warm = min(world - rank - 1, MICROBATCHES)
        remaining = MICROBATCHES - warm

        def forward(x):
            if x is None:
                x = torch.randn(shape, device="cuda")
            else:
                x.requires_grad_(True)
            y = stage(x)
            inputs.append(x)
            outputs.append(y.float().pow(2).mean() if last else y)
            return y

        def backward(g):
            x, y = inputs.pop(0), outputs.pop(0)
            y.backward() if last else y.backward(g)
            return None if first else x.grad

        def recv_forward():
            return None if first else exchange([], [rank - 1])[0]

        for _ in range(warm):
            y = forward(recv_forward())
            exchange([] if last else [(y.detach(), rank + 1)], [])
        x = recv_forward() if remaining > 0 else None
        for i in range(remaining):
            y = forward(x)
            got = exchange([] if last else [(y.detach(), rank + 1)], [] if last else [rank + 1])
            gx = backward(got[0] if got else None)
            if i == remaining - 1:
                exchange([] if first else [(gx, rank - 1)], [])
            else:
                got = exchange([] if first else [(gx, rank - 1)], [] if first else [rank - 1])
                x = got[0] if got else None
        for _ in range(warm):
            g = exchange([], [rank + 1])[0]
            gx = backward(g)
            exchange([] if first else [(gx, rank - 1)], [])
        loss = torch.ones(1, device=dev)
        dist.all_reduce(loss)
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
    dist.barrier()
    dist.destroy_process_group()
    print("RESULT pipeline rank=%d backend=%s done" % (rank, backend))


if __name__ == "__main__":
    main()
