#!/usr/bin/env python3
"""ONNX Runtime peer of bench/resnet_infer.cpp: the ResNet-18 of bench/torch_resnet_infer_peer.py
(same definition, same seeded weights) exported with torch.onnx.export and run by an ONNX
Runtime InferenceSession on the CPU: median wall-clock and process CPU milliseconds per batch at
batch 1 and 32 and 1 and 2 threads, printed as the torch peer prints them.

Usage: python3 bench/onnx_resnet_infer_peer.py [--cpuid-avx2] [reps_b1=20] [reps_b32=3]
(the python3 first on PATH, with bench/requirements.txt and bench/requirements-onnx.txt).

--cpuid-avx2 runs ORT as on a CPU without AVX-512: MLAS has no switch to cap its kernels, so a
patched copy of the package is imported whose CPUID answers come without the AVX-512 bits
(bench/cpuid_avx2.py); the timing lines then say "cpuid avx2", and the run fails if ORT never
asked.

The parent exports one static-shape model per batch size into a temporary folder (removed at
the end) and saves an input and torch's logits for it; each thread count then runs in its own
process, which imports onnxruntime but not torch, checks ORT's logits against torch's (fails
if the largest absolute difference exceeds 1e-4) and times the session. Session options:
intra_op_num_threads = threads, inter_op_num_threads = 1, ORT_ENABLE_ALL graph optimizations,
ORT_SEQUENTIAL execution, CPUExecutionProvider; everything else at ORT's defaults (its pool
threads spin between calls, which the CPU column counts).
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

from torch_resnet_infer_peer import cpu_model, median

OPSET = 18  # the opset torch's ONNX function library is written in: no version conversion
TOLERANCE = 1e-4


def export(folder: str, batches: list[int]) -> None:
    """Writes resnet18_b{batch}.onnx, x_b{batch}.npy and logits_b{batch}.npy into folder."""
    import logging

    import numpy as np
    import torch

    from torch_resnet_infer_peer import resnet18

    # Its "torchvision is not installed" lines concern ops this model does not use.
    logging.getLogger("torch.onnx._internal.exporter._registration").setLevel(logging.ERROR)

    net = resnet18()
    torch.manual_seed(0)
    for batch in batches:
        x = torch.rand(batch, 3, 224, 224)
        with torch.no_grad():
            logits = net(x)
        torch.onnx.export(net, (x,), os.path.join(folder, f"resnet18_b{batch}.onnx"), dynamo=True,
                          opset_version=OPSET, input_names=["x"], output_names=["logits"],
                          external_data=False, verbose=False)
        np.save(os.path.join(folder, f"x_b{batch}.npy"), x.numpy())
        np.save(os.path.join(folder, f"logits_b{batch}.npy"), logits.numpy())


def child(folder: str, threads: int, reps1: int, reps32: int, masked_root: str | None) -> None:
    import numpy as np

    trap = None
    if masked_root:
        from cpuid_avx2 import install_trap
        trap = install_trap(masked_root, folder)
    import onnxruntime as ort

    isa = ""
    if trap is not None:
        if not ort.__file__.startswith(masked_root):
            sys.exit(f"onnx_resnet_infer_peer: imported {ort.__file__}, not the patched copy")
        isa = " cpuid avx2"

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    for batch, reps in ((1, reps1), (32, reps32)):
        if reps < 1:
            continue
        sess = ort.InferenceSession(os.path.join(folder, f"resnet18_b{batch}.onnx"), opts,
                                    providers=["CPUExecutionProvider"])
        x = np.load(os.path.join(folder, f"x_b{batch}.npy"))
        want = np.load(os.path.join(folder, f"logits_b{batch}.npy"))
        feed = {"x": x}
        (got,) = sess.run(None, feed)  # also the warm-up
        if trap is not None and trap.trapped_count() == 0:
            sys.exit("onnx_resnet_infer_peer: ORT never executed a patched CPUID; not an AVX2 run")
        diff = float(np.max(np.abs(got - want)))
        print(f"onnxruntime {ort.__version__} batch {batch:2d} threads {threads}: "
              f"max |logits - torch logits| = {diff:.3g} (limit {TOLERANCE:g}; "
              f"max |torch logit| {float(np.max(np.abs(want))):.3g})", flush=True)
        if not diff <= TOLERANCE:
            sys.exit(f"onnx_resnet_infer_peer: ORT's logits differ from torch's by {diff:.3g} "
                     f"at batch {batch}, more than {TOLERANCE:g}")
        ms, cpu = [], []
        for _ in range(reps):
            t, c = time.perf_counter(), time.process_time()
            sess.run(None, feed)
            ms.append((time.perf_counter() - t) * 1e3)
            cpu.append((time.process_time() - c) * 1e3)
        print(f"onnxruntime {ort.__version__}{isa} resnet18 opset {OPSET} ORT_ENABLE_ALL batch {batch:2d} "
              f"threads {threads}: {median(ms):8.1f} ms wall, {median(cpu):8.1f} ms cpu (medians of {reps})",
              flush=True)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6] or None)
        return
    args = sys.argv[1:]
    masked = "--cpuid-avx2" in args
    args = [a for a in args if a != "--cpuid-avx2"]
    reps1 = int(args[0]) if len(args) > 0 else 20
    reps32 = int(args[1]) if len(args) > 1 else 3
    print(f"machine: {cpu_model()}" + (" (ORT shown a CPUID without AVX-512)" if masked else ""), flush=True)
    with tempfile.TemporaryDirectory(prefix="loom-onnx-resnet-") as folder:
        export(folder, [b for b, r in ((1, reps1), (32, reps32)) if r >= 1])
        masked_root = ""
        if masked:
            from cpuid_avx2 import patch_package
            masked_root = patch_package("onnxruntime", folder)
        for threads in (1, 2):
            env = dict(os.environ, OMP_NUM_THREADS=str(threads))
            rc = subprocess.run([sys.executable, __file__, "--child", folder, str(threads), str(reps1),
                                 str(reps32), masked_root], env=env).returncode
            if rc != 0:
                sys.exit(rc)


if __name__ == "__main__":
    main()
