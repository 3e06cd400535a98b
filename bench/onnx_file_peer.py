#!/usr/bin/env python3
"""ONNX Runtime peer of bench/onnx_import_infer.cpp: the same ONNX file in an InferenceSession
on the CPU, median wall-clock and process CPU milliseconds per batch at batch 1 and 32 and 1 and 2
threads, on uniform random input of shape (batch, 3, 224, 224).

Usage: onnx_file_peer.py MODEL.onnx [reps_b1=20] [reps_b32=3]
(under the ONNX Runtime of tests/onnx/requirements.txt: build/onnx-venv/bin/python).
Session options: intra_op_num_threads = threads, inter_op_num_threads = 1, ORT_ENABLE_ALL graph
optimizations, ORT_SEQUENTIAL, CPUExecutionProvider; each thread count in its own process.
"""
import os
import subprocess
import sys
import time

import numpy as np


def median(v):
    v = sorted(v)
    m = len(v)
    return v[m // 2] if m % 2 else 0.5 * (v[m // 2 - 1] + v[m // 2])


def child(path, threads, reps1, reps32):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    rng = np.random.default_rng(0)
    for batch, reps in ((1, reps1), (32, reps32)):
        if reps < 1:
            continue
        feed = {name: rng.random((batch, 3, 224, 224), dtype=np.float32)}
        sess.run(None, feed)  # warm-up
        ms, cpu = [], []
        for _ in range(reps):
            t, c = time.perf_counter(), time.process_time()
            sess.run(None, feed)
            ms.append((time.perf_counter() - t) * 1e3)
            cpu.append((time.process_time() - c) * 1e3)
        print(f"onnxruntime {ort.__version__} batch {batch:2d} threads {threads}: {median(ms):8.1f} ms wall, "
              f"{median(cpu):8.1f} ms cpu (medians of {reps})", flush=True)


def main():
    if sys.argv[1] == "--child":
        child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
        return
    path = sys.argv[1]
    reps1 = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    reps32 = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    for threads in (1, 2):
        env = dict(os.environ, OMP_NUM_THREADS=str(threads))
        rc = subprocess.run([sys.executable, __file__, "--child", path, str(threads), str(reps1), str(reps32)],
                            env=env).returncode
        if rc:
            sys.exit(rc)


if __name__ == "__main__":
    main()
