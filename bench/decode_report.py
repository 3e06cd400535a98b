#!/usr/bin/env python3
"""Result records of text generation (docs/benchmarks.md's "Decode" and "Prefill" tables) from
the JSON lines of build/bench/decode_bench (Loom) and bench/decode_peers.sh (llama.cpp and
transformers).

    build/bench/decode_bench --threads 1 > loom.jsonl; build/bench/decode_bench --threads 2 >> loom.jsonl
    bench/decode_peers.sh > peers.jsonl
    LOOM_BENCH_RESULTS=bench/results/$(date +%F)-zen3.jsonl python3 bench/decode_report.py loom.jsonl peers.jsonl

Either file may hold several sittings (runs appended): each figure is then its side's best of
them (the most tokens/s or GB/s, the fewest seconds), the triad's too, and the bound is the best
triad's. Each of Loom's figures (decode_gpt2_124m, decode_gpt2_124m_int8, prefill_gpt2_124m_512
at each thread count) becomes a record whose peers are the bound (bandwidth / bytes a token reads, with
Loom's share of it in %), llama.cpp (F32 against float32, Q8_0 against int8) and transformers
(float32), each with its ratio: for decode Loom's tokens/s over the peer's, for prefill the
peer's seconds over Loom's (> 1: Loom is faster), and the issue's goals (80 % of the bound,
>= 1.0 against llama.cpp, >= 3 (decode) and >= 1.5 (prefill) against transformers).

The server under concurrent clients: given text_serve_bench's lines (Loom) and
llama_serve_peer.py's (`PEERS=llama-server bench/decode_peers.sh`, "system": "llama.cpp server
F32"), each client count at each thread count becomes three records of the text_serve table:
tokens/s in all (wall time), the mean time to first token and tokens/s of CPU time, each with
llama.cpp's server and the ratio (Loom's tokens/s over the peer's; the peer's seconds over
Loom's: > 1, Loom is faster). Where a side ran more than once (runs alternating, on a loaded
machine), its run with the most tokens/s in all is taken, all three figures from it. No goal: the
issue asks for these to be recorded.

    build/bench/text_serve_bench --threads 2 > serve.jsonl
    THREADS=2 PEERS=llama-server bench/decode_peers.sh > serve_peers.jsonl
    LOOM_BENCH_RESULTS=bench/results/$(date +%F)-zen3.jsonl python3 bench/decode_report.py \
        serve.jsonl serve_peers.jsonl --peers-command "THREADS=2 PEERS=llama-server bench/decode_peers.sh"

--loom-load and --peers-load describe the load of each run when they were not measured together
(the table shows them); --date, --loom-command the same for the Loom run. --peers-cpu takes the
peers' figures in their process's CPU time (cpu_tokens_per_s, cpu_seconds: what a loaded machine
leaves comparable) rather than wall time. Standard library only.
"""
from __future__ import annotations

import argparse
import decimal
import json
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_results  # noqa: E402


def read_lines(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip().startswith("{")]


def find(lines: list[dict], name: str, threads: int, system: str | None = None) -> dict | None:
    """The best of the matching lines (sittings appended to one file): the most tokens/s or GB/s,
    else the fewest seconds."""
    matches = [x for x in lines if x.get("name") == name and x.get("threads") == threads and x.get("system") == system]
    if not matches:
        return None
    for key in ("tokens_per_s", "gb_per_s"):
        if all(key in x for x in matches):
            return max(matches, key=lambda x: x[key])
    return min(matches, key=lambda x: x.get("seconds", float("inf")))


def ratio(a: float, b: float) -> decimal.Decimal:
    return bench_results.number(a / b, 2)


def records(loom: list[dict], peers: list[dict], args) -> list[dict]:
    out = []
    rate, secs = ("cpu_tokens_per_s", "cpu_seconds") if args.peers_cpu else ("tokens_per_s", "seconds")
    threads = sorted({x["threads"] for x in loom if "threads" in x})
    triad = " / ".join(f"{find(loom, 'triad', t)['gb_per_s']:.2f}" for t in threads if find(loom, "triad", t))
    peers_text = f"peers {args.peers_load}" + (", in their CPU time" if args.peers_cpu else "")
    context = f"(triad {triad} GB/s; Loom {args.loom_load}, {peers_text})" if args.peers_load else f"(triad {triad} GB/s)"
    for t in threads:
        def base(table, bench, row):
            rec = bench_results.base_record(table, bench, row, t, date=args.date, command=args.loom_command)
            if args.loom_load:
                rec["load"] = args.loom_load
            rec["context"] = context
            return rec

        tf = find(peers, "decode_gpt2_124m", t, "transformers")
        for bench, llama, row in (("decode_gpt2_124m", "llama.cpp F32", "GPT-2 124M, float32 (tokens/s)"),
                                  ("decode_gpt2_124m_int8", "llama.cpp Q8_0", "GPT-2 124M, int8 (llama.cpp: Q8_0)")):
            x = find(loom, bench, t)
            if not x:
                continue
            v = x["tokens_per_s"]
            rec = base("decode", bench, row)
            rec["units"] = "tokens/s"
            rec["loom"] = bench_results.number(v, 2)
            # the bound of the best triad (the table's context), not of the run's own
            tri = find(loom, "triad", t)
            bound = tri["gb_per_s"] * 1e9 / x["weight_bytes"] if tri else x["bound_tokens_per_s"]
            ps = [{"name": "bound", "value": bench_results.number(bound, 2),
                   "ratio": bench_results.number(100 * v / bound, 1), "ratio_unit": " %", "goal": 80}]
            lp = find(peers, "decode_gpt2_124m", t, llama)
            ps.append({"name": llama, "value": bench_results.number(lp[rate], 2),
                       "ratio": ratio(v, lp[rate]), "goal": 1} if lp else {"name": llama, "value": "—"})
            ps.append({"name": "transformers", "value": bench_results.number(tf[rate], 2),
                       "ratio": ratio(v, tf[rate]), "goal": 3,
                       **({"suffix": " (float32)"} if bench.endswith("int8") else {})} if tf else {"name": "transformers", "value": "—"})
            rec["peers"] = ps
            out.append(rec)
        x = find(loom, "prefill_gpt2_124m_512", t)
        if x:
            rec = base("prefill", "prefill_gpt2_124m_512", "GPT-2 124M, float32, 512 tokens (s)")
            rec["units"] = "s"
            rec["loom"] = bench_results.number(x["seconds"], 3)
            ps = []
            for system, goal in (("llama.cpp F32", 1), ("transformers", 1.5)):
                p = find(peers, "prefill_gpt2_124m_512", t, system)
                if not p:
                    ps.append({"name": system, "value": "—"})
                    continue
                # a run that did not write its CPU time is shown in wall time, and says so
                key = secs if secs in p else "seconds"
                ps.append({"name": system, "value": bench_results.number(p[key], 3), "ratio": ratio(p[key], x["seconds"]),
                           "goal": goal, **({"suffix": " (wall time)"} if key != secs else {})})
            rec["peers"] = ps
            out.append(rec)
    out += serve_records(loom, peers, args)
    for rec in out:
        rec["peer_versions"] = sorted({p["versions"] for p in peers if "versions" in p})
        if args.peers_command:
            rec["command"] += "; " + args.peers_command
    return out


def best_serve_line(lines: list[dict], clients: int, threads: int, system: str | None) -> dict | None:
    """The run of text_serve_gpt2_124m with the most tokens/s in all at (clients, threads, system)."""
    runs = [x for x in lines if x.get("name") == "text_serve_gpt2_124m" and x.get("clients") == clients
            and x.get("threads") == threads and x.get("system") == system]
    return max(runs, key=lambda x: x["tokens_per_s"]) if runs else None


def serve_records(loom: list[dict], peers: list[dict], args) -> list[dict]:
    """The text_serve table's records: per thread count and client count, tokens/s in all, time
    to first token and tokens/s of CPU time, against llama.cpp's server."""
    out = []
    system = "llama.cpp server F32"
    keys = sorted({(x["threads"], x["clients"]) for x in loom if x.get("name") == "text_serve_gpt2_124m"})
    for t, c in keys:
        x = best_serve_line(loom, c, t, None)
        p = best_serve_line(peers, c, t, system)
        who = f"{c} client" + ("s" if c > 1 else "")
        for suffix, key, label, units, digits, faster in (
                ("tokens", "tokens_per_s", "tokens/s in all", "tokens/s", 2, "higher"),
                ("ttft", "ttft_mean_s", "time to first token (mean)", "s", 3, "lower"),
                ("cpu", "cpu_tokens_per_s", "tokens/s of CPU time", "tokens/s", 2, "higher")):
            rec = bench_results.base_record("text_serve", f"text_serve_gpt2_124m_{c}_{suffix}",
                                            f"GPT-2 124M, {who}: {label}", t, date=args.date, command=args.loom_command)
            if args.loom_load:  # the sitting's load, shown: on a shared machine it moves the figures
                rec["load"] = args.loom_load
                rec["context"] = f"({args.loom_load}" + (f"; peer {args.peers_load}" if args.peers_load else "") + ")"
            rec["units"] = units
            rec["loom"] = bench_results.number(x[key], digits)
            if p:
                r = ratio(x[key], p[key]) if faster == "higher" else ratio(p[key], x[key])
                rec["peers"] = [{"name": system, "value": bench_results.number(p[key], digits), "ratio": r}]
            else:
                rec["peers"] = [{"name": system, "value": "—"}]
            out.append(rec)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("loom", help="decode_bench's JSON lines (each thread count)")
    parser.add_argument("peers", help="decode_peers.sh's JSON lines")
    parser.add_argument("--date", help="the Loom run's date (default: today)")
    parser.add_argument("--loom-command", help="the command of the Loom run (default: this one)")
    parser.add_argument("--peers-command", default="bench/decode_peers.sh", help="the command of the peers' run")
    parser.add_argument("--loom-load", help="the Loom run's load, as the table shows it ('load 0.7')")
    parser.add_argument("--peers-load", help="the peers' load when they ran apart from Loom")
    parser.add_argument("--peers-cpu", action="store_true", help="the peers' figures in CPU time, not wall time")
    args = parser.parse_args()
    recs = records(read_lines(args.loom), read_lines(args.peers), args)
    path = os.environ.get("LOOM_BENCH_RESULTS")
    if path:
        bench_results.append(path, recs)
    else:
        for r in recs:
            print(bench_results.dumps(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
