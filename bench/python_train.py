#!/usr/bin/env python3
"""Loom from Python against Loom from C++ and PyTorch from Python: training (issue 49, "Speed").

    PYTHONPATH=build/python python3 bench/python_train.py [--threads 1[,2]] [--rounds 15] [--steps 3]
                                                          [--samples 2048] [--only fit_mlp,...]

Rows (docs/benchmarks.md, "Loom from Python against Loom from C++"):

  fit_mlp            loom.Model(...).fit(x, y) on NumPy arrays against train::Model::fit
                     (bench/python_twin_bench.cpp): MLP 784-512-512-10, Adam, the accuracy
                     metric, one epoch of `samples` synthetic rows in batches of 128, a fresh
                     model each round. Goal: Python / C++ <= 1.01.
  step_mlp_autograd  a step written by hand from ops: linear, relu, cross_entropy, backward,
                     SGD by hand under no_grad (python_twin_bench.cpp's twin). Goal <= 1.03.
  train_mlp          a Python loop of loom.TrainStep against the C++ loop of train::TrainStep of
  train_cnn          bench/train_bench.cpp (the same names and models, through its --serve 1),
  train_ptb_lstm     and against PyTorch eager from Python (bench/torch_train_peer.py's models
                     and step). Goals: train_mlp Python / C++ <= 1.03 (the step API), and for all
                     three (Loom-Python / PyTorch) / (Loom-C++ / PyTorch) <= 1.05.

Every side keeps its models for the whole run: the C++ programs and the PyTorch side are child
processes that answer "name steps" requests on their stdin (PyTorch's imports torch once, and
torch's OpenMP threads never share a process with Loom's pool); Loom from Python runs in this
process. A model is built and warmed up (3 steps) at its first request. A round asks each side
in turn for `steps` timed steps of each row (fit: one fit), the order of the sides reversed
every other round so that a change of the machine's load weighs on both alike; a side's figure
in a round is the median of its steps (sorted[n // 2], as train_bench takes it). The ratios are
taken per round, and the summary gives their median over the rounds, of wall time and of process
CPU time (on a loaded machine the steadier figure at 1 thread); and, as "fastest", the ratio of
each side's fastest step (fit: fastest fit) over the whole run, since on a loaded machine noise
only ever adds time. The two MLP rows of python_twin_bench run first, all their rounds, then the
three step rows: so each phase's sides draw from Loom's process-wide random stream (initial
weights, dropout) in the same order.

Both Loom sides do the same work: the same seeds (weights after manual_seed(0), data from
Generator(1), (2), (3) as train_bench and python_twin_bench draw them), shapes, optimizers and
threads, so they compute the same losses. The script compares them in every round (fit: the
epoch's loss and accuracy, exactly; the steps: the first and last timed loss at 9 digits) and
exits with 1 when they differ.

Output: JSON lines on stdout: first the machine (CPU model, ISA, threads, load average,
versions); one per side, row and round,
    {"name": "train_mlp", "threads": 1, "seconds": 0.012, "cpu_seconds": 0.011, "min_seconds": 0.011,
     "min_cpu_seconds": 0.010, "system": "loom-python", "round": 0}
then one "summary" line per row and thread count; the summary as text on stderr.

Run it with the Python whose torch is the peer, with build/python on PYTHONPATH (a module built
for one CPython 3.11 imports in another 3.11); --torch-python names another interpreter for the
PyTorch side. Without torch (or with --no-torch) the PyTorch columns are left out.

With LOOM_BENCH_RESULTS=FILE it also appends the rows of docs/benchmarks.md's "Loom from
Python" table to FILE as result records (bench/bench_results.py; bench/results_table.py renders
them): CPU-time medians, the Python / C++ ratio and the hold.

ctest bench_python_train runs one round of one step of every row without PyTorch, under the
interpreter the module is built for: it fails when the two Loom sides stop computing the same
losses (a twin changed on one side only, or the module adding arithmetic of its own).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import bench_results  # noqa: E402  (standard library only)

# numpy and loom are imported by main(): the PyTorch side (this script with --torch-worker)
# must not load Loom's libraries into torch's process.
np = None
loom = None

TWIN_ROWS = ["fit_mlp", "step_mlp_autograd"]
STEP_ROWS = ["train_mlp", "train_cnn", "train_ptb_lstm"]
ROWS = TWIN_ROWS + STEP_ROWS
GOALS = {"fit_mlp": 1.01, "step_mlp_autograd": 1.03, "train_mlp": 1.03}  # Python / C++
TORCH_GOAL = 1.05  # (Loom-Python / PyTorch) / (Loom-C++ / PyTorch)
SGD_LR = 0.01  # step_mlp_autograd's, as python_twin_bench.cpp's kSgdLr
BATCH = 128


def load_average():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def timed(step, steps):
    """{seconds, cpu_seconds, first_loss, last_loss} of `steps` calls of step (which returns the loss)."""
    wall, cpu, losses = [], [], []
    for _ in range(steps):
        c0, t0 = time.process_time(), time.perf_counter()
        losses.append(step())
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - t0)
    return {"seconds": sorted(wall)[steps // 2], "cpu_seconds": sorted(cpu)[steps // 2],
            "min_seconds": min(wall), "min_cpu_seconds": min(cpu), "first_loss": f"{losses[0]:.9g}", "last_loss": f"{losses[-1]:.9g}"}


# ---------------------------------------------------------------- Loom from Python


def fit_mlp(samples):
    """python_twin_bench's fit_mlp: a fresh model, one epoch, timed around the fit call."""
    gen = loom.random.Generator(1)
    x = loom.random.standard_normal((samples, 784), generator=gen).numpy()  # NumPy arrays, as a user has
    y = loom.random.integers(0, 10, (samples,), generator=gen).numpy()
    loom.random.seed(0)  # the initial weights
    net = loom.zoo.mlp(784, [512, 512], 10)
    model = loom.Model(net, loss="sparse_categorical_crossentropy", optimizer="adam", metrics=["accuracy"])
    c0, t0 = time.process_time(), time.perf_counter()
    h = model.fit(x, y, epochs=1, batch_size=BATCH, seed=7, verbose=0)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"seconds": wall, "cpu_seconds": cpu, "min_seconds": wall, "min_cpu_seconds": cpu,
            "loss": h["loss"][-1], "accuracy": h["accuracy"][-1]}


def make_autograd_step():
    """python_twin_bench's step_mlp_autograd: ops, autograd and SGD written by hand."""
    gen = loom.random.Generator(1)
    x = loom.random.standard_normal((BATCH, 784), generator=gen)
    y = loom.random.integers(0, 10, (BATCH,), generator=gen)

    def weight(n_in, n_out):  # (in, out): loom.linear is x @ w + b
        return loom.random.normal(0.0, 0.05, (n_in, n_out), generator=gen).requires_grad_()

    def bias(n):
        return loom.zeros((n,)).requires_grad_()

    w1, b1, w2, b2, w3, b3 = weight(784, 512), bias(512), weight(512, 512), bias(512), weight(512, 10), bias(10)
    params = [w1, b1, w2, b2, w3, b3]

    def step():
        h = loom.relu(loom.linear(x, w1, b1))
        h = loom.relu(loom.linear(h, w2, b2))
        loss = loom.cross_entropy(loom.linear(h, w3, b3), y)
        loss.backward()
        with loom.no_grad():
            for p in params:
                g = p.grad
                g *= SGD_LR
                p -= g
                p.zero_grad()
        return loss.item()

    return step


def make_train_step(name):
    """train_bench's make_mlp / make_cnn / make_lstm through loom.TrainStep."""
    loom.random.seed(0)  # initializers and dropout masks, as train_bench's manual_seed(0)
    if name == "train_mlp":
        net = loom.zoo.mlp(784, [512, 512], 10)
        step = loom.TrainStep(net, "sparse_categorical_crossentropy", loom.optimizers.Adam(lr=1e-3))
        gen = loom.random.Generator(1)
        x = loom.random.standard_normal((128, 784), generator=gen)
        y = loom.random.integers(0, 10, (128,), generator=gen)
    elif name == "train_cnn":
        net = loom.zoo.fashion_cnn(10, widths=[32, 64], hidden=128)
        step = loom.TrainStep(net, "sparse_categorical_crossentropy", loom.optimizers.Adam(lr=2e-3))
        gen = loom.random.Generator(2)
        x = loom.random.standard_normal((128, 1, 28, 28), generator=gen)
        y = loom.random.integers(0, 10, (128,), generator=gen)
    elif name == "train_ptb_lstm":
        V, E, H, B, T = 10000, 200, 200, 20, 20
        net = loom.zoo.lstm_lm(V, E, H, 2)
        # train_bench's loss: cross-entropy of the (B, T, V) logits as (B * T, V) rows; a Python
        # function, which the step calls (taking the GIL) once per step
        step = loom.TrainStep(net, lambda logits, t: loom.cross_entropy(logits.reshape(-1, V), t),
                              loom.optimizers.SGD(lr=1.0), clip_grad_norm=5.0)
        gen = loom.random.Generator(3)
        x = loom.random.integers(0, V, (B, T), generator=gen)
        y = loom.random.integers(0, V, (B * T,), generator=gen)
    else:
        raise ValueError(name)
    return lambda: step(x, y).item()


class PythonSide:
    """Loom from Python, in this process, answering the requests the child processes answer."""

    def __init__(self, samples):
        self.samples = samples
        self.live = {}

    def ask(self, name, steps):
        if name == "fit_mlp":
            return fit_mlp(self.samples)
        if name not in self.live:
            self.live[name] = make_autograd_step() if name == "step_mlp_autograd" else make_train_step(name)
            for _ in range(3):  # warm-up, as the C++ sides
                self.live[name]()
        return timed(self.live[name], steps)

    def close(self):
        self.live.clear()


class ChildSide:
    """A child process answering "name steps" lines with one JSON line each."""

    def __init__(self, cmd, env=None):
        self.cmd = cmd
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)

    def ask(self, name, steps):
        self.proc.stdin.write(f"{name} {steps}\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"python_train.py: {' '.join(self.cmd)} ended (status {self.proc.wait()})")
        rec = json.loads(line)
        rec.setdefault("min_seconds", rec["seconds"])  # fit: one call, its own fastest
        rec.setdefault("min_cpu_seconds", rec["cpu_seconds"])
        return rec

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


def torch_worker(threads):
    """--torch-worker N: the PyTorch side. bench/torch_train_peer.py's models, built (after
    torch.manual_seed(0)) and stepped by its own build() and make_step() (eager, fused Adam, its
    default), kept from the first request on; answers as ChildSide expects."""
    import torch
    import torch_train_peer as peer

    torch.set_num_threads(threads)
    live = {}
    for line in sys.stdin:
        name, steps = line.split()
        if name not in live:
            torch.manual_seed(0)
            model, loss_fn, opt, clip = peer.build(name, torch, "fused")
            model.train()
            live[name] = peer.make_step(torch, model, loss_fn, opt, clip)
            for _ in range(3):
                live[name]()
        print(json.dumps({"name": name, "threads": threads, **timed(live[name], int(steps))}), flush=True)


def torch_version(python):
    p = subprocess.run([python, "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True)
    return p.stdout.strip() if p.returncode == 0 else None


# ---------------------------------------------------------------- main


def same(a, b):
    """Equal as numbers when both are (9-digit text against a JSON number), else as text."""
    try:
        return float(a) == float(b)
    except (TypeError, ValueError):
        return str(a) == str(b)


def emit(rec):
    print(json.dumps(rec), flush=True)


def main():
    global np, loom
    if len(sys.argv) == 3 and sys.argv[1] == "--torch-worker":
        torch_worker(int(sys.argv[2]))
        return 0
    import numpy as np
    import loom

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", default="1", help="thread count, or a comma-separated list")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--steps", type=int, default=3, help="timed steps per side, row and round")
    ap.add_argument("--samples", type=int, default=2048, help="fit_mlp's rows (one epoch of batches of 128)")
    ap.add_argument("--only", default="", help="comma-separated rows: " + ",".join(ROWS))
    ap.add_argument("--build", default=os.path.join(REPO, "build"),
                    help="the CMake build folder holding bench/train_bench and bench/python_twin_bench")
    ap.add_argument("--torch-python", default=sys.executable, help="the interpreter of the PyTorch side")
    ap.add_argument("--no-torch", action="store_true", help="without the PyTorch side (ctest bench_python_train)")
    args = ap.parse_args()
    only = [r for r in args.only.split(",") if r] or ROWS
    if unknown := set(only) - set(ROWS):
        ap.error(f"unknown row(s) {sorted(unknown)}; valid: {ROWS}")
    for prog in ("train_bench", "python_twin_bench"):
        if not os.access(os.path.join(args.build, "bench", prog), os.X_OK):
            ap.error(f"{args.build}/bench/{prog} is missing: cmake --build {args.build} --target {prog}")
    twin = [r for r in TWIN_ROWS if r in only]
    step_rows = [r for r in STEP_ROWS if r in only]
    tv = torch_version(args.torch_python) if step_rows and not args.no_torch else None
    if step_rows and tv is None and not args.no_torch:
        print(f"# torch does not import in {args.torch_python}: no PyTorch columns", file=sys.stderr)

    args.load_before = load_average().split()[0]
    info = bench_results.cpuinfo()
    isa, _ = bench_results.isa_of(info, bench_results.caps_from_env())
    counts = [int(t) for t in args.threads.split(",") if t.strip()]
    emit({"machine": bench_results.machine_name(info), "cpu": bench_results.cpu_description(info), "isa": isa,
          "threads": counts, "cores": os.cpu_count(), "load_before": load_average(),
          "python": platform.python_version(), "numpy": np.__version__, "torch": tv,
          "loom_module": os.path.dirname(loom.__file__)})

    results = []  # (name, threads, system, round, wall, cpu)
    mismatches = []
    bin_dir = os.path.join(args.build, "bench")
    for threads in counts:
        loom.set_num_threads(threads)
        phases = []
        if twin:
            phases.append((twin, {"loom-cpp": ChildSide([os.path.join(bin_dir, "python_twin_bench"), "--threads",
                                                         str(threads), "--samples", str(args.samples)])}))
        if step_rows:
            sides = {"loom-cpp": ChildSide([os.path.join(bin_dir, "train_bench"), "--threads", str(threads),
                                            "--serve", "1"])}
            if tv is not None:
                from torch_peer import thread_env

                sides["torch-python"] = ChildSide([args.torch_python, os.path.abspath(__file__), "--torch-worker",
                                                   str(threads)], env=thread_env(threads, "default"))
            phases.append((step_rows, sides))
        for rows, sides in phases:
            sides["loom-python"] = PythonSide(args.samples)
            order = ["loom-cpp", "loom-python", "torch-python"]
            for rnd in range(args.rounds):
                got = {}
                for system in (order if rnd % 2 == 0 else order[::-1]):
                    if system in sides:
                        got[system] = {name: sides[system].ask(name, args.steps) for name in rows}
                for system in order:
                    for name, r in got.get(system, {}).items():
                        emit({"name": name, "threads": threads, "seconds": r["seconds"],
                              "cpu_seconds": r["cpu_seconds"], "min_seconds": r["min_seconds"],
                              "min_cpu_seconds": r["min_cpu_seconds"], "system": system, "round": rnd})
                        results.append((name, threads, system, rnd, r["seconds"], r["cpu_seconds"],
                                        r["min_seconds"], r["min_cpu_seconds"]))
                # the same work: the same losses on both Loom sides
                for name, py in got["loom-python"].items():
                    cpp = got["loom-cpp"][name]
                    for key in ("loss", "accuracy", "first_loss", "last_loss"):
                        if key in py and not same(py[key], cpp.get(key)):
                            mismatches.append(f"{name} threads {threads} round {rnd}: {key} Python {py[key]} "
                                              f"C++ {cpp.get(key)}")
            for side in sides.values():
                side.close()

    recs = summary(results, counts, only, tv is not None)
    if os.environ.get("LOOM_BENCH_RESULTS"):
        write_records(os.environ["LOOM_BENCH_RESULTS"], recs, args, tv)
    print(f"# load average after: {load_average()}", file=sys.stderr)
    if mismatches:
        print("# the two Loom sides did not compute the same losses:", *mismatches, sep="\n#   ", file=sys.stderr)
        return 1
    print("# both Loom sides computed the same losses in every round", file=sys.stderr)
    return 0


def summary(results, counts, only, have_torch):
    def per_round(name, threads, system, col):
        return {r[3]: r[col] for r in results if r[0] == name and r[1] == threads and r[2] == system}

    lines, recs = [], []
    for threads in counts:
        for name in only:
            rec = {"summary": name, "threads": threads}
            for col, key in ((4, "wall"), (5, "cpu")):
                py = per_round(name, threads, "loom-python", col)
                cpp = per_round(name, threads, "loom-cpp", col)
                rounds = sorted(set(py) & set(cpp))
                rec[f"python_seconds_{key}"] = statistics.median(py[r] for r in rounds)
                rec[f"cpp_seconds_{key}"] = statistics.median(cpp[r] for r in rounds)
                rec[f"python_over_cpp_{key}"] = round(statistics.median(py[r] / cpp[r] for r in rounds), 4)
                th = per_round(name, threads, "torch-python", col)
                rt = [r for r in rounds if r in th]
                if have_torch and rt:
                    rec[f"torch_seconds_{key}"] = statistics.median(th[r] for r in rt)
                    rp = statistics.median(py[r] / th[r] for r in rt)
                    rc = statistics.median(cpp[r] / th[r] for r in rt)
                    rec[f"python_over_torch_{key}"] = round(rp, 4)
                    rec[f"cpp_over_torch_{key}"] = round(rc, 4)
                    rec[f"hold_{key}"] = round(rp / rc, 4)
            # the fastest step of each side over the whole run: on a loaded machine noise only adds time
            for col, key in ((6, "wall"), (7, "cpu")):
                py = min(per_round(name, threads, "loom-python", col).values())
                cpp = min(per_round(name, threads, "loom-cpp", col).values())
                rec[f"fastest_python_over_cpp_{key}"] = round(py / cpp, 4)
                th = per_round(name, threads, "torch-python", col)
                if have_torch and th:
                    rec[f"fastest_python_over_torch_{key}"] = round(py / min(th.values()), 4)
                    rec[f"fastest_cpp_over_torch_{key}"] = round(cpp / min(th.values()), 4)
            if name in GOALS:
                rec["goal_python_over_cpp"] = GOALS[name]
            if "hold_wall" in rec:
                rec["goal_hold"] = TORCH_GOAL
            emit(rec)
            recs.append(rec)
            text = (f"{name:18s} {threads} thr  Python/C++ {rec['python_over_cpp_wall']:.3f} wall "
                    f"{rec['python_over_cpp_cpu']:.3f} cpu")
            text += (f"; fastest {rec['fastest_python_over_cpp_wall']:.3f} wall "
                     f"{rec['fastest_python_over_cpp_cpu']:.3f} cpu")
            if name in GOALS:
                text += f" (goal <= {GOALS[name]})"
            if "hold_wall" in rec:
                text += (f" | /PyTorch wall: Python {rec['python_over_torch_wall']:.3f}, C++ "
                         f"{rec['cpp_over_torch_wall']:.3f}; cpu: {rec['python_over_torch_cpu']:.3f}, "
                         f"{rec['cpp_over_torch_cpu']:.3f}; hold {rec['hold_wall']:.3f} wall {rec['hold_cpu']:.3f} cpu"
                         f" (goal <= {TORCH_GOAL})")
            lines.append(text)
    print("# medians over rounds of per-round ratios (Loom from Python / Loom from C++; PyTorch eager from Python):",
          *lines, sep="\n# ", file=sys.stderr)
    return recs


ROW_LABELS = {
    "fit_mlp": "`Model.fit` on NumPy arrays, MLP 784-512-512-10, one epoch of 2048 rows",
    "step_mlp_autograd": "a step written with ops and autograd (SGD by hand), MLP 784-512-512-10",
    "train_mlp": "`TrainStep` loop, MLP 784-512-512-10, batch 128",
    "train_cnn": "`TrainStep` loop, Fashion-MNIST CNN, batch 128",
    "train_ptb_lstm": "`TrainStep` loop, PTB LSTM, 20 × 20 tokens",
}


def write_records(path, recs, args, torch_version_text):
    """docs/benchmarks.md's "Loom from Python" table (bench/results_table.py, table "python"): per
    row and thread count, the medians over rounds of one step's (fit: one fit's) process CPU time,
    the median of the per-round Python / C++ ratios, and the hold against PyTorch."""
    out = []
    for rec in recs:
        name, threads = rec["summary"], rec["threads"]
        label = ROW_LABELS[name].replace("2048 rows", f"{args.samples} rows")
        r = bench_results.base_record("python", "python_" + name, label, threads)
        r["units"] = "ms"
        r["context"] = (f"(CPU time; medians of {args.rounds} alternating rounds of {args.steps} steps; "
                        f"load average {args.load_before} before, {load_average().split()[0]} after)")
        digits = 1 if rec["cpp_seconds_cpu"] >= 0.05 else 2
        r["loom"] = bench_results.number(rec["python_seconds_cpu"] * 1e3, digits)
        peers = [{"name": "Loom from C++", "value": bench_results.number(rec["cpp_seconds_cpu"] * 1e3, digits),
                  "ratio": bench_results.number(rec["python_over_cpp_cpu"], 3)}]
        goal = []
        if name in GOALS:
            peers[0].update(goal=GOALS[name], goal_op="<=")
            goal.append(f"Python / C++ ≤ {GOALS[name]}")
        if "hold_cpu" in rec:
            peers.append({"name": f"PyTorch {torch_version_text}",
                          "value": bench_results.number(rec["torch_seconds_cpu"] * 1e3, digits),
                          "ratio": bench_results.number(rec["hold_cpu"], 3), "goal": TORCH_GOAL, "goal_op": "<="})
            goal.append(f"hold ≤ {TORCH_GOAL}")
        r["peers"] = peers
        r["goal_text"] = "; ".join(goal) or "—"
        out.append(r)
    bench_results.append(path, out)


if __name__ == "__main__":
    sys.exit(main())
