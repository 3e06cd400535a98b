#!/usr/bin/env python3
"""torchvision's side of bench/image_folder_bench.sh: ImageFolder(root, Resize(size) + ToTensor())
and torch.utils.data.DataLoader(batch_size, shuffle, num_workers 0 and 2); prints images/s, the
best of `epochs` passes after one warm-up pass (a fresh loader per worker count; the workers are
started once, persistent_workers, so that process start-up is not counted).

    python3 torch_image_folder_peer.py ROOT [epochs=3] [size=224] [batch=64]
"""
import sys
import time

import torch
import torchvision
import torchvision.transforms as T


def main():
    root = sys.argv[1]
    epochs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    size = int(sys.argv[3]) if len(sys.argv) > 3 else 224
    batch = int(sys.argv[4]) if len(sys.argv) > 4 else 64
    # torch's own intra-op thread count (Debian's torch starts with 1 here): ToTensor's division and
    # the collation are all it runs; with 2 OpenMP threads on a loaded machine they spun, 16 images/s
    ds = torchvision.datasets.ImageFolder(root, transform=T.Compose([T.Resize(size), T.ToTensor()]))
    print(f"torchvision {torchvision.__version__} (torch {torch.__version__}) ImageFolder: {len(ds)} images, "
          f"{len(ds.classes)} classes, resize {size}, batch {batch}, threads {torch.get_num_threads()}")
    for workers in (0, 2):
        loader = torch.utils.data.DataLoader(ds, batch_size=batch, shuffle=True, num_workers=workers,
                                             persistent_workers=workers > 0,
                                             generator=torch.Generator().manual_seed(1))
        best = 0.0
        checksum = 0
        for e in range(epochs + 1):
            t0 = time.perf_counter()
            n = 0
            for x, y in loader:
                n += x.shape[0]
                checksum += int(y.sum())
            rate = n / (time.perf_counter() - t0)
            if e > 0:
                best = max(best, rate)
        print(f"n_jobs {workers}: {best:.1f} images/s (labels checksum {checksum})")
        del loader


if __name__ == "__main__":
    main()
