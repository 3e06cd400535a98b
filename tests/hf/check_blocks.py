"""The decoder blocks against transformers' (docs/layers.md, "Decoder blocks"): nn::GptBlock
against GPT2Block, nn::LlamaBlock against LlamaDecoderLayer.

`make OUT`: for each case, transformers' block built from a config (nothing downloaded), its
parameters perturbed so that norms and biases are not their initial ones, in float64, run on a
random (2, T, d) input with the causal mask (GPT2Block makes its own; LlamaDecoderLayer gets it
as an additive mask, positions 0 .. T-1); then the gradients of sum(output * cotangent). Writes
OUT/<case>/config.json (the block's config and family) and OUT/<case>/block.safetensors: the
parameters by transformers' names, "grad.<name>" their gradients, and x, cotangent, y, grad.x.
loom_hf_blocks OUT builds the same blocks with Loom's kinds and compares.
"""
import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from transformers import GPT2Config, LlamaConfig  # noqa: E402
from transformers.models.gpt2.modeling_gpt2 import GPT2Block  # noqa: E402
from transformers.models.llama.modeling_llama import LlamaDecoderLayer  # noqa: E402
from transformers.utils import logging  # noqa: E402

logging.set_verbosity_error()  # (4.44's note that position_ids will give way to position_embeddings)

CASES = {
    # GPT-2's block: 4 heads of 12, the MLP 4 d
    "gpt2_block": dict(family="gpt2", config=dict(n_embd=48, n_head=4, layer_norm_epsilon=1e-5), length=13),
    # GPT-2's block with its own MLP width and epsilon
    "gpt2_block_inner": dict(family="gpt2", config=dict(n_embd=32, n_head=2, n_inner=80, layer_norm_epsilon=1e-6), length=70),
    # Llama's block: grouped-query attention (2 key / value heads for 8), Llama 3's rope scaling
    "llama_block_gqa_llama3": dict(family="llama", config=dict(hidden_size=64, intermediate_size=112, num_attention_heads=8,
                                                             num_key_value_heads=2, rms_norm_eps=1e-5, rope_theta=500000.0,
                                                             rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                                                                               high_freq_factor=4.0,
                                                                               original_max_position_embeddings=16),
                                                             max_position_embeddings=128),
                                   length=40),
    # Llama's block with attention biases, multi-query attention and linear rope scaling, past a tile
    "llama_block_mqa_bias": dict(family="llama", config=dict(hidden_size=32, intermediate_size=48, num_attention_heads=4,
                                                           num_key_value_heads=1, attention_bias=True,
                                                           rope_scaling=dict(rope_type="linear", factor=2.0)),
                                 length=70),
}


def build(case):
    if case["family"] == "gpt2":
        config = GPT2Config(**case["config"], attn_pdrop=0.0, resid_pdrop=0.0, attn_implementation="eager")
        return GPT2Block(config, layer_idx=0)
    config = LlamaConfig(**case["config"], attn_implementation="eager")
    return LlamaDecoderLayer(config, layer_idx=0)


def run(case, block, x):
    if case["family"] == "gpt2":
        return block(x)[0]
    t = x.shape[1]
    future = torch.ones(t, t, dtype=torch.bool).triu(1)
    mask = torch.zeros(1, 1, t, t, dtype=x.dtype).masked_fill(future, torch.finfo(x.dtype).min)
    return block(x, attention_mask=mask, position_ids=torch.arange(t)[None])[0]


def make(out):
    for i, (name, case) in enumerate(CASES.items()):
        torch.manual_seed(2000 + i)
        block = build(case).double().eval()
        with torch.no_grad():
            for p in block.parameters():
                p.add_(0.1 * torch.randn_like(p))
        d = case["config"]["n_embd" if case["family"] == "gpt2" else "hidden_size"]
        x = torch.randn(2, case["length"], d, dtype=torch.float64, requires_grad=True)
        y = run(case, block, x)
        cot = torch.randn_like(y)
        (y * cot).sum().backward()
        tensors = {"x": x.detach(), "cotangent": cot, "y": y.detach(), "grad.x": x.grad}
        for n, p in block.named_parameters():
            tensors[n] = p.detach().contiguous()
            tensors["grad." + n] = p.grad.contiguous()
        folder = os.path.join(out, name)
        os.makedirs(folder, exist_ok=True)
        save_file(tensors, os.path.join(folder, "block.safetensors"))
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump(dict(family=case["family"], **case["config"]), f)
    with open(os.path.join(out, "cases.txt"), "w") as f:
        f.write("\n".join(CASES) + "\n")
    print(f"made {len(CASES)} blocks")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "make":
        raise SystemExit("usage: check_blocks.py make OUT")
    make(sys.argv[2])
