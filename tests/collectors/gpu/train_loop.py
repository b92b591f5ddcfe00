"""A small training loop for the capture check: step times, and the number
of kernels torch.profiler sees for the measured steps.

  python train_loop.py plain      # median step time; measured steps between cudaProfilerStart/Stop
  python train_loop.py profiler   # same steps under torch.profiler; prints its kernel count
"""
import json
import os
import statistics
import sys
import time

import torch

WARMUP, STEPS = 10, int(os.environ.get("TRAIN_STEPS", "30"))


def main():
    mode = sys.argv[1]
    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = False
    torch.backends.cuda.matmul.allow_tf32 = True
    dev = "cuda"
    layer = torch.nn.TransformerEncoderLayer(1024, 16, 4096, batch_first=True, dropout=0.0)
    model = torch.nn.TransformerEncoder(layer, 6, enable_nested_tensor=False).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    x = torch.randn(16, 256, 1024, device=dev)

    def step():
        out = model(x)
        loss = out.float().pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()

    for _ in range(WARMUP):
        step()
    times = []
    if mode == "profiler":
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(STEPS):
                t = time.perf_counter()
                step()
                times.append((time.perf_counter() - t) * 1e3)
        path = "/tmp/train_loop_trace.json"
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f)["traceEvents"]
        kernels = sum(1 for e in events if e.get("cat") == "kernel")
        print("RESULT profiler_kernels=%d median_step_ms=%.4f steps=%d" % (kernels, statistics.median(times), STEPS))
        return
    torch.cuda.profiler.start()
    for _ in range(STEPS):
        t = time.perf_counter()
        step()
        times.append((time.perf_counter() - t) * 1e3)
    torch.cuda.profiler.stop()
    print("RESULT median_step_ms=%.4f mean_step_ms=%.4f steps=%d" % (statistics.median(times), statistics.mean(times), STEPS))


if __name__ == "__main__":
    main()
