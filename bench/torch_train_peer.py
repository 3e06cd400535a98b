#!/usr/bin/env python3
"""PyTorch (CPU) peer of bench/train_bench.cpp: training throughput of the same models.

Prints one JSON object per line, the same names as train_bench:

    {"name": "train_mlp", "threads": 1, "seconds": 0.0031, "cpu_seconds": 0.0031}

`seconds` is the median wall time of one training step (zero_grad, forward, loss, backward,
[clip_grad_norm_,] optimizer.step, loss.item()) after 3 warm-up steps, on the same synthetic
in-memory batch at every step; `cpu_seconds` the median process CPU time of one step (every
thread's; on a loaded machine the steadier figure at 1 thread). Models, shapes, losses and optimizers match train_bench.cpp
(see its header). With --compile (on by default) each model is also run through
torch.compile (forward + loss + backward; the optimizer step stays eager) and reported as
"<name>_compiled" (compile time, with the warm-up, is excluded but printed to stderr); a
compile failure is reported on stderr and that record left out.

Thread settings are the best ones found for this machine by bench/torch_peer.py
(docs/benchmarks.md): OMP_NUM_THREADS = MKL_NUM_THREADS = N, OPENBLAS_NUM_THREADS = 1,
libgomp's default wait policy. The environment is set and the script re-execs itself before
`import torch`; a comma-separated --threads list runs each count in a fresh process.

With --memory, memory is measured instead of time (eager only), each model in a fresh process,
on the step after the same 3 warm-up steps; one line per model, like train_bench --memory 1:

    {"name": "train_cnn", "threads": 1, "peak_bytes": ..., "state_bytes": ..., "rss_growth_bytes": ...}

peak_bytes is the highest count of live bytes in PyTorch's CPU allocator during the step and
state_bytes the count when it starts (parameters, gradients, Adam state, the batch). PyTorch
keeps no CPU peak counter, so the count is read from the profiler's memory events
(torch.profiler.profile(profile_memory=True): every allocation and free of the CPU allocator,
with the running "Total Allocated"), on a second copy of the model built after the profiler
started so that every live block is counted. rss_growth_bytes is measured without the profiler:
the process's peak RSS during the step (VmHWM, reset by writing 5 to /proc/self/clear_refs just
before it) minus its RSS once the model and batch exist, before the first step.

Usage:
    python3 bench/torch_train_peer.py [--threads 1,2] [--only train_mlp,...] [--steps 15]
                                      [--no-compile] [--adam default|foreach|fused] [--memory]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_peer import thread_env  # noqa: E402  (no torch import at module level)

NAMES = ["train_mlp", "train_cnn", "train_ptb_lstm", "train_word2vec", "train_gpt", "train_gpt_T1024"]
# train_gpt's sizes (train_bench.cpp's header): (T, batch) per name
GPT_SHAPES = {"train_gpt": (256, 8), "train_gpt_T1024": (1024, 2)}
MARKER = "LOOM_TORCH_TRAIN_PEER_ENV"


def build(name, torch, adam_impl):
    """(model, params, loss_fn(model) -> loss, optimizer, clip) for one benchmark."""
    nn = torch.nn
    F = torch.nn.functional
    g = torch.Generator().manual_seed(1)
    adam_kw = {} if adam_impl == "default" else {adam_impl: True}
    if name == "train_mlp":
        model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                              nn.Linear(512, 10))
        x, y = torch.randn(128, 784, generator=g), torch.randint(0, 10, (128,), generator=g)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3, **adam_kw)
        return model, lambda m: F.cross_entropy(m(x), y), opt, None
    if name == "train_cnn":
        model = nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Dropout(0.25), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Dropout(0.25),
            nn.Linear(128, 10))
        x, y = torch.randn(128, 1, 28, 28, generator=g), torch.randint(0, 10, (128,), generator=g)
        opt = torch.optim.Adam(model.parameters(), lr=2e-3, **adam_kw)
        return model, lambda m: F.cross_entropy(m(x), y), opt, None
    if name == "train_ptb_lstm":
        V, E, H, T, B = 10000, 200, 200, 20, 20

        class LM(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = nn.Embedding(V, E)
                self.lstm = nn.LSTM(E, H, num_layers=2, batch_first=True)
                self.fc = nn.Linear(H, V)

            def forward(self, ids):
                out, _ = self.lstm(self.embed(ids))  # zero initial state per batch
                return self.fc(out)

        model = LM()
        ids = torch.randint(0, V, (B, T), generator=g)
        target = torch.randint(0, V, (B * T,), generator=g)
        opt = torch.optim.SGD(model.parameters(), lr=1.0)
        return model, lambda m: F.cross_entropy(m(ids).reshape(B * T, V), target), opt, 5.0
    if name == "train_word2vec":
        V, D, B, K = 50000, 128, 128, 64

        class SGNS(nn.Module):
            def __init__(self):
                super().__init__()
                self.w_in = nn.Parameter(torch.randn(V, D, generator=g) * 0.1)
                self.w_out = nn.Parameter(torch.randn(V, D, generator=g) * 0.1)

            def forward(self, center, context, negatives):
                v = F.embedding(center, self.w_in)                     # (B, D)
                u = F.embedding(context, self.w_out)                   # (B, D)
                n = F.embedding(negatives, self.w_out)                 # (B, K, D)
                pos = (u * v).sum(1)                                   # (B,)
                neg = torch.bmm(n, v.unsqueeze(2)).squeeze(2)          # (B, K)
                return (F.softplus(-pos) + F.softplus(neg).sum(1)).mean()

        model = SGNS()
        center = torch.randint(0, V, (B,), generator=g)
        context = torch.randint(0, V, (B,), generator=g)
        negatives = torch.randint(0, V, (B, K), generator=g)
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        return model, lambda m: m(center, context, negatives), opt, None
    if name in GPT_SHAPES:
        T, B = GPT_SHAPES[name]
        V, D, H, L = 256, 384, 6, 4

        class GPT(nn.Module):
            """GPT-2's form: token + learned position embeddings, pre-norm blocks
            (nn.TransformerEncoderLayer with norm_first and a causal mask given as is_causal, which
            reaches F.scaled_dot_product_attention's fused CPU kernel), final LayerNorm, linear head."""

            def __init__(self):
                super().__init__()
                self.wte = nn.Embedding(V, D)
                self.wpe = nn.Embedding(T, D)
                nn.init.normal_(self.wte.weight, 0, 0.02)
                nn.init.normal_(self.wpe.weight, 0, 0.02)
                self.h = nn.ModuleList(nn.TransformerEncoderLayer(
                    D, H, 4 * D, dropout=0.0, activation=lambda x: F.gelu(x, approximate="tanh"),
                    batch_first=True, norm_first=True) for _ in range(L))
                self.ln_f = nn.LayerNorm(D)
                self.lm_head = nn.Linear(D, V)
                self.register_buffer("pos", torch.arange(T), persistent=False)
                self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(T), persistent=False)

            def forward(self, ids):
                x = self.wte(ids) + self.wpe(self.pos)
                for block in self.h:
                    x = block(x, src_mask=self.mask, is_causal=True)
                return self.lm_head(self.ln_f(x))

        model = GPT()
        ids = torch.randint(0, V, (B, T), generator=g)
        target = torch.randint(0, V, (B * T,), generator=g)
        adamw_kw = {} if adam_impl == "default" else {adam_impl: True}
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, **adamw_kw)
        return model, lambda m: F.cross_entropy(m(ids).reshape(B * T, V), target), opt, None
    raise ValueError(name)


def make_step(torch, model, loss_fn, opt, clip):
    """One training step (the timed and the measured one): zero_grad, loss, backward, [clip,] update."""
    params = list(model.parameters())

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model)
        loss.backward()
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(params, clip)
        opt.step()
        return loss.item()
    return step


def time_steps(step, steps):
    """(median wall seconds, median process CPU seconds, first loss, last loss) of the timed steps."""
    for _ in range(3):
        step()
    times, cpu, losses = [], [], []
    for _ in range(steps):
        t, c = time.perf_counter(), time.process_time()
        losses.append(step())
        cpu.append(time.process_time() - c)
        times.append(time.perf_counter() - t)
    return statistics.median(times), statistics.median(cpu), losses[0], losses[-1]


def proc_status_bytes(field):
    """A field of /proc/self/status in bytes ("VmRSS", "VmHWM"); -1 when unavailable."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return -1


def reset_peak_rss():
    """Resets VmHWM to the current RSS (Linux: writing 5 to clear_refs)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def memory_one(name, threads, adam_impl):
    """Prints the memory record of one model (see the module docstring)."""
    import gc
    import tempfile

    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    torch.set_num_threads(threads)

    # process RSS, without the profiler
    torch.manual_seed(0)
    model, loss_fn, opt, clip = build(name, torch, adam_impl)
    model.train()
    step = make_step(torch, model, loss_fn, opt, clip)
    rss0 = proc_status_bytes("VmRSS")
    for _ in range(3):
        step()
    rss_ok = rss0 >= 0 and reset_peak_rss()
    step()
    hwm = proc_status_bytes("VmHWM")
    rss_growth = hwm - rss0 if rss_ok and hwm >= 0 else -1
    del model, loss_fn, opt, step
    gc.collect()

    # live tensor bytes, from the profiler's allocator events
    torch.manual_seed(0)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        model, loss_fn, opt, clip = build(name, torch, adam_impl)
        model.train()
        step = make_step(torch, model, loss_fn, opt, clip)
        for _ in range(3):
            step()
        with record_function("loom_measured_step"):
            step()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f)["traceEvents"]
    span = next(e for e in events if e.get("name") == "loom_measured_step" and e.get("ph") == "X")
    t0, t1 = span["ts"], span["ts"] + span["dur"]
    mem = sorted((e for e in events if e.get("name") == "[memory]"), key=lambda e: e["ts"])
    before = [e["args"]["Total Allocated"] for e in mem if e["ts"] < t0]
    during = [e["args"]["Total Allocated"] for e in mem if t0 <= e["ts"] <= t1]
    state = before[-1] if before else 0
    peak = max([state, *during])
    print(json.dumps({"name": name, "threads": threads, "peak_bytes": peak, "state_bytes": state,
                      "rss_growth_bytes": rss_growth}), flush=True)


def run_memory(threads, only, adam_impl, child):
    for name in NAMES:
        if only and name not in only:
            continue
        if child:
            memory_one(name, threads, adam_impl)
        else:  # a fresh process per model: no model's cached memory counts in another's RSS
            subprocess.run([sys.executable, os.path.abspath(__file__), "--threads", str(threads), "--only", name,
                            "--adam", adam_impl, "--memory", "--memory-child"], check=True)


def run(threads, only, steps, compile_too, adam_impl):
    import torch

    torch.set_num_threads(threads)
    for name in NAMES:
        if only and name not in only:
            continue
        variants = [("eager", False)] + ([("compiled", True)] if compile_too else [])
        for how, use_compile in variants:
            torch.manual_seed(0)
            model, loss_fn, opt, clip = build(name, torch, adam_impl)
            model.train()
            fwd = loss_fn
            if use_compile:
                fwd = torch.compile(loss_fn)
            step = make_step(torch, model, fwd, opt, clip)

            label = name + ("_compiled" if use_compile else "")
            t0 = time.perf_counter()
            try:
                step()  # compiles when use_compile
            except Exception as e:  # noqa: BLE001 - report and go on
                msg = str(e).strip().splitlines()[0][:300] if str(e).strip() else type(e).__name__
                print(f"# {label} threads {threads}: torch.compile failed: {type(e).__name__}: {msg}",
                      file=sys.stderr, flush=True)
                continue
            first = time.perf_counter() - t0
            med, cpu, l0, l1 = time_steps(step, steps)
            print(json.dumps({"name": label, "threads": threads, "seconds": med, "cpu_seconds": cpu}), flush=True)
            print(f"# {label} threads {threads}: first step {first:.2f} s, loss {l0:.4f} -> {l1:.4f} "
                  f"over {steps} timed steps", file=sys.stderr, flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", default="1", help="thread count, or a comma-separated list")
    ap.add_argument("--only", default="", help="comma-separated benchmark names")
    ap.add_argument("--steps", type=int, default=15)
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile variants")
    ap.add_argument("--adam", choices=["default", "foreach", "fused"], default="fused",
                    help="torch.optim.Adam / AdamW implementation (fused: one kernel over each tensor, "
                         "the fastest on CPU here)")
    ap.add_argument("--memory", action="store_true",
                    help="print peak memory of one training step instead of times (see above)")
    ap.add_argument("--memory-child", action="store_true", help=argparse.SUPPRESS)
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
        env = thread_env(threads, "default")
        env[MARKER] = str(threads)
        os.execve(sys.executable, [sys.executable, os.path.abspath(__file__), *sys.argv[1:]], env)
    if args.memory:
        run_memory(threads, only, args.adam, args.memory_child)
    else:
        run(threads, only, args.steps, not args.no_compile, args.adam)


if __name__ == "__main__":
    main()
