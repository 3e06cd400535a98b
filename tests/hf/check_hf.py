"""Hugging Face checkpoints against transformers (docs/torch_weights.md, "Hugging Face checkpoints").

`make OUT`: for each case, a GPT2LMHeadModel or LlamaForCausalLM built from a config with
random weights (nothing downloaded: HF_HUB_OFFLINE=1), every parameter perturbed so that norms
and biases are not their initial ones, written with save_pretrained(safe_serialization=True)
into OUT/<case>/hf (in bfloat16 or float16 for some cases, sharded for one), with
OUT/<case>/io.safetensors (token ids and transformers' float32 logits of the weights as saved;
for the *_generate cases also the tokens transformers' greedy generate() writes after the first
8 ids, and the end-of-text id)
and OUT/<case>/params.txt (the number of parameters, then each named parameter and its shape).
loom_hf_check then loads each folder with io::load_hf_checkpoint, compares names, counts and
logits, and writes Loom's own checkpoint into OUT/<case>/loom.

`check OUT`: transformers' from_pretrained reads each OUT/<case>/loom with no missing,
unexpected or mismatched key, and gives the reference logits; and each OUT/<case>/loom_bf16_shards
(bfloat16, sharded, with its index) the logits of transformers' own model with its weights
rounded to bfloat16.
"""
import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # no bars for the shards in ctest's log

import torch  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM  # noqa: E402
from transformers.utils import logging  # noqa: E402

logging.disable_progress_bar()

# Relative to the reference logits' largest magnitude.
TOLERANCE = 1e-4

CASES = {
    # GPT-2: tied head, learned positions, c_attn split into q, k, v
    "gpt2": dict(family="gpt2", config=dict(vocab_size=96, n_positions=32, n_embd=48, n_layer=3, n_head=4),
                 length=12),
    # GPT-2 saved in bfloat16 (converted to float32 on load), its head untied
    "gpt2_bf16": dict(family="gpt2", config=dict(vocab_size=96, n_positions=32, n_embd=48, n_layer=2, n_head=4,
                                                  layer_norm_epsilon=1e-6, tie_word_embeddings=False),
                      length=9, dtype=torch.bfloat16),
    # Llama: grouped-query attention (2 key / value heads for 8), untied head
    "llama_gqa": dict(family="llama", config=dict(vocab_size=96, hidden_size=64, intermediate_size=112, num_hidden_layers=3,
                                                  num_attention_heads=8, num_key_value_heads=2, rms_norm_eps=1e-5,
                                                  tie_word_embeddings=False),
                      length=20),
    # Llama 3's rope scaling and theta, tied head, multi-head attention
    "llama3_tied": dict(family="llama", config=dict(vocab_size=96, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                                                    num_attention_heads=4, num_key_value_heads=4, rope_theta=500000.0,
                                                    rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                                                                      high_freq_factor=4.0, original_max_position_embeddings=16),
                                                    max_position_embeddings=128, tie_word_embeddings=True),
                        length=40),
    # Llama in float16, sharded (model.safetensors.index.json), linear rope scaling, attention biases,
    # multi-query attention
    "llama_sharded_f16": dict(family="llama", config=dict(vocab_size=96, hidden_size=64, intermediate_size=80,
                                                          num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=1,
                                                          rope_scaling=dict(rope_type="linear", factor=2.0),
                                                          attention_bias=True, tie_word_embeddings=False),
                              length=16, dtype=torch.float16, shard="40KB"),
    # greedy generation, 128 new tokens after an 8-token prompt, against transformers' generate()
    "gpt2_generate": dict(family="gpt2", config=dict(vocab_size=96, n_positions=160, n_embd=48, n_layer=2, n_head=4),
                          length=12, generate=128),
    "llama_generate": dict(family="llama", config=dict(vocab_size=96, hidden_size=64, intermediate_size=96,
                                                       num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                                       max_position_embeddings=256, tie_word_embeddings=False),
                           length=12, generate=128),
}

PROMPT = 8  # tokens before generation


def build(case):
    if case["family"] == "gpt2":
        return GPT2LMHeadModel(GPT2Config(**case["config"], initializer_range=0.1)).eval()
    return LlamaForCausalLM(LlamaConfig(**case["config"], initializer_range=0.1, attn_implementation="eager")).eval()


def load(case, folder, **kwargs):
    cls = GPT2LMHeadModel if case["family"] == "gpt2" else LlamaForCausalLM
    if case["family"] == "llama":
        kwargs["attn_implementation"] = "eager"
    model, info = cls.from_pretrained(folder, output_loading_info=True, **kwargs)
    return model.eval(), {k: v for k, v in info.items() if v}


def logits_of(model, ids):
    with torch.no_grad():
        return model(input_ids=ids, use_cache=False).logits.float()


def make(out):
    for i, (name, case) in enumerate(CASES.items()):
        torch.manual_seed(1000 + i)
        model = build(case)
        with torch.no_grad():
            for p in model.parameters():
                p.add_(0.1 * torch.randn_like(p))
        dtype = case.get("dtype", torch.float32)
        folder = os.path.join(out, name)
        kwargs = {"max_shard_size": case["shard"]} if "shard" in case else {}
        model.to(dtype).save_pretrained(os.path.join(folder, "hf"), safe_serialization=True, **kwargs)
        if "shard" in case and not os.path.exists(os.path.join(folder, "hf", "model.safetensors.index.json")):
            raise SystemExit(f"{name}: save_pretrained wrote no shards")
        # the reference: transformers' own reading of the folder in float32 (16-bit weights widened;
        # buffers such as Llama's inv_freq made afresh, not rounded through the saved dtype)
        model, problems = load(case, os.path.join(folder, "hf"), torch_dtype=torch.float32)
        if problems:
            raise SystemExit(f"{name}: transformers reads its own checkpoint with problems: {problems}")
        ids = torch.randint(0, case["config"]["vocab_size"], (2, case["length"]), dtype=torch.int64)
        io = {"input_ids": ids, "logits": logits_of(model, ids).contiguous()}
        if "generate" in case:
            # greedy, with transformers' own cache; both sides stop at the config's end-of-text token
            eos = model.generation_config.eos_token_id
            with torch.no_grad():
                written = model.generate(ids[:1, :PROMPT], do_sample=False, max_new_tokens=case["generate"],
                                         pad_token_id=eos, attention_mask=torch.ones(1, PROMPT, dtype=torch.int64))
            io["generated"] = written[0, PROMPT:].contiguous()
            io["eos"] = torch.tensor([eos], dtype=torch.int64)
        save_file(io, os.path.join(folder, "io.safetensors"))
        with open(os.path.join(folder, "params.txt"), "w") as f:
            f.write(f"{sum(p.numel() for p in model.parameters())}\n")
            for n, p in model.named_parameters():
                f.write(n + " " + " ".join(str(d) for d in p.shape) + "\n")
    with open(os.path.join(out, "cases.txt"), "w") as f:
        f.write("\n".join(CASES) + "\n")
    print(f"made {len(CASES)} checkpoints")


def check(out):
    failures = 0
    for name, case in CASES.items():
        folder = os.path.join(out, name)
        model, problems = load(case, os.path.join(folder, "loom"))
        ref = load_file(os.path.join(folder, "io.safetensors"))
        got = logits_of(model, ref["input_ids"])
        rel = ((got - ref["logits"]).abs().max() / ref["logits"].abs().max()).item()
        # transformers' own view of what Loom wrote: the same config
        config = json.load(open(os.path.join(folder, "loom", "config.json")))
        ok = not problems and rel <= TOLERANCE and model.dtype == torch.float32
        failures += not ok
        print(f"{name}: transformers reads Loom's checkpoint ({config['model_type']}, "
              f"{sum(p.numel() for p in model.parameters())} parameters): max relative difference {rel:.2e}"
              f"{'' if not problems else ', loading problems ' + str(problems)} -> {'ok' if ok else 'FAIL'}")
        # bfloat16 in shards: transformers' own weights rounded to bfloat16 are the reference
        shards = os.path.join(folder, "loom_bf16_shards")
        model, problems = load(case, shards, torch_dtype=torch.float32)
        want, _ = load(case, os.path.join(folder, "hf"), torch_dtype=torch.float32)
        with torch.no_grad():  # the parameters only (Llama's rotary frequencies are a buffer, made afresh)
            for p in want.parameters():
                p.copy_(p.to(torch.bfloat16).to(torch.float32))
        ref_logits = logits_of(want, ref["input_ids"])
        rel = ((logits_of(model, ref["input_ids"]) - ref_logits).abs().max() / ref_logits.abs().max()).item()
        n_shards = len(set(json.load(open(os.path.join(shards, "model.safetensors.index.json")))["weight_map"].values()))
        dtype = json.load(open(os.path.join(shards, "config.json")))["torch_dtype"]
        ok = not problems and rel <= TOLERANCE and n_shards > 1 and dtype == "bfloat16"
        failures += not ok
        print(f"{name}: transformers reads Loom's bfloat16 checkpoint in {n_shards} shards: max relative difference "
              f"{rel:.2e} from its own weights rounded to bfloat16"
              f"{'' if not problems else ', loading problems ' + str(problems)} -> {'ok' if ok else 'FAIL'}")
    if failures:
        raise SystemExit(f"{failures} of {len(CASES)} cases failed")
    print(f"all {len(CASES)} cases passed")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("make", "check"):
        raise SystemExit("usage: check_hf.py make|check OUT")
    (make if sys.argv[1] == "make" else check)(sys.argv[2])
