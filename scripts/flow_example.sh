#!/usr/bin/env bash
# The workflow example (docs/workflow.md, "Examples"): imports Fashion-MNIST into a store
# (embedded SQLite, ./flow-example/flow.db), trains a 4-task hyper-parameter grid in two agent
# processes and evaluates the best model in a fresh process. Extra arguments go to the
# dispatcher (--epochs N, --limit-samples N, --agents N, --store PATH).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
./build/examples/flow_fashion_mnist dispatch --store flow-example/flow.db "$@"
