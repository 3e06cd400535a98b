"""`loom serve MODEL_DIR` driven by OpenAI's own Python client (docs/serve.md, "Generation: OpenAI's API").

Usage: check_openai.py LOOM_CLI OUT

Trains a small byte-level BPE with `tokenizers` (no download), builds a GPT-2 with random weights
of that vocabulary with transformers and saves both into OUT/tiny (with a chat template), starts
`loom serve OUT/tiny --port 0`, and checks with `openai.OpenAI`:
- completions, greedy, equal to transformers' generate(do_sample=False) on the same prompt;
- the same streamed (the chunks add up, the last one has the finish reason), four streams at
  once (continuous batching: each equal to its own reference), a chat through the template
  (equal to transformers' greedy text cut at the template's stop), a chat streamed;
- refusals arrive as the client's own exceptions (BadRequestError, NotFoundError, AuthenticationError
  is not tested: no key is set), models.list();
- a raw socket that leaves in the middle of a long stream does not stop the server serving others;
- SIGTERM stops the server with exit status 0.
"""
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import openai  # noqa: E402
import torch  # noqa: E402
from tokenizers import ByteLevelBPETokenizer  # noqa: E402
from transformers import GPT2Config, GPT2LMHeadModel  # noqa: E402

TEXT = [
    "hello world, this is a small corpus for a tiny tokenizer.",
    "the quick brown fox jumps over the lazy dog; the dog sleeps.",
    "language models write one token at a time, reading their weights once per token.",
    "continuous batching lets a finished sequence leave and a new one join between steps.",
] * 4
TEMPLATE = {"system": "<|system|>{content}\n", "user": "<|user|>{content}\n", "assistant": "<|assistant|>{content}\n",
            "generation_prompt": "<|assistant|>", "stop": ["\n"]}
failures = []


def expect(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what, flush=True)


def make(folder):
    tok = ByteLevelBPETokenizer()
    tok.train_from_iterator(TEXT, vocab_size=400, min_frequency=1, special_tokens=["<|endoftext|>"], show_progress=False)
    os.makedirs(folder, exist_ok=True)
    tok.save(os.path.join(folder, "tokenizer.json"))
    eos = tok.token_to_id("<|endoftext|>")
    torch.manual_seed(3)
    config = GPT2Config(vocab_size=tok.get_vocab_size(), n_positions=256, n_embd=48, n_layer=2, n_head=4,
                        bos_token_id=eos, eos_token_id=eos, initializer_range=0.1)
    model = GPT2LMHeadModel(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    model.save_pretrained(folder, safe_serialization=True)
    with open(os.path.join(folder, "chat_template.json"), "w") as f:
        json.dump(TEMPLATE, f)
    return tok, model, eos


def reference(tok, model, eos, prompt, max_new, stop=None):
    ids = torch.tensor([tok.encode(prompt).ids])
    with torch.no_grad():
        out = model.generate(ids, do_sample=False, max_new_tokens=max_new, pad_token_id=eos,
                             attention_mask=torch.ones_like(ids))
    new = [t for t in out[0, ids.shape[1]:].tolist()]
    if eos in new:
        new = new[:new.index(eos)]
    text = tok.decode(new, skip_special_tokens=True)
    if stop and stop in text:
        text = text[:text.index(stop)]
    return text


def start(cli, folder):
    proc = subprocess.Popen([cli, "serve", folder, "--port", "0", "--model-name", "tiny", "--slots", "3"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if "http://" not in line:
        proc.kill()
        raise SystemExit("loom serve did not start: " + line + proc.stderr.read())
    port = int(line.rsplit(":", 1)[1].split("/")[0])
    return proc, port


def leave_mid_stream(port):
    body = json.dumps({"model": "tiny", "prompt": "hello", "max_tokens": 200, "temperature": 1.0, "stream": True})
    s = socket.create_connection(("127.0.0.1", port), timeout=20)
    s.sendall((f"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
               f"Content-Length: {len(body)}\r\n\r\n{body}").encode())
    got = b""
    while b"data: " not in got:
        chunk = s.recv(4096)
        if not chunk:
            break
        got += chunk
    s.close()  # in the middle of the stream
    return b"data: " in got


def main():
    cli, out = sys.argv[1], sys.argv[2]
    folder = os.path.join(out, "tiny")
    tok, model, eos = make(folder)
    proc, port = start(cli, folder)
    try:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", max_retries=0, timeout=60)
        expect([m.id for m in client.models.list().data] == ["tiny"], "models.list names the served model")

        prompts = ["hello world", "the quick brown", "language models", "a finished sequence"]
        for p in prompts[:2]:
            want = reference(tok, model, eos, p, 24)
            r = client.completions.create(model="tiny", prompt=p, max_tokens=24, temperature=0)
            expect(r.choices[0].text == want, f"completion of {p!r}: {r.choices[0].text!r} != transformers' {want!r}")
            expect(r.usage.prompt_tokens == len(tok.encode(p).ids), "usage.prompt_tokens")
            pieces, finish = [], None
            for chunk in client.completions.create(model="tiny", prompt=p, max_tokens=24, temperature=0, stream=True):
                pieces.append(chunk.choices[0].text)
                finish = chunk.choices[0].finish_reason or finish
            expect("".join(pieces) == want, f"streamed completion of {p!r}: {''.join(pieces)!r} != {want!r}")
            expect(finish in ("stop", "length"), f"the stream's finish_reason: {finish!r}")

        # four streams at once on three slots: each its own answer
        results = {}

        def stream(p):
            results[p] = "".join(c.choices[0].text for c in client.completions.create(
                model="tiny", prompt=p, max_tokens=40, temperature=0, stream=True))
        threads = [threading.Thread(target=stream, args=(p,)) for p in prompts]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for p in prompts:
            want = reference(tok, model, eos, p, 40)
            expect(results.get(p) == want, f"concurrent stream of {p!r}: {results.get(p)!r} != {want!r}")

        messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello world"}]
        text = "<|system|>be brief\n<|user|>hello world\n<|assistant|>"
        want = reference(tok, model, eos, text, 30, stop="\n")
        r = client.chat.completions.create(model="tiny", messages=messages, max_tokens=30, temperature=0)
        expect(r.choices[0].message.role == "assistant", "chat answer's role")
        expect(r.choices[0].message.content == want, f"chat: {r.choices[0].message.content!r} != {want!r}")
        pieces = [c.choices[0].delta.content or "" for c in client.chat.completions.create(
            model="tiny", messages=messages, max_tokens=30, temperature=0, stream=True) if c.choices]
        expect("".join(pieces) == want, f"streamed chat: {''.join(pieces)!r} != {want!r}")

        for kwargs, error, what in [(dict(model="tiny", prompt="x", n=2), openai.BadRequestError, "n=2"),
                                    (dict(model="gpt-4", prompt="x"), openai.NotFoundError, "another model"),
                                    (dict(model="tiny", prompt="x", temperature=5), openai.BadRequestError, "temperature 5")]:
            try:
                client.completions.create(**kwargs)
                expect(False, f"{what} was accepted")
            except error:
                pass

        expect(leave_mid_stream(port), "the raw stream began")
        r = client.completions.create(model="tiny", prompt="hello", max_tokens=5, temperature=0)
        expect(len(r.choices[0].text) >= 0 and r.usage.completion_tokens <= 5, "served after a client left mid-stream")
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = "killed"
    expect(code == 0, f"loom serve exited {code} on SIGTERM")
    if failures:
        raise SystemExit(f"{len(failures)} failures")
    print("openai client: all checks passed")


if __name__ == "__main__":
    main()
