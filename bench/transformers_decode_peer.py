"""The transformers peer of bench/decode_bench.cpp: batch-1 greedy decode and a 512-token
prefill of a random-init GPT-2 124M (GPT2LMHeadModel(GPT2Config()), float32) with Hugging Face
transformers on PyTorch, printing JSON lines in decode_bench's form:

  {"name": "decode_gpt2_124m", "system": "transformers", "threads": 1, "tokens_per_s": ...,
   "cpu_tokens_per_s": ..., "versions": "..."}
      a 32-token prompt (decode_bench's ids), then 64 tokens one at a time, each the argmax of
      the last logits fed back with the key/value cache (past_key_values: what generate() does
      with do_sample=False); tokens/s in wall time and in the process's CPU time divided by the
      threads (the machine may be shared); the best of 3 runs
  {"name": "prefill_gpt2_124m_512", "system": "transformers", "threads": 1, "seconds": ...}
      one forward pass of a 512-token prompt, the best of 2 (cpu_seconds: the process's CPU time
      divided by the threads)

Each thread count runs in a process of its own (torch.set_num_threads before any work; the
intra-op pool is fixed once used).

  build/hf-venv/bin/python bench/transformers_decode_peer.py [--threads 1 2] [--save-npz FILE]

--save-npz writes the model's state dict (float32 arrays, transformers' names) for
bench/llama_decode_peer.py, which converts the same weights to GGUF.

build/hf-venv is the venv of tests/hf/requirements.txt (scripts/test_venv.sh hf): transformers and
tokenizers on Debian's python3-torch. No model is downloaded (the weights are random).
"""

import argparse
import json
import os
import subprocess
import sys
import time

PROMPT = [(i * 7919) % 50257 for i in range(32)]
LONG_PROMPT = [(i * 104729) % 50257 for i in range(512)]


def run(threads):
    import torch
    import transformers

    torch.set_num_threads(threads)
    torch.manual_seed(1)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config()).eval()
    versions = f"transformers {transformers.__version__}, torch {torch.__version__}"
    best_wall = best_cpu = float("inf")
    with torch.no_grad():
        for _ in range(3):
            out = model(torch.tensor([PROMPT]), use_cache=True)
            past, nxt = out.past_key_values, out.logits[0, -1].argmax()
            w0, c0 = time.perf_counter(), time.process_time()
            for _ in range(64):
                out = model(nxt.view(1, 1), past_key_values=past, use_cache=True)
                past, nxt = out.past_key_values, out.logits[0, -1].argmax()
            best_wall = min(best_wall, (time.perf_counter() - w0) / 64)
            best_cpu = min(best_cpu, (time.process_time() - c0) / 64 / threads)
        print(json.dumps({"name": "decode_gpt2_124m", "system": "transformers", "threads": threads,
                          "tokens_per_s": round(1 / best_wall, 2), "cpu_tokens_per_s": round(1 / best_cpu, 2),
                          "versions": versions}), flush=True)
        best_prefill = best_prefill_cpu = float("inf")
        for _ in range(2):
            t0, c0 = time.perf_counter(), time.process_time()
            model(torch.tensor([LONG_PROMPT]), use_cache=True)
            best_prefill = min(best_prefill, time.perf_counter() - t0)
            best_prefill_cpu = min(best_prefill_cpu, (time.process_time() - c0) / threads)
        print(json.dumps({"name": "prefill_gpt2_124m_512", "system": "transformers", "threads": threads,
                          "seconds": round(best_prefill, 3), "cpu_seconds": round(best_prefill_cpu, 3),
                          "versions": versions}), flush=True)


def save_npz(path):
    import numpy
    import torch
    import transformers

    torch.manual_seed(1)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config())
    numpy.savez(path, **{k: v.detach().numpy() for k, v in model.state_dict().items()})


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--save-npz", help="write the random model's weights to this .npz and exit")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # the child process of one thread count
    args = parser.parse_args()
    if args.save_npz:
        save_npz(args.save_npz)
        return
    if args.one:
        run(args.one)
        return
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    for n in args.threads:
        subprocess.run([sys.executable, __file__, "--one", str(n)], check=True, env=dict(env, OMP_NUM_THREADS=str(n)))


if __name__ == "__main__":
    main()
