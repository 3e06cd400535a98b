"""The llama.cpp peer of bench/decode_bench.cpp: the random-init GPT-2 124M that
bench/transformers_decode_peer.py builds (its weights from --save-npz) written as GGUF with the
`gguf` package's writer, as F32 and as Q8_0, and run by llama.cpp through llama-cpp-python:
batch-1 greedy decode and a 512-token prefill, printing JSON lines in decode_bench's form:

  {"name": "decode_gpt2_124m", "system": "llama.cpp F32", "threads": 1, "tokens_per_s": ...,
   "cpu_tokens_per_s": ..., "versions": "..."}
      a 32-token prompt (decode_bench's ids), then 64 tokens one at a time, each the argmax of
      the last logits fed back; tokens/s in wall time and in the process's CPU time divided by
      the threads; the best of 3 runs. "llama.cpp Q8_0" the same on the Q8_0 file.
  {"name": "prefill_gpt2_124m_512", "system": "llama.cpp F32", "threads": 1, "seconds": ...}
      one llama_decode of a 512-token prompt (n_batch = n_ubatch = 512), the best of 2
      (cpu_seconds: the process's CPU time divided by the threads)

The file is laid out as llama.cpp's own convert_hf_to_gguf.py lays out a GPT-2: Conv1D weights
transposed to (out, in), the head written as output.weight (a copy of the token table: GPT-2's
is tied), norms, biases and the position table in F32, every other matrix in the file's type.
llama.cpp requires a tokenizer in the file: a byte-level BPE vocabulary trained with `tokenizers`
on Debian's fortunes (or any text given), padded to GPT-2's 50,257 ids with unused tokens, as the
converter pads one. The token ids are fed directly; the vocabulary only has to load.

Each thread count runs in a process of its own.

  build/llama-venv/bin/python bench/llama_decode_peer.py --npz gpt2.npz --work DIR [--threads 1 2]
"""

import argparse
import glob
import json
import os
import subprocess
import sys
import time

PROMPT = [(i * 7919) % 50257 for i in range(32)]
LONG_PROMPT = [(i * 104729) % 50257 for i in range(512)]
VOCAB, WIDTH, LAYERS, HEADS, POSITIONS = 50257, 768, 12, 12, 1024


def train_vocabulary(text_files):
    """Byte-level BPE tokens (id order) and merges, trained on text_files, up to VOCAB tokens."""
    import tokenizers

    tok = tokenizers.Tokenizer(tokenizers.models.BPE())
    tok.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tokenizers.decoders.ByteLevel()
    trainer = tokenizers.trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=["<|endoftext|>"],
                                             initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet(),
                                             show_progress=False)
    tok.train(text_files, trainer)
    model = json.loads(tok.to_str())["model"]
    vocab = sorted(model["vocab"].items(), key=lambda kv: kv[1])
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    return [t for t, _ in vocab], merges


def write_gguf(npz, path, qtype, tokens, merges):
    import gguf
    import numpy as np

    w = np.load(npz)
    writer = gguf.GGUFWriter(path, "gpt2")
    writer.add_name("random-gpt2-124m")
    writer.add_context_length(POSITIONS)
    writer.add_embedding_length(WIDTH)
    writer.add_feed_forward_length(4 * WIDTH)
    writer.add_block_count(LAYERS)
    writer.add_head_count(HEADS)
    writer.add_layer_norm_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0 if qtype == "Q8_0" else gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")
    padded = tokens + [f"[PAD{i}]" for i in range(len(tokens), VOCAB)]
    types = [gguf.TokenType.CONTROL if t == "<|endoftext|>" else gguf.TokenType.NORMAL for t in tokens]
    types += [gguf.TokenType.UNUSED] * (VOCAB - len(tokens))
    writer.add_token_list(padded)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    eot = tokens.index("<|endoftext|>")
    writer.add_bos_token_id(eot)
    writer.add_eos_token_id(eot)

    def add(name, array, matrix):
        array = np.ascontiguousarray(array, dtype=np.float32)
        if matrix and qtype == "Q8_0":
            writer.add_tensor(name, gguf.quants.quantize(array, gguf.GGMLQuantizationType.Q8_0),
                              raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            writer.add_tensor(name, array)

    add("token_embd.weight", w["transformer.wte.weight"], True)
    add("position_embd.weight", w["transformer.wpe.weight"], False)
    for i in range(LAYERS):
        p, b = f"transformer.h.{i}.", f"blk.{i}."
        for hf, g in (("ln_1", "attn_norm"), ("ln_2", "ffn_norm")):
            add(b + g + ".weight", w[p + hf + ".weight"], False)
            add(b + g + ".bias", w[p + hf + ".bias"], False)
        for hf, g in (("attn.c_attn", "attn_qkv"), ("attn.c_proj", "attn_output"), ("mlp.c_fc", "ffn_up"),
                      ("mlp.c_proj", "ffn_down")):
            add(b + g + ".weight", w[p + hf + ".weight"].T, True)  # Conv1D (in, out) -> (out, in)
            add(b + g + ".bias", w[p + hf + ".bias"], False)
    add("output_norm.weight", w["transformer.ln_f.weight"], False)
    add("output_norm.bias", w["transformer.ln_f.bias"], False)
    add("output.weight", w["transformer.wte.weight"], True)  # tied: the converter writes a copy
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def gguf_files(work, types, npz, text, who):
    """WORK/gpt2-TYPE.gguf for each of types, written from npz (with a vocabulary trained on text,
    default Debian's fortunes) where missing, else reused; the paths. bench/llama_serve_peer.py
    serves the F32 file that this peer decodes with."""
    os.makedirs(work, exist_ok=True)
    paths = {q: os.path.join(work, f"gpt2-{q}.gguf") for q in types}
    missing = [q for q in types if not os.path.exists(paths[q])]
    if missing:
        if not npz:
            sys.exit(f"{who}: --npz is needed to write " + ", ".join(missing))
        text = text or [f for f in glob.glob("/usr/share/games/fortunes/*") if "." not in os.path.basename(f)]
        tokens, merges = train_vocabulary(text)
        for q in missing:
            write_gguf(npz, paths[q], q, tokens, merges)
    return paths


def run(path, qtype, threads):
    import llama_cpp
    import numpy as np

    llm = llama_cpp.Llama(model_path=path, n_ctx=1024, n_batch=512, n_ubatch=512, n_threads=threads,
                          n_threads_batch=threads, verbose=False)
    versions = f"llama-cpp-python {llama_cpp.__version__}"
    system = f"llama.cpp {qtype}"

    def last_argmax():
        return int(np.argmax(llm.scores[llm.n_tokens - 1]))

    best_wall = best_cpu = float("inf")
    for _ in range(3):
        llm.reset()
        llm.eval(PROMPT)
        nxt = last_argmax()
        w0, c0 = time.perf_counter(), time.process_time()
        for _ in range(64):
            llm.eval([nxt])
            nxt = last_argmax()
        best_wall = min(best_wall, (time.perf_counter() - w0) / 64)
        best_cpu = min(best_cpu, (time.process_time() - c0) / 64 / threads)
    print(json.dumps({"name": "decode_gpt2_124m", "system": system, "threads": threads,
                      "tokens_per_s": round(1 / best_wall, 2), "cpu_tokens_per_s": round(1 / best_cpu, 2),
                      "versions": versions}), flush=True)
    best_prefill = best_prefill_cpu = float("inf")
    for _ in range(2):
        llm.reset()
        t0, c0 = time.perf_counter(), time.process_time()
        llm.eval(LONG_PROMPT)
        best_prefill = min(best_prefill, time.perf_counter() - t0)
        best_prefill_cpu = min(best_prefill_cpu, (time.process_time() - c0) / threads)
    print(json.dumps({"name": "prefill_gpt2_124m_512", "system": system, "threads": threads,
                      "seconds": round(best_prefill, 3), "cpu_seconds": round(best_prefill_cpu, 3),
                      "versions": versions}), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--npz", help="the weights transformers_decode_peer.py --save-npz wrote")
    parser.add_argument("--work", required=True, help="where the GGUF files go (made once, reused)")
    parser.add_argument("--text", nargs="*", help="text files to train the vocabulary on (default: Debian's fortunes)")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--types", nargs="+", default=["F32", "Q8_0"])
    parser.add_argument("--one", nargs=2, help=argparse.SUPPRESS)  # child process: QTYPE THREADS
    args = parser.parse_args()
    if args.one:
        run(os.path.join(args.work, f"gpt2-{args.one[0]}.gguf"), args.one[0], int(args.one[1]))
        return
    gguf_files(args.work, args.types, args.npz, args.text, "llama_decode_peer")
    for q in args.types:
        for n in args.threads:
            subprocess.run([sys.executable, __file__, "--work", args.work, "--one", q, str(n)], check=True,
                           env=dict(os.environ, OMP_NUM_THREADS=str(n)))


if __name__ == "__main__":
    main()
