"""MLflow peer of `store_bench registry` (bench/store_bench.cpp), run by bench/store_bench.sh.

The same work through MLflow's tracking API on its SQLite backend and a local artifact folder:
log `--runs` runs (parameters, per-epoch loss and accuracy, the model file: a 784-256-10 MLP's
weights, float32, written with numpy.savez as PyTorch's default initialisation draws them),
search the top 5 runs by final accuracy, download the best run's model file, load it and run the
MLP once. Prints one JSON line. NumPy stands in for a framework so that the peer needs no
PyTorch install.
"""
import argparse
import json
import logging
import os
import random
import time
import warnings


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dir", required=True, help="an empty folder for the database and artifacts")
    p.add_argument("--runs", type=int, default=200)
    p.add_argument("--epochs", type=int, default=10)
    a = p.parse_args()

    warnings.filterwarnings("ignore")
    logging.getLogger("mlflow").setLevel(logging.ERROR)
    logging.getLogger("alembic").setLevel(logging.ERROR)
    import mlflow
    import numpy as np
    db = os.path.join(a.dir, "mlflow.db")
    mlflow.set_tracking_uri("sqlite:///" + db)
    client = mlflow.MlflowClient()
    exp = client.create_experiment("bench", artifact_location="file://" + os.path.join(a.dir, "artifacts"))

    def mlp(seed):
        g = np.random.default_rng(seed)
        def linear(n_in, n_out):
            bound = 1.0 / np.sqrt(n_in)
            return (g.uniform(-bound, bound, (n_out, n_in)).astype(np.float32),
                    g.uniform(-bound, bound, n_out).astype(np.float32))
        (w1, b1), (w2, b2) = linear(784, 256), linear(256, 10)
        return {"hidden.weight": w1, "hidden.bias": b1, "logits.weight": w2, "logits.bias": b2}

    def forward(m, x):
        h = np.maximum(x @ m["hidden.weight"].T + m["hidden.bias"], 0)
        return h @ m["logits.weight"].T + m["logits.bias"]

    rng = random.Random(0)
    model_file = os.path.join(a.dir, "model.npz")
    t0 = time.perf_counter()
    for r in range(a.runs):
        model = mlp(r)
        hyper = {"lr": 1e-3 * (1 + r % 7), "hidden": 256, "batch_size": 64 << (r % 3), "seed": r}
        with mlflow.start_run(experiment_id=exp):
            mlflow.log_params(hyper)
            acc = 0.0
            for e in range(a.epochs):
                acc = 0.5 + 0.45 * rng.random()
                mlflow.log_metrics({"loss": 1.0 - acc + 0.1 * rng.random(), "accuracy": acc}, step=e)
            np.savez(model_file, **model)
            mlflow.log_artifact(model_file)
    t_log = time.perf_counter() - t0

    t1 = time.perf_counter()
    top = mlflow.search_runs(experiment_ids=[exp], order_by=["metrics.accuracy DESC"], max_results=5,
                             output_format="list")
    t_search = time.perf_counter() - t1

    t2 = time.perf_counter()
    path = mlflow.artifacts.download_artifacts(run_id=top[0].info.run_id, artifact_path="model.npz",
                                               dst_path=os.path.join(a.dir, "download"))
    with np.load(path) as f:
        model = {k: f[k] for k in f.files}
    y = forward(model, np.zeros((1, 784), np.float32))
    t_load = time.perf_counter() - t2
    assert tuple(y.shape) == (1, 10)

    print(json.dumps({"bench": "registry", "impl": "mlflow", "version": mlflow.__version__, "backend": "sqlite",
                      "runs": a.runs, "epochs": a.epochs, "log_s": t_log, "search_s": t_search, "load_s": t_load,
                      "total_s": t_log + t_search + t_load}))


if __name__ == "__main__":
    main()
