#!/usr/bin/python3
"""Checks the Loom model zoo against PyTorch.

check_params.py COUNTS.json [DUMP_DIR]

1. Parameter counts: COUNTS.json (from `loom_zoo_params`) against the same architectures in
   PyTorch: torchvision's vgg11/vgg16/vgg19/resnet18/resnet34/densenet121 (num_classes=1000,
   weights=None) and small torch modules written here for LeNet, the MLP, U-Net, the LSTM
   language model and the Transformer classifier. Counts must be equal.
2. Outputs (with DUMP_DIR from `loom_zoo_params --dump DUMP_DIR`): Loom's parameters and
   buffers are loaded into the PyTorch module of the same architecture (Loom layers carry the
   torch module names), which must reproduce Loom's Eval-mode output on the dumped input.

Exits non-zero on any mismatch; the last line reads "N passed, M failed".
Run with Debian's /usr/bin/python3 (python3-torch, python3-torchvision, python3-numpy)."""
import json
import os
import sys
from collections import OrderedDict, defaultdict

import numpy as np

import torch
from torch import nn
import torch.nn.functional as F
import torchvision


def count(m):
    return sum(p.numel() for p in m.parameters())


class MLP(nn.Module):
    """Loom names: hidden{i}.linear, output."""

    def __init__(self, in_units, hidden, out_units, dropout):
        super().__init__()
        self.n, prev = len(hidden), in_units
        for i, h in enumerate(hidden):
            setattr(self, f"hidden{i}", nn.ModuleDict(
                OrderedDict(linear=nn.Linear(prev, h), act=nn.ReLU(), dropout=nn.Dropout(dropout))))
            prev = h
        self.output = nn.Linear(prev, out_units)

    def forward(self, x):
        for i in range(self.n):
            b = getattr(self, f"hidden{i}")
            x = b["dropout"](b["act"](b["linear"](x)))
        return self.output(x)


class LeNet(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5, padding=2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, num_classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc1(x.flatten(1)))
        return self.fc3(F.relu(self.fc2(x)))


def small_vgg(cfg, num_classes, batch_norm, classifier_units):
    """torchvision's VGG layout (features.N, avgpool 7x7, classifier.N) with a narrower head."""
    m = torchvision.models.vgg.VGG(torchvision.models.vgg.make_layers(cfg, batch_norm), num_classes, init_weights=False)
    c = [v for v in cfg if v != "M"][-1]
    m.classifier = nn.Sequential(
        nn.Linear(c * 7 * 7, classifier_units), nn.ReLU(True), nn.Dropout(),
        nn.Linear(classifier_units, classifier_units), nn.ReLU(True), nn.Dropout(),
        nn.Linear(classifier_units, num_classes))
    return m


class DoubleConv(nn.Module):
    """Loom names: <block>.conv1, .bn1, .conv2, .bn2 (and .upconv in up blocks)."""

    def __init__(self, cin, cout, batch_norm, up=False):
        super().__init__()
        if up:
            self.upconv = nn.ConvTranspose2d(cin, cout, 2, stride=2)
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1, bias=not batch_norm)
        self.bn1 = nn.BatchNorm2d(cout) if batch_norm else nn.Identity()
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=not batch_norm)
        self.bn2 = nn.BatchNorm2d(cout) if batch_norm else nn.Identity()

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(x)))


class UNet(nn.Module):
    def __init__(self, in_channels, num_classes, base, depth, batch_norm):
        super().__init__()
        self.depth = depth
        c = in_channels
        for d in range(depth):
            setattr(self, f"down{d}", DoubleConv(c, base << d, batch_norm))
            c = base << d
        self.bottleneck = DoubleConv(c, base << depth, batch_norm)
        for d in range(depth):
            setattr(self, f"up{d}", DoubleConv(base << (d + 1), base << d, batch_norm, up=True))
        self.head = nn.Conv2d(base, num_classes, 1)

    def forward(self, x):
        skips = []
        for d in range(self.depth):
            x = getattr(self, f"down{d}")(x)
            skips.append(x)
            x = F.max_pool2d(x, 2)
        x = self.bottleneck(x)
        for d in reversed(range(self.depth)):
            up = getattr(self, f"up{d}")
            x = up(torch.cat([skips[d], up.upconv(x)], 1))
        return self.head(x)


class LstmLM(nn.Module):
    def __init__(self, vocab, emb, hidden, layers, dropout):
        super().__init__()
        self.embedding = nn.Embedding(vocab, emb)
        self.lstm = nn.LSTM(emb, hidden, layers, batch_first=True, dropout=dropout)
        self.decoder = nn.Linear(hidden, vocab)

    def forward(self, ids):
        return self.decoder(self.lstm(self.embedding(ids))[0])


class TransformerClassifier(nn.Module):
    def __init__(self, vocab, seq_len, d_model, heads, ff, layers, classes, dropout):
        super().__init__()
        self.embedding = nn.Embedding(vocab, d_model)
        self.pos_embedding = nn.Parameter(torch.zeros(1, seq_len, d_model))
        layer = nn.TransformerEncoderLayer(d_model, heads, ff, dropout, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.classifier = nn.Linear(d_model, classes)

    def forward(self, ids):
        return self.classifier(self.encoder(self.embedding(ids) + self.pos_embedding).mean(1))


def references():
    tv = torchvision.models
    # the same fixed configurations as tests/zoo/zoo_params_main.cpp
    yield "mlp", lambda: MLP(784, [256, 128], 10, 0.2)
    yield "lenet", lambda: LeNet(10)
    yield "vgg11", lambda: tv.vgg11(weights=None, num_classes=1000)
    yield "vgg16", lambda: tv.vgg16(weights=None, num_classes=1000)
    yield "vgg19", lambda: tv.vgg19(weights=None, num_classes=1000)
    yield "resnet18", lambda: tv.resnet18(weights=None, num_classes=1000)
    yield "resnet34", lambda: tv.resnet34(weights=None, num_classes=1000)
    yield "densenet121", lambda: tv.densenet121(weights=None, num_classes=1000)
    yield "unet", lambda: UNet(1, 2, 64, 4, False)
    yield "unet_bn_small", lambda: UNet(3, 5, 16, 3, True)
    yield "lstm_lm", lambda: LstmLM(10000, 256, 512, 2, 0.2)
    yield "transformer_classifier", lambda: TransformerClassifier(20000, 128, 256, 8, 1024, 4, 5, 0.1)


def output_cases():
    """The modules for `loom_zoo_params --dump` (same configurations as its dump calls)."""
    tv = torchvision.models
    return {
        "mlp": lambda: MLP(784, [256, 128], 10, 0.2),
        "lenet": lambda: LeNet(10),
        "vgg_small": lambda: small_vgg([16, "M", 32, "M", 32, 32, "M"], 10, False, 64),
        "vgg_bn_small": lambda: small_vgg([8, "M", 16, 16, "M"], 10, True, 32),
        "resnet18": lambda: tv.resnet18(weights=None, num_classes=1000),
        "densenet121": lambda: tv.densenet121(weights=None, num_classes=1000),
        "unet_small": lambda: UNet(1, 2, 8, 3, False),
        "unet_bn_small": lambda: UNet(3, 5, 16, 3, True),
        "lstm_lm_small": lambda: LstmLM(50, 16, 24, 2, 0.2),
        "transformer_small": lambda: TransformerClassifier(60, 10, 32, 4, 64, 2, 3, 0.1),
    }


def torch_state(entries, load):
    """Loom parameters/buffers -> a torch state dict. Loom's matrices are (in, out) where torch's
    are (out, in); attention keeps q/k/v apart where torch packs them in in_proj."""
    out = {}
    grouped = defaultdict(dict)
    for e in entries:
        layer, kind, name, value = e["layer"], e["kind"], e["name"], load(e["file"])
        if kind == "Dropout":  # its generator state; torch's dropout keeps none
            continue
        if kind == "Linear":
            out[f"{layer}.{'weight' if name == 'weights' else name}"] = value.T if name == "weights" else value
        elif kind in ("Conv2D", "Conv2DTranspose", "Conv1D"):
            out[f"{layer}.{'weight' if name == 'weights' else name}"] = value
        elif kind in ("BatchNorm", "LayerNorm"):
            out[f"{layer}.{name}"] = value
        elif kind == "Lookup":
            if layer == "pos_embedding":
                out["pos_embedding"] = value[None]
            else:
                out[f"{layer}.weight"] = value
        elif kind == "RNN":  # "lstm.l{i}" -> lstm.weight_ih_l{i}, ...
            mod, idx = layer.rsplit(".", 1)
            torch_name = {"w_ih": "weight_ih", "w_hh": "weight_hh", "b_ih": "bias_ih", "b_hh": "bias_hh"}[name]
            out[f"{mod}.{torch_name}_{idx}"] = value.T if name.startswith("w_") else value
        elif kind == "TransformerEncoderLayer":
            grouped[layer][name] = value
        else:
            raise ValueError(f"no torch mapping for {kind} '{layer}' ({name})")
    for layer, p in grouped.items():
        a = lambda n: p["self_attention/" + n]
        out[f"{layer}.self_attn.in_proj_weight"] = np.concatenate([a("q_weight").T, a("k_weight").T, a("v_weight").T])
        out[f"{layer}.self_attn.in_proj_bias"] = np.concatenate([a("q_bias"), a("k_bias"), a("v_bias")])
        out[f"{layer}.self_attn.out_proj.weight"] = a("out_weight").T
        out[f"{layer}.self_attn.out_proj.bias"] = a("out_bias")
        out[f"{layer}.linear1.weight"] = p["ff/w1"].T
        out[f"{layer}.linear1.bias"] = p["ff/b1"]
        out[f"{layer}.linear2.weight"] = p["ff/w2"].T
        out[f"{layer}.linear2.bias"] = p["ff/b2"]
        for n in ("norm1", "norm2"):
            out[f"{layer}.{n}.weight"] = p[n + "/weight"]
            out[f"{layer}.{n}.bias"] = p[n + "/bias"]
    return {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in out.items()}


def check_output(name, entry, build, directory):
    load = lambda f: np.load(os.path.join(directory, f))
    model = build().eval()
    state = torch_state(entry["params"], load)
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if not k.endswith("num_batches_tracked")]
    if missing or unexpected:
        return False, f"state mismatch: missing {missing[:5]}, unexpected {unexpected[:5]}"
    x = torch.from_numpy(load(entry["input"]))
    want = load(entry["output"])
    with torch.no_grad():
        got = model(x).numpy()
    if got.shape != want.shape:
        return False, f"shape {want.shape} (loom) vs {got.shape} (pytorch)"
    scale = max(1e-12, float(np.abs(got).max()))
    err = float(np.abs(got - want).max()) / scale
    return err < 1e-4, f"output {tuple(got.shape)} max relative difference {err:.2e}"


def main():
    text = open(sys.argv[1]).read() if len(sys.argv) > 1 else sys.stdin.read()
    loom = json.loads(text)
    passed = failed = 0
    seen = set()
    for name, build in references():
        seen.add(name)
        torch_n = count(build())
        loom_n = loom.get(name)
        ok = loom_n == torch_n
        print(f"{'ok  ' if ok else 'FAIL'} {name:24s} loom {loom_n!s:>12s}  pytorch {torch_n:>12d}")
        passed += ok
        failed += not ok
    for name in sorted(set(loom) - seen):
        print(f"FAIL {name:24s} has no PyTorch reference")
        failed += 1
    if len(sys.argv) > 2:
        directory = sys.argv[2]
        with open(os.path.join(directory, "manifest.json")) as f:
            manifest = json.load(f)
        cases = output_cases()
        for name in sorted(set(manifest) | set(cases)):
            if name not in manifest or name not in cases:
                ok, msg = False, "dumped by Loom but no PyTorch module" if name in manifest else "not dumped by Loom"
            else:
                try:
                    ok, msg = check_output(name, manifest[name], cases[name], directory)
                except Exception as e:  # a mapping or shape error is a failure, not a crash
                    ok, msg = False, f"{type(e).__name__}: {e}"
            print(f"{'ok  ' if ok else 'FAIL'} {name:24s} {msg}")
            passed += ok
            failed += not ok
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
