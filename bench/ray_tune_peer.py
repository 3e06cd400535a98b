#!/usr/bin/env python3
"""Ray Tune's side of bench/asha_bench.sh: the search of `asha_bench` (bench/asha_bench.cpp) with
Ray Tune's ASHAScheduler on PyTorch. The same space (learning rate log-uniform in [1e-4, 1e-1],
hidden width an integer in [16, 256]), the same Fashion-MNIST images (the first TRAIN of the
training split for training, its last VAL for validation, read from the gzip IDX files), the same
MLP (784 -> width -> ReLU -> 10, Glorot-uniform weights, zero biases), Adam with PyTorch's
defaults but the learning rate, batch 64 shuffled each epoch, cross-entropy, validation accuracy
reported after each epoch; ASHA with grace period r = 1, max_t R, reduction factor 3 (one
bracket); one trial at a time on a local single-node cluster of THREADS CPUs, each trial's
torch using THREADS threads, its actor reused by the next trial (reuse_actors, Ray's option for
short trials: a new worker process per trial took 2.4x as long here). Ray Tune's default loggers
(JSON, CSV, TensorBoard files per trial) stay on, as Loom records its trials in its store. The
wall time is tuner.fit()'s (ray.init and the data's loading not counted). Prints one JSON line
like asha_bench's (after Tune's own output).

    ray_tune_peer.py [--data DIR] [--train N] [--val N] [--epochs R] [--trials N] [--seed S]
                     [--threads T] [--points FILE]

--points: a JSON list of {"lr", "width"} objects (asha_bench's trials' parameters) evaluated in
that order instead of Ray's own random draws, so both sides train the same trials.
"""
import argparse
import atexit
import gzip
import json
import os
import shutil
import tempfile
import time

import numpy as np
import ray
import torch
from ray import train, tune
from ray.tune.schedulers import ASHAScheduler
from ray.tune.search.basic_variant import BasicVariantGenerator


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    if data[:2] != b"\0\0" or data[2] != 8:
        raise ValueError("%s: not an unsigned-byte IDX file" % path)
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(data[3])]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * len(dims)).reshape(dims)


def load(directory, first, n):
    x = read_idx(os.path.join(directory, "train-images-idx3-ubyte.gz")).reshape(-1, 784)
    y = read_idx(os.path.join(directory, "train-labels-idx1-ubyte.gz"))
    return (torch.from_numpy(x[first:first + n].astype(np.float32) / 255.0),
            torch.from_numpy(y[first:first + n].astype(np.int64)))


def trial(config, train_data=None, val_data=None, epochs=None, threads=None):
    torch.set_num_threads(threads)
    torch.manual_seed(7)
    model = torch.nn.Sequential(torch.nn.Linear(784, config["width"]), torch.nn.ReLU(),
                                torch.nn.Linear(config["width"], 10))
    for m in model:
        if isinstance(m, torch.nn.Linear):
            torch.nn.init.xavier_uniform_(m.weight)
            torch.nn.init.zeros_(m.bias)
    opt = torch.optim.Adam(model.parameters(), lr=config["lr"])
    loss_fn = torch.nn.CrossEntropyLoss()
    x, y = train_data
    vx, vy = val_data
    train_s = 0.0  # training and validation, as asha_bench's train_s
    for epoch in range(1, epochs + 1):
        e0 = time.monotonic()
        model.train()
        order = torch.randperm(len(x), generator=torch.Generator().manual_seed(epoch))
        for i in range(0, len(x), 64):
            idx = order[i:i + 64]
            opt.zero_grad()
            loss_fn(model(x[idx]), y[idx]).backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            correct = sum(int((model(vx[i:i + 500]).argmax(1) == vy[i:i + 500]).sum()) for i in range(0, len(vx), 500))
        train_s += time.monotonic() - e0
        train.report({"accuracy": correct / len(vx), "train_s": train_s})


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("--train", type=int, default=10000)
    parser.add_argument("--val", type=int, default=2000)
    parser.add_argument("--epochs", type=int, default=9)
    parser.add_argument("--trials", type=int, default=27)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--points")
    args = parser.parse_args()

    train_data = load(args.data, 0, args.train)
    val_data = load(args.data, 60000 - args.val, args.val)
    points = None
    if args.points:
        with open(args.points) as f:
            points = [{"lr": float(p["lr"]), "width": int(p["width"])} for p in json.load(f)]
        if len(points) != args.trials:
            raise SystemExit("--points: %d points for %d trials" % (len(points), args.trials))

    ray.init(num_cpus=args.threads, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    storage = tempfile.mkdtemp(prefix="loom-ray-tune-")
    atexit.register(shutil.rmtree, storage, True)  # Tune's result files
    tuner = tune.Tuner(
        tune.with_resources(
            tune.with_parameters(trial, train_data=train_data, val_data=val_data, epochs=args.epochs, threads=args.threads),
            {"cpu": args.threads}),
        param_space={"lr": tune.loguniform(1e-4, 1e-1), "width": tune.randint(16, 257)},
        tune_config=tune.TuneConfig(
            metric="accuracy", mode="max", num_samples=args.trials, max_concurrent_trials=1, reuse_actors=True,
            search_alg=BasicVariantGenerator(points_to_evaluate=points, random_state=args.seed),
            scheduler=ASHAScheduler(time_attr="training_iteration", max_t=args.epochs, grace_period=1,
                                    reduction_factor=3, brackets=1)),
        run_config=train.RunConfig(name="asha-bench", storage_path=storage, verbose=0))
    start = time.monotonic()
    results = tuner.fit()
    wall_s = time.monotonic() - start

    trials = []
    for r in results:
        if r.error:
            raise SystemExit("a trial failed: %s" % r.error)
        steps = int(r.metrics["training_iteration"])
        trials.append({"params": {"lr": r.config["lr"], "width": r.config["width"]},
                       "state": "completed" if steps >= args.epochs else "stopped",
                       "epochs": steps, "accuracy": r.metrics["accuracy"], "train_s": r.metrics["train_s"]})
    # As Loom's SearchInfo::best_trial: the best trial that ran the whole budget.
    done = [t for t in trials if t["state"] == "completed"]
    best = max(done or trials, key=lambda t: (t["epochs"], t["accuracy"]) if not done else t["accuracy"])
    out = {"bench": "asha", "impl": "ray", "version": ray.__version__, "torch": torch.__version__,
           "sampler": "loom's points" if points else "random", "threads": args.threads, "concurrency": 1,
           "train": args.train, "val": args.val, "R": args.epochs, "r": 1, "eta": 3, "wall_s": wall_s,
           "train_s": sum(t["train_s"] for t in trials),
           "epochs": sum(t["epochs"] for t in trials), "trials": len(trials),
           "stopped": sum(t["state"] == "stopped" for t in trials),
           "best_accuracy": best["accuracy"], "best_params": best["params"], "trial_list": trials}
    ray.shutdown()
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
