#!/usr/bin/env python3
"""Keras 3 (JAX backend, CPU) peer of bench/train_bench.cpp for the MLP and the CNN.

Prints one JSON object per line, with the names of train_bench:

    {"name": "train_mlp", "threads": 1, "seconds": 0.0031}

`seconds` is the median wall time of one `model.train_on_batch(x, y)` (a jitted XLA training
step: forward, loss, gradients, Adam update; the returned loss synchronizes) after 3 warm-up
steps (the first one compiles), on the same synthetic batch at every step. The models are those
of train_bench.cpp; the CNN runs channels-last (Keras's default layout, the faster one for
XLA on CPU).

Threads: XLA's CPU backend sizes its pools from the CPUs it may run on, so the process is
pinned to the first N CPUs (sched_setaffinity) and, for N = 1, Eigen's multi-threading is
turned off (--xla_cpu_multi_thread_eigen=false). KERAS_BACKEND=jax and XLA_FLAGS are set and
the script re-execs itself before importing keras / jax.

Needs `pip install keras jax` (bench/requirements-keras.txt).

Usage:
    python3 bench/keras_train_peer.py [--threads 1,2] [--only train_mlp,train_cnn] [--steps 15]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

NAMES = ["train_mlp", "train_cnn"]
MARKER = "LOOM_KERAS_TRAIN_PEER_ENV"


def build(name, keras, np):
    layers = keras.layers
    rng = np.random.default_rng(1)
    if name == "train_mlp":
        model = keras.Sequential([keras.Input((784,)), layers.Dense(512, activation="relu"),
                                  layers.Dense(512, activation="relu"), layers.Dense(10)])
        x = rng.standard_normal((128, 784), dtype=np.float32)
        lr = 1e-3
    else:
        model = keras.Sequential([
            keras.Input((28, 28, 1)),
            layers.Conv2D(32, 3, padding="same", use_bias=False), layers.BatchNormalization(),
            layers.ReLU(), layers.MaxPooling2D(2),
            layers.Conv2D(64, 3, padding="same", use_bias=False), layers.BatchNormalization(),
            layers.ReLU(), layers.MaxPooling2D(2),
            layers.Flatten(), layers.Dropout(0.25), layers.Dense(128, activation="relu"),
            layers.Dropout(0.25), layers.Dense(10)])
        x = rng.standard_normal((128, 28, 28, 1), dtype=np.float32)
        lr = 2e-3
    y = rng.integers(0, 10, (128,)).astype(np.int32)
    model.compile(optimizer=keras.optimizers.Adam(learning_rate=lr),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model, x, y


def run(threads, only, steps):
    import numpy as np
    import keras
    import jax

    for name in NAMES:
        if only and name not in only:
            continue
        keras.utils.set_random_seed(0)
        model, x, y = build(name, keras, np)

        def step():
            return float(model.train_on_batch(x, y))

        t0 = time.perf_counter()
        step()  # traces and compiles
        first = time.perf_counter() - t0
        for _ in range(2):
            step()
        times, losses = [], []
        for _ in range(steps):
            t = time.perf_counter()
            losses.append(step())
            times.append(time.perf_counter() - t)
        print(json.dumps({"name": name, "threads": threads, "seconds": statistics.median(times)}),
              flush=True)
        print(f"# keras/{jax.default_backend()} {name} threads {threads}: first step {first:.2f} s, "
              f"loss {losses[0]:.4f} -> {losses[-1]:.4f} over {steps} timed steps",
              file=sys.stderr, flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", default="1", help="thread count, or a comma-separated list")
    ap.add_argument("--only", default="", help="comma-separated benchmark names")
    ap.add_argument("--steps", type=int, default=15)
    args = ap.parse_args()
    counts = [int(x) for x in args.threads.split(",") if x.strip()]
    only = {x for x in args.only.split(",") if x}
    if unknown := only - set(NAMES):
        ap.error(f"unknown benchmark(s) {sorted(unknown)}; known: {NAMES}")
    if len(counts) > 1:
        rest, skip = [], False
        for a in sys.argv[1:]:
            if skip:
                skip = False
            elif a == "--threads":
                skip = True
            elif not a.startswith("--threads="):
                rest.append(a)
        for n in counts:
            subprocess.run([sys.executable, os.path.abspath(__file__), "--threads", str(n), *rest],
                           check=True)
        return
    threads = counts[0]
    if os.environ.get(MARKER) != str(threads):
        env = dict(os.environ)
        env["KERAS_BACKEND"] = "jax"
        env["JAX_PLATFORMS"] = "cpu"
        env["XLA_FLAGS"] = ("--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
                            if threads == 1 else "")
        env["OPENBLAS_NUM_THREADS"] = "1"
        env["TF_CPP_MIN_LOG_LEVEL"] = "2"
        env[MARKER] = str(threads)
        cpus = sorted(os.sched_getaffinity(0))[:threads]
        os.sched_setaffinity(0, cpus)  # inherited through exec
        os.execve(sys.executable, [sys.executable, os.path.abspath(__file__), *sys.argv[1:]], env)
    run(threads, only, args.steps)


if __name__ == "__main__":
    main()
