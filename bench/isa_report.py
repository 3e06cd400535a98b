#!/usr/bin/env python3
"""Issue 11's targets table for each ISA level that bench/isa_levels.sh ran.

    python3 bench/isa_report.py OUT/native OUT/avx2 ...

Each folder holds loom.jsonl (train_bench, loom_bench), torch.jsonl (torch_train_peer.py,
torch_peer.py), loom_resnet.txt, torch_resnet.txt, ort_resnet.txt and run-info.txt. Every
(name, threads) pair may appear once per round; a cell prints the rounds' medians (min-max) and
the ratio divides the peer's fastest median by Loom's fastest: on a shared machine noise only
adds time. Ratio = peer time / Loom time (> 1: Loom faster).
"""
from __future__ import annotations

import json
import os
import re
import sys

TRAIN = [("train_mlp", "MLP 784-512-512-10 step, Adam"), ("train_cnn", "Fashion-MNIST CNN step"),
         ("train_ptb_lstm", "PTB-small LSTM step"), ("train_word2vec", "word2vec SGNS step")]
RESNET_LINE = re.compile(r"batch\s+(\d+)\s+threads\s+(\d+):\s+([\d.]+) ms wall")


def jsonl(path: str) -> dict[tuple[str, int], list[float]]:
    runs: dict[tuple[str, int], list[float]] = {}
    if not os.path.exists(path):
        return runs
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            rec = json.loads(line)
            if "seconds" in rec and rec.get("seconds"):
                runs.setdefault((rec["name"], int(rec["threads"])), []).append(float(rec["seconds"]))
    return runs


def resnet(path: str) -> dict[tuple[int, int], list[float]]:
    runs: dict[tuple[int, int], list[float]] = {}
    if not os.path.exists(path):
        return runs
    with open(path) as f:
        for line in f:
            if "ms wall" not in line or "max |logits" in line:
                continue
            m = RESNET_LINE.search(line)
            if m:
                runs.setdefault((int(m.group(1)), int(m.group(2))), []).append(float(m.group(3)))
    return runs


def span(values: list[float], scale: float, digits: int) -> str:
    lo, hi = min(values) * scale, max(values) * scale
    a, b = f"{lo:.{digits}f}", f"{hi:.{digits}f}"
    return a if a == b else f"{a}–{b}"


def digits_for(ms: float) -> int:
    return 3 if ms < 1 else 2 if ms < 10 else 1 if ms < 100 else 0


def row(label: str, threads: int, loom: list[float] | None, peer: list[float] | None, peer_name: str,
        goal: float, scale: float = 1e3) -> str:
    if not loom and not peer:
        return ""  # that part did not run
    if not loom or not peer:
        return f"| {label} | {threads} | {'—' if not loom else span(loom, scale, 2)} | — | — | {goal:g} | not run |"
    d = digits_for(min(loom) * scale)
    ratio = min(peer) / min(loom)
    status = "**met**" if ratio >= goal else "not met"
    return (f"| {label} | {threads} | {span(loom, scale, d)} ms | {span(peer, scale, d)} ms ({peer_name}) | "
            f"{ratio:.2f} | {goal:g} | {status} |")


def level_table(folder: str) -> str:
    info = open(os.path.join(folder, "run-info.txt")).read().strip() if os.path.exists(
        os.path.join(folder, "run-info.txt")) else ""
    loom, torch = jsonl(os.path.join(folder, "loom.jsonl")), jsonl(os.path.join(folder, "torch.jsonl"))
    lr, tr, orr = (resnet(os.path.join(folder, f)) for f in ("loom_resnet.txt", "torch_resnet.txt", "ort_resnet.txt"))
    out = [f"### {os.path.basename(folder.rstrip('/'))}", "", "```text", info, "```", "",
           "| target | threads | Loom | peer | ratio | goal | status |", "|---|---:|---:|---:|---:|---:|---|"]
    for name, label in TRAIN:
        for t in (1, 2):
            eager, comp = torch.get((name, t)), torch.get((name + "_compiled", t))
            best, which = eager, "eager"
            if comp and (not eager or min(comp) < min(eager)):
                best, which = comp, "torch.compile"
            out.append(row(label, t, loom.get((name, t)), best, which, 1.5))
    for t in (1, 2):
        out.append(row("relu(a*b+c), 1e6 floats: compiled plan vs addcmul(out=)+relu_", t,
                       loom.get(("fused_relu_mul_add_1e6", t)), torch.get(("fused_relu_mul_add_1e6", t)), "PyTorch",
                       1.0))
    for b in (1, 32):
        for t in (1, 2):
            out.append(row(f"ResNet-18 inference, batch {b}, vs PyTorch eager", t, lr.get((b, t)), tr.get((b, t)),
                           "eager", 1.5, scale=1.0))
    ort_path = os.path.join(folder, "ort_resnet.txt")
    masked = os.path.exists(ort_path) and "cpuid avx2" in open(ort_path).read()
    mlas = "MLAS shown a CPUID without AVX-512" if masked else "MLAS native"
    for b in (1, 32):
        for t in (1, 2):
            out.append(row(f"ResNet-18 inference, batch {b}, vs ONNX Runtime ({mlas})", t,
                           lr.get((b, t)), orr.get((b, t)), "ORT", 1.0, scale=1.0))
    return "\n".join(line for line in out if line != "")


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    print("\n\n".join(level_table(f) for f in sys.argv[1:]))


if __name__ == "__main__":
    main()
