#!/usr/bin/env python3
"""PyTorch DDP (gloo, CPU) peer of `dist_bench cnn` (bench/dist_bench.cpp).

One training step of train_bench's CNN (zoo::fashion_cnn with widths {32, 64}, hidden 128; the same module as train_cnn in
bench/torch_train_peer.py: conv32-bn-relu-pool, conv64-bn-relu-pool, flatten, dropout .25,
fc128, relu, dropout .25, fc10) on a global batch of 128 synthetic 1x28x28 images (128 / N per
process), cross-entropy, Adam(2e-3), train mode: zero_grad, forward, loss, backward (DDP's
bucketed allreduce, overlapped with backward; bucket_cap_mb 25), optimizer.step, loss.item().

N processes (--nproc, started by torch.multiprocessing, rendezvous on tcp://127.0.0.1) with
--threads intra-op threads each; with --nproc 1 the model is trained without DDP. Prints one
JSON object: the median step seconds over --steps after 5 warm-up steps (each step's time is
the slower rank's).

Usage: python3 bench/torch_ddp_peer.py [--nproc 2] [--threads 1] [--steps 30]
                                       [--no-broadcast-buffers] [--port 29533]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import warnings


def worker(rank, args):
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    import torch.nn.functional as F

    torch.set_num_threads(args.threads)
    n = args.nproc
    if n > 1:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.port}", rank=rank, world_size=n)
    torch.manual_seed(1)
    model = nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Dropout(0.25), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Dropout(0.25),
        nn.Linear(128, 10))
    if n > 1:
        with warnings.catch_warnings():  # 2.15 deprecates the name; forward_sync_buffers is not the same
            warnings.simplefilter("ignore", FutureWarning)
            model = nn.parallel.DistributedDataParallel(model, broadcast_buffers=not args.no_broadcast_buffers)
    g = torch.Generator().manual_seed(2 + rank)
    b = 128 // n
    x, y = torch.randn(b, 1, 28, 28, generator=g), torch.randint(0, 10, (b,), generator=g)
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    model.train()

    def step():
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    for _ in range(5):
        first = step()
    if n > 1:
        dist.barrier()
    times = []
    for _ in range(args.steps):
        t = time.perf_counter()
        last = step()
        times.append(time.perf_counter() - t)
    times = torch.tensor(times, dtype=torch.float64)
    if n > 1:
        dist.all_reduce(times, op=dist.ReduceOp.MAX)
    if rank == 0:
        grad_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
        print(f"torch_ddp_peer: loss {first:.4f} after warm-up, {last:.4f} at the end", file=sys.stderr)
        print(json.dumps({"bench": "cnn_step", "impl": "torch " + torch.__version__, "ranks": n,
                          "threads": args.threads, "per_rank_batch": b,
                          "broadcast_buffers": n > 1 and not args.no_broadcast_buffers,
                          "grad_bytes": grad_bytes, "steps": args.steps,
                          "median_s": round(statistics.median(times.tolist()), 5),
                          "min_s": round(min(times.tolist()), 5)}), flush=True)
    if n > 1:
        # destroy_process_group() can hang at exit on CPU/gloo (seen with 2.15 here): agree that
        # every rank is done, then leave without the teardown.
        dist.barrier()
        sys.stdout.flush()
        os._exit(0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--port", type=int, default=29533)
    ap.add_argument("--no-broadcast-buffers", action="store_true")
    args = ap.parse_args()
    if 128 % args.nproc:
        sys.exit("the batch of 128 must split evenly over --nproc processes")
    # Before torch is imported (here or in the spawned children): one OpenMP/BLAS pool per
    # process of --threads threads.
    for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[k] = str(args.threads)
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    if args.nproc == 1:
        worker(0, args)
        return
    import torch.multiprocessing as mp
    mp.spawn(worker, args=(args,), nprocs=args.nproc, join=True)


if __name__ == "__main__":
    main()
