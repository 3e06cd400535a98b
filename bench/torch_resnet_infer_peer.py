#!/usr/bin/env python3
"""PyTorch eager peer of bench/resnet_infer.cpp: ResNet-18 (torchvision's architecture, defined
here so torchvision is not needed; 1000 classes, 224x224) in eval mode under torch.no_grad(),
median wall-clock and process CPU milliseconds per batch at batch 1 and 32 and 1 and 2
threads (as resnet_infer prints them).

Usage: python3 bench/torch_resnet_infer_peer.py [reps_b1=20] [reps_b32=3]
(the python3 first on PATH, with torch). Each thread count runs in its own process so that
OMP_NUM_THREADS is read fresh.
"""
from __future__ import annotations

import os
import platform
import subprocess
import sys
import time


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def median(v: list[float]) -> float:
    v = sorted(v)
    m = len(v)
    return v[m // 2] if m % 2 else 0.5 * (v[m // 2 - 1] + v[m // 2])


def resnet18():
    """The peers' ResNet-18 in eval mode (also used by bench/onnx_resnet_infer_peer.py): torch's
    default initialisation after torch.manual_seed(0), so every peer run has the same weights."""
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            y = torch.relu(self.bn1(self.conv1(x)))
            y = self.bn2(self.conv2(y))
            return torch.relu(y + (self.down(x) if self.down is not None else x))

    torch.manual_seed(0)
    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for cout, stride in [(64, 1), (128, 2), (256, 2), (512, 2)]:
        layers += [Block(cin, cout, stride), Block(cout, cout, 1)]
        cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 1000)]
    return nn.Sequential(*layers).eval()


def child(threads: int, reps1: int, reps32: int) -> None:
    import torch

    torch.set_num_threads(threads)
    net = resnet18()
    torch.manual_seed(0)
    for batch, reps in ((1, reps1), (32, reps32)):
        if reps < 1:
            continue
        x = torch.rand(batch, 3, 224, 224)
        with torch.no_grad():
            net(x)
            ms, cpu = [], []
            for _ in range(reps):
                t, c = time.perf_counter(), time.process_time()
                net(x)
                ms.append((time.perf_counter() - t) * 1e3)
                cpu.append((time.process_time() - c) * 1e3)
        print(f"torch {torch.__version__} eager resnet18 eval no_grad batch {batch:2d} threads {threads}: "
              f"{median(ms):8.1f} ms wall, {median(cpu):8.1f} ms cpu (medians of {reps})", flush=True)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
        return
    reps1 = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    reps32 = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    print(f"machine: {cpu_model()}", flush=True)
    for threads in (1, 2):
        env = dict(os.environ, OMP_NUM_THREADS=str(threads))
        subprocess.run([sys.executable, __file__, "--child", str(threads), str(reps1), str(reps32)], env=env, check=True)


if __name__ == "__main__":
    main()
