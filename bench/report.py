#!/usr/bin/env python3
"""Markdown report of the benchmark suite's JSON lines (bench/run.sh writes them).

    python3 bench/report.py --loom loom.jsonl --torch torch.jsonl [--libtorch libtorch.jsonl]
                            [--keras keras.jsonl]

Input lines: {"name": ..., "threads": N, "seconds": median}. loom.jsonl comes from
bench/loom_bench (the workloads, openblas_sgemm_*, onednn_sgemm_* and cpu_ghz_measured),
torch.jsonl from bench/torch_peer.py (same workload names) and libtorch.jsonl from the LibTorch
peer (libtorch_* names); the training benchmarks (train_* names) come from bench/train_bench,
bench/torch_train_peer.py (eager, and "<name>_compiled" for torch.compile) and
bench/keras_train_peer.py (keras.jsonl). Other lines are ignored. When a (name, threads) pair appears more than
once (REPEAT > 1 in run.sh), the smallest median is kept: on a shared machine noise only ever
adds time.

Ratios are PyTorch time / Loom time: above 1 means Loom is faster.

With LOOM_BENCH_RESULTS=FILE (bench/run.sh passes it on) it also appends the figures of
docs/benchmarks.md's "Current results" ops table (the elementwise ops and reductions, per-op
overhead, sgemm, conv2d, layer-graph overhead) to FILE as result records, one per (row,
threads) (bench/bench_results.py; bench/results_table.py renders them). The printed report stays
the same.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_results  # noqa: E402

WORKLOADS = [
    "sgemm_256", "sgemm_1024", "sgemm_2048", "sgemm_128x784x512",
    "add_1e6", "fused_relu_mul_add_1e6", "sum_axis1_1024", "sum_axis0_1024",
    "softmax_128x1000", "overhead_add_1elem",
]
GEMM = {"sgemm_256": (256, 256, 256), "sgemm_1024": (1024, 1024, 1024),
        "sgemm_2048": (2048, 2048, 2048), "sgemm_128x784x512": (128, 784, 512)}
# Targets (docs/benchmarks-history.md, "Targets"): at least as fast as PyTorch.
TRAIN = ["train_mlp", "train_cnn", "train_ptb_lstm", "train_word2vec"]
AT_LEAST_TORCH = ["add_1e6", "fused_relu_mul_add_1e6", "sum_axis1_1024", "sum_axis0_1024",
                  "softmax_128x1000"]
FLOPS_PER_CYCLE = 2 * 16 * 2  # 2 FMA pipes x 16 fp32 lanes (AVX-512) x 2 flops per FMA


def load(path):
    best: dict[tuple[str, int], float] = {}
    ghz = None
    if not path:
        return best, ghz
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            name, threads = rec.get("name"), rec.get("threads")
            if name == "cpu_ghz_measured":
                ghz = max(ghz or 0.0, float(rec["ghz"]))
                continue
            secs = rec.get("seconds")
            if name is None or threads is None or secs is None:
                continue
            key = (name, int(threads))
            best[key] = min(best.get(key, float("inf")), float(secs))
    return best, ghz


def cpuinfo_ghz():
    try:
        with open("/proc/cpuinfo") as f:
            m = re.search(r"cpu MHz\s*:\s*([\d.]+)", f.read())
        return float(m.group(1)) / 1000 if m else None
    except OSError:
        return None


def fmt_time(s):
    if s is None:
        return "-"
    if s < 1e-6:
        return f"{s * 1e9:.0f} ns"
    if s < 1e-3:
        return f"{s * 1e6:.1f} µs"
    return f"{s * 1e3:.2f} ms"


def ratio(num, den):
    return f"{num / den:.2f}" if num and den else "-"


# docs/benchmarks.md's ops rows fed by this report: bench name -> row label (as in bench/results/)
OPS_ROWS = {"eager_relu_mul_add_1e6": "relu(a*b+c), three eager ops", "add_1e6": "add, 1e6 floats",
            "sum_axis1_1024": "sum over axis 1, 1024×1024", "sum_axis0_1024": "sum over axis 0, 1024×1024",
            "softmax_128x1000": "softmax 128×1000"}
CONV_ROWS = {"conv2d_fwd_n32_c64_56x56_k3": "conv2d forward, 32×64×56×56, 3×3",
             "conv2d_fwdbwd_n32_c64_56x56_k3": "conv2d forward + backward, 32×64×56×56, 3×3"}


def time_units(s):
    """(scale, units, digits) as fmt_time prints s."""
    return (1e9, "ns", 0) if s < 1e-6 else (1e6, "µs", 1) if s < 1e-3 else (1e3, "ms", 2)


def result_records(loom, torch, libtorch, threads):
    """Result records of the ops table's rows that this run measured."""
    out, n = [], bench_results.number

    def over_shapes(peer_time):
        """peer / Loom time of each GEMM shape and thread count measured, for the notes."""
        return [peer_time(g, t) / loom[(g, t)] for g in GEMM for t in threads if loom.get((g, t)) and peer_time(g, t)]

    direct_shapes = over_shapes(lambda g, t: min([s for s in (loom.get(("openblas_" + g, t)),
                                                               loom.get(("onednn_" + g, t))) if s], default=None))
    torch_shapes = over_shapes(lambda g, t: torch.get((g, t)))
    command = os.environ.get("LOOM_BENCH_COMMAND", "bench/run.sh")

    def base(bench, row, t, **kw):
        r = bench_results.base_record("ops", bench, row, t, command=command)
        r.update(kw)
        out.append(r)

    def timed(bench, row, t, lo, peers, **kw):
        scale, units, d = time_units(lo)
        base(bench, row, t, units=units, loom=n(lo * scale, d),
             peers=[{"name": name, "value": n(s * scale, d), **extra} for name, s, extra in peers if s], **kw)

    for t in threads:
        for name, row in OPS_ROWS.items():
            lo = loom.get((name, t))
            py = torch.get(("fused_relu_mul_add_1e6" if name.startswith("eager_") else name, t))
            if lo and py:
                timed(name, row, t, lo, [("PyTorch", py, {"ratio": n(py / lo, 2), "goal": 1})], goal_text="1.0")
        lo = loom.get(("overhead_add_1elem", t))
        alloc, out_form = libtorch.get(("libtorch_overhead_add_1elem_alloc", t)), libtorch.get(("libtorch_overhead_add_1elem", t))
        if lo and (alloc or out_form):
            peers = []
            if alloc:
                peers.append(("LibTorch at::add", alloc, {"label": "`at::add`", "ratio": n(lo / alloc, 2),
                                                          "goal": n(0.33, 2), "goal_op": "<="}))
            if out_form:
                peers.append(("LibTorch at::add_out", out_form, {"label": "`at::add_out`", "ratio": n(lo / out_form, 2),
                                                                  "ratio_note": "(Loom / LibTorch)"}))
            timed("overhead_add_1elem", "per-op overhead, 1-element `add`", t, lo, peers, ratio_unit="×",
                  goal_text="≤ 0.33×")
        lo = loom.get(("sgemm_1024", t))
        if lo:
            flops = 2.0 * 1024 ** 3
            direct = [(k, loom.get((k.lower() + "_sgemm_1024", t))) for k in ("oneDNN", "OpenBLAS")]
            direct = [(k, s) for k, s in direct if s]
            if direct:
                k, s = min(direct, key=lambda x: x[1])
                base("sgemm_1024", "sgemm 1024 (GFLOP/s; peer: the faster of oneDNN and OpenBLAS called directly)", t,
                     units="GFLOP/s", loom=n(flops / lo / 1e9, 0),
                     peers=[{"name": f"{k} sgemm", "label": k, "value": n(flops / s / 1e9, 0), "ratio": n(s / lo, 2),
                             "goal": n(0.95, 2),
                             "ratio_note": f"({min(direct_shapes):.2f}–{max(direct_shapes):.2f} over the shapes and threads)"}],
                     goal_text="within 5 %")
            py = torch.get(("sgemm_1024", t))
            if py:
                base("sgemm_1024_vs_torch_mm", "sgemm against `torch.mm` (MKL)", t, units="GFLOP/s",
                     loom=n(flops / lo / 1e9, 0),
                     peers=[{"name": "torch.mm", "value": n(flops / py / 1e9, 0), "ratio": n(py / lo, 2),
                             "ratio_note": f"(time ratio; {min(torch_shapes):.1f}–{max(torch_shapes):.1f} over the shapes and threads)"}],
                     goal_text="—")
        for name, row in CONV_ROWS.items():
            lo, py = loom.get((name, t)), torch.get((name, t))
            if lo and py:
                timed(name, row, t, lo, [("PyTorch", py, {"ratio": n(py / lo, 2)})], goal_text="—")
        g, o = loom.get(("mlp_graph_fwd_bwd", t)), loom.get(("mlp_ops_fwd_bwd", t))
        if g and o:
            timed("mlp_graph_fwd_bwd", "layer graph vs hand-written ops, MLP step", t, g,
                  [("hand-written ops", o, {"ratio": n(g / o, 3), "goal": n(1.02, 2), "goal_op": "<=",
                                            "ratio_note": "(graph / ops)"})], goal_text="within 2 %")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--loom", required=True)
    ap.add_argument("--torch", required=True)
    ap.add_argument("--libtorch")
    ap.add_argument("--keras")
    args = ap.parse_args()
    loom, measured = load(args.loom)
    torch, _ = load(args.torch)
    libtorch, _ = load(args.libtorch)
    keras, _ = load(args.keras)
    threads = sorted({t for (_, t) in loom})
    nominal = cpuinfo_ghz()
    if measured:
        ghz, source = measured, "measured by loom_bench (a chain of dependent integer adds)"
    else:
        ghz, source = nominal, "/proc/cpuinfo 'cpu MHz'"

    p = print
    p("### Loom vs PyTorch\n")
    p("Median time per call (best of the runs). Ratio = PyTorch time / Loom time: > 1 means Loom "
      "is faster.\n")
    p("| workload | threads | Loom | PyTorch (Python) | ratio | LibTorch (C++) | ratio vs LibTorch |")
    p("|---|---:|---:|---:|---:|---:|---:|")
    for name in WORKLOADS:
        for t in threads:
            lo = loom.get((name, t))
            if lo is None:
                continue
            py = torch.get((name, t))
            lt = libtorch.get(("libtorch_" + name, t))
            p(f"| {name} | {t} | {fmt_time(lo)} | {fmt_time(py)} | {ratio(py, lo)} | "
              f"{fmt_time(lt)} | {ratio(lt, lo)} |")

    conv = sorted({n for (n, _) in loom if n.startswith("conv2d_")})
    if conv:
        p("\n### Convolution (float32, oneDNN)\n")
        p("| workload | threads | Loom | PyTorch | ratio |")
        p("|---|---:|---:|---:|---:|")
        for name in conv:
            for t in threads:
                lo, py = loom.get((name, t)), torch.get((name, t))
                if lo:
                    p(f"| {name} | {t} | {fmt_time(lo)} | {fmt_time(py)} | {ratio(py, lo)} |")
    if any(n == "mlp_graph_fwd_bwd" for (n, _) in loom):
        p("\n### Layer-graph overhead (MLP 784-512-512-10, batch 128, forward + backward)\n")
        p("| threads | layer graph | hand-written ops | graph / ops |")
        p("|---:|---:|---:|---:|")
        for t in threads:
            g, o = loom.get(("mlp_graph_fwd_bwd", t)), loom.get(("mlp_ops_fwd_bwd", t))
            if g and o:
                p(f"| {t} | {fmt_time(g)} | {fmt_time(o)} | {g / o:.3f} |")

    if any(n in TRAIN for (n, _) in loom):
        p("\n### Training throughput\n")
        p("Median time per training step (forward, loss, backward, optimizer step) on one "
          "synthetic batch. Ratio = peer time / Loom time: > 1 means Loom is faster. "
          "PyTorch compiled: torch.compile of forward + loss + backward (eager optimizer).\n")
        p("| model | threads | Loom | PyTorch eager | ratio | PyTorch compiled | ratio | "
          "Keras (JAX) | ratio |")
        p("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for name in TRAIN:
            for t in threads:
                lo = loom.get((name, t))
                if lo is None:
                    continue
                py, pc, ke = torch.get((name, t)), torch.get((name + "_compiled", t)), keras.get((name, t))
                p(f"| {name.removeprefix('train_')} | {t} | {fmt_time(lo)} | {fmt_time(py)} | "
                  f"{ratio(py, lo)} | {fmt_time(pc)} | {ratio(pc, lo)} | {fmt_time(ke)} | "
                  f"{ratio(ke, lo)} |")

    p(f"\n### GEMM\n")
    p(f"Peak: {ghz:.2f} GHz ({source}; /proc/cpuinfo says "
      f"{nominal:.2f} GHz) x {FLOPS_PER_CYCLE} flops/cycle (2 FMA x 16 fp32 lanes x 2) = "
      f"{ghz * FLOPS_PER_CYCLE:.0f} GFLOP/s per core.\n" if ghz and nominal else "Peak: unknown\n")
    p("| workload | threads | Loom GFLOP/s | % of peak | OpenBLAS GFLOP/s | oneDNN GFLOP/s | "
      "PyTorch GFLOP/s | Loom / faster direct call |")
    p("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, (m, k, n) in GEMM.items():
        for t in threads:
            lo = loom.get((name, t))
            if lo is None:
                continue
            flops = 2.0 * m * k * n
            ob = loom.get(("openblas_" + name, t))
            od = loom.get(("onednn_" + name, t))
            py = torch.get((name, t))
            gf = lambda s: f"{flops / s / 1e9:.0f}" if s else "-"
            peak = ghz * FLOPS_PER_CYCLE * t if ghz else None
            pct = f"{100 * flops / lo / 1e9 / peak:.0f}%" if peak else "-"
            fastest = min([s for s in (ob, od) if s], default=None)
            p(f"| {name} | {t} | {gf(lo)} | {pct} | {gf(ob)} | {gf(od)} | {gf(py)} | "
              f"{ratio(fastest, lo)} |")

    p("\n### Targets\n")
    p("| target | threads | value | met |")
    p("|---|---:|---|---|")
    for t in threads:
        for name in AT_LEAST_TORCH:
            lo, py = loom.get((name, t)), torch.get((name, t))
            if lo and py:
                p(f"| {name} at least as fast as PyTorch | {t} | ratio {py / lo:.2f} | "
                  f"{'yes' if py >= lo else 'no'} |")
        lo = loom.get(("overhead_add_1elem", t))
        lt = libtorch.get(("libtorch_overhead_add_1elem", t))
        if lo:
            met = "yes" if lo < 0.5e-6 and (not lt or lo <= lt / 3) else "no"
            vs = f", LibTorch {fmt_time(lt)} (/3 = {fmt_time(lt / 3)})" if lt else ""
            p(f"| 1-element add < 0.5 µs and <= LibTorch / 3 | {t} | {fmt_time(lo)}{vs} | {met} |")
        for name in GEMM:
            lo = loom.get((name, t))
            direct = [s for s in (loom.get(("openblas_" + name, t)), loom.get(("onednn_" + name, t))) if s]
            if lo and direct:
                r = min(direct) / lo
                p(f"| {name} within 5% of the faster direct call | {t} | {r:.2f} | "
                  f"{'yes' if r >= 0.95 else 'no'} |")

    if os.environ.get("LOOM_BENCH_RESULTS"):
        bench_results.append(os.environ["LOOM_BENCH_RESULTS"], result_records(loom, torch, libtorch, threads))


if __name__ == "__main__":
    main()
