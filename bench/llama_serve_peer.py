"""The llama.cpp peer of bench/text_serve_bench.cpp: llama-cpp-python's OpenAI-compatible server
(`python -m llama_cpp.server`, the package's `server` extras: bench/requirements-llama-server.txt)
serving the GGUF F32 GPT-2 124M of bench/llama_decode_peer.py (the same file, written by its
gguf_files where missing), driven over loopback HTTP as text_serve_bench drives Loom's
TextServer: C clients at once (each a thread with one keep-alive connection), each streaming R
completions of 64 tokens after a 32-token prompt, greedy. Prints one JSON line per client count,
in text_serve_bench's form with "system" naming the peer:

  {"name": "text_serve_gpt2_124m", "system": "llama.cpp server F32", "clients": C, "threads": T,
   "tokens_per_s": ..., "per_client_tokens_per_s": ..., "ttft_mean_s": ...,
   "cpu_tokens_per_s": ..., "tokens": ..., "versions": "..."}

tokens/s in all (wall time of the C clients), per client, the mean time to first token (client
side: from sending the request to its first streamed completion chunk) and tokens per second of
the server process's CPU time (/proc/PID/stat) divided by the threads.

How it is made to match Loom's run:
- /v1/completions takes the prompt as text only (no token-id list), so each prompt is 32 words
  of the file's vocabulary that are tokens of their own (" word"), checked to tokenize back to
  exactly those 32 ids. Each request gets a different first word: llama-cpp-python keeps the last
  request's tokens in its cache and skips the prefix a new prompt shares with them, which
  Loom's server does not do, so identical prompts would give it a free prefill.
- Exactly 64 tokens: max_tokens = min_tokens = 64 (min_tokens masks the end-of-text token until
  64), temperature 0 (greedy), repeat_penalty 1 (off); every stream must end with
  finish_reason "length", and a warm-up request (not counted) must report 32 prompt and 64
  completion tokens in its usage.
- The server runs with n_threads = n_threads_batch = T, a context of 128 (Loom's max_length),
  n_batch = n_ubatch = 128, logits_all off (the server's default keeps every prompt position's
  logits, which only logprobs need), and interrupt_requests off: its default cancels the stream
  in progress whenever another request waits, which would cut the concurrent clients' streams
  short. llama_cpp.server holds one model context behind a lock, so it serves one request at a
  time: with C clients the others wait.

Each thread count runs a server of its own.

  build/decode-peers/llama-venv/bin/python bench/llama_serve_peer.py --work build/decode-peers \\
      [--npz gpt2.npz] [--threads 1 2] [--clients 1 8] [--rounds 2]
"""

import argparse
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llama_decode_peer  # noqa: E402

NEW_TOKENS, PROMPT_TOKENS, CONTEXT = 64, 32, 128


def prompts(path, count):
    """count prompt texts of PROMPT_TOKENS tokens each, no two with the same first token."""
    import llama_cpp

    vocab = llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)
    words = []
    for i in range(vocab.n_vocab()):
        piece = vocab.detokenize([i])
        if len(piece) > 3 and piece[:1] == b" " and piece[1:].isalpha() and piece[1:].islower():
            words.append((i, piece.decode()))
        if len(words) >= count + PROMPT_TOKENS:
            break
    out = []
    for k in range(count):
        chosen = words[k:k + PROMPT_TOKENS]
        text = "".join(w for _, w in chosen)
        ids = vocab.tokenize(text.encode(), add_bos=True, special=True)
        if ids != [i for i, _ in chosen]:
            sys.exit(f"llama_serve_peer: prompt {k} tokenizes to {len(ids)} tokens, not the {PROMPT_TOKENS} chosen")
        out.append(text)
    return out


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def body(prompt, stream):
    return json.dumps({"prompt": prompt, "max_tokens": NEW_TOKENS, "min_tokens": NEW_TOKENS, "temperature": 0,
                       "repeat_penalty": 1.0, "stream": stream})


def stream_one(conn, prompt):
    """One streamed completion: (seconds to the first completion chunk, its finish_reason)."""
    t0 = time.perf_counter()
    conn.request("POST", "/v1/completions", body(prompt, True), {"Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        sys.exit(f"llama_serve_peer: /v1/completions answered {resp.status}: {resp.read()[:300]!r}")
    first, finish = None, None
    while True:
        line = resp.readline()
        if not line:
            break
        line = line.strip()
        if not line.startswith(b"data:"):
            continue  # ": ping" comments, blank separators
        data = line[5:].strip()
        if data == b"[DONE]":
            break
        choice = json.loads(data)["choices"][0]
        if first is None:
            first = time.perf_counter() - t0
        finish = choice.get("finish_reason") or finish
    resp.read()
    return first, finish


def run(path, threads, client_counts, rounds):
    import llama_cpp

    port = free_port()
    log = tempfile.TemporaryFile()
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", path, "--host", "127.0.0.1", "--port", str(port),
           "--n_threads", str(threads), "--n_threads_batch", str(threads), "--n_ctx", str(CONTEXT),
           "--n_batch", str(CONTEXT), "--n_ubatch", str(CONTEXT), "--logits_all", "false",
           "--interrupt_requests", "false", "--verbose", "false"]
    server = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, OMP_NUM_THREADS=str(threads)))
    try:
        deadline = time.monotonic() + 300
        while True:
            if server.poll() is not None:
                log.seek(0)
                sys.exit(f"llama_serve_peer: the server exited ({server.returncode}):\n{log.read()[-3000:].decode(errors='replace')}")
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                c.request("GET", "/v1/models")
                if c.getresponse().status == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                sys.exit("llama_serve_peer: the server did not answer within 300 s")
            time.sleep(0.5)
        most = max(client_counts)
        texts = prompts(path, 1 + most * rounds * len(client_counts))
        # warm-up, not counted: checks the token counts the measured streams rely on
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        c.request("POST", "/v1/completions", body(texts[0], False), {"Content-Type": "application/json"})
        usage = json.loads(c.getresponse().read())["usage"]
        if usage["prompt_tokens"] != PROMPT_TOKENS or usage["completion_tokens"] != NEW_TOKENS:
            sys.exit(f"llama_serve_peer: the warm-up used {usage}, not {PROMPT_TOKENS} prompt and {NEW_TOKENS} new tokens")
        next_text = 1
        for clients in client_counts:
            mine = [texts[next_text + k * rounds:next_text + (k + 1) * rounds] for k in range(clients)]
            next_text += clients * rounds
            ttfts, finishes, lock = [], [], threading.Lock()

            def client(own):
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
                for prompt in own:
                    first, finish = stream_one(conn, prompt)
                    with lock:
                        ttfts.append(first)
                        finishes.append(finish)
                conn.close()

            c0, t0 = cpu_seconds(server.pid), time.perf_counter()
            workers = [threading.Thread(target=client, args=(mine[k],)) for k in range(clients)]
            for w in workers:
                w.start()
            for w in workers:
                w.join()
            wall = time.perf_counter() - t0
            cpu = (cpu_seconds(server.pid) - c0) / threads
            if len(finishes) != clients * rounds or any(f != "length" or t is None for f, t in zip(finishes, ttfts)):
                sys.exit(f"llama_serve_peer: streams ended {finishes}, not all at {NEW_TOKENS} tokens ('length')")
            tokens = NEW_TOKENS * clients * rounds
            print(json.dumps({"name": "text_serve_gpt2_124m", "system": "llama.cpp server F32", "clients": clients,
                              "threads": threads, "tokens_per_s": round(tokens / wall, 2),
                              "per_client_tokens_per_s": round(tokens / wall / clients, 2),
                              "ttft_mean_s": round(sum(ttfts) / len(ttfts), 3), "cpu_tokens_per_s": round(tokens / cpu, 2),
                              "tokens": tokens, "versions": f"llama-cpp-python {llama_cpp.__version__}"}), flush=True)
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", required=True, help="where gpt2-F32.gguf is (written there from --npz when missing)")
    parser.add_argument("--npz", help="the weights transformers_decode_peer.py --save-npz wrote")
    parser.add_argument("--text", nargs="*", help="text files to train the vocabulary on (default: Debian's fortunes)")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--rounds", type=int, default=2, help="completions streamed by each client")
    args = parser.parse_args()
    if args.rounds < 1 or any(c < 1 for c in args.clients) or any(t < 1 for t in args.threads):
        parser.error("--threads, --clients and --rounds take positive counts")
    path = llama_decode_peer.gguf_files(args.work, ["F32"], args.npz, args.text, "llama_serve_peer")["F32"]
    for threads in args.threads:
        run(path, threads, args.clients, args.rounds)


if __name__ == "__main__":
    main()
