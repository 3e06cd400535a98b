"""MLflow side of the dashboard benchmark (bench/ui_bench.sh): logs the runs `store_bench ui-fill`
wrote to --dump (the same names, hyper-parameters, tags and per-epoch values) into MLflow's SQLite
tracking store, one log_batch per run. Prints one JSON line.

  python ui_mlflow_fill.py --db FILE.db --runs RUNS.json
"""
import argparse
import json
import logging
import time
import warnings


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--db", required=True)
    p.add_argument("--runs", required=True, help="the JSON store_bench ui-fill --dump wrote")
    p.add_argument("--artifacts", required=True, help="a folder for the experiment's artifacts (none are logged)")
    a = p.parse_args()
    warnings.filterwarnings("ignore")
    logging.getLogger("mlflow").setLevel(logging.ERROR)
    logging.getLogger("alembic").setLevel(logging.ERROR)
    import mlflow
    from mlflow.entities import Metric, Param, RunTag

    runs = json.load(open(a.runs))
    mlflow.set_tracking_uri("sqlite:///" + a.db)
    client = mlflow.MlflowClient()
    exp = client.create_experiment("ui-bench", artifact_location="file://" + a.artifacts)
    t0 = time.perf_counter()
    for r in runs:
        tags = {"sweep": r["tags"][0]}
        if "baseline" in r["tags"]:
            tags["baseline"] = "true"
        run = client.create_run(exp, run_name=r["name"], tags=tags)
        now = int(time.time() * 1000)
        metrics = [Metric(k, v, now, e) for k, values in r["metrics"].items() for e, v in enumerate(values)]
        params = [Param(k, str(v)) for k, v in r["hyper_parameters"].items()]
        client.log_batch(run.info.run_id, metrics=metrics, params=params)
        client.set_terminated(run.info.run_id, "FINISHED")
    t_log = time.perf_counter() - t0
    print(json.dumps({"bench": "ui-fill", "impl": "mlflow", "version": mlflow.__version__, "backend": "sqlite",
                      "experiment_id": exp, "runs": len(runs), "epochs": len(runs[0]["metrics"]["loss"]) if runs else 0,
                      "log_s": t_log}))


if __name__ == "__main__":
    main()
