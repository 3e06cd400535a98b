"""Writes a torchvision ResNet-18 (random init, seed 0, eval mode) exported by torch.onnx at opset 17,
an input and torch's logits for it, into the folder given: resnet18.onnx, input.npy, logits.npy.
Also a small MLP (Linear, GELU, LayerNorm, Dropout, LogSoftmax): mlp.onnx, mlp_input.npy, mlp_output.npy;
four recurrent language models (rnn_<name>.onnx, _input.npy, _output.npy), TransformerEncoderLayers and
nn.MultiheadAttention (attn_<name>.onnx, _input.npy, _output.npy; cross-attention with _input2.npy too) and two
attention forms the importer refuses (a causal attn_mask, a key_padding_mask).
Run with Debian's python3 (python3-torch, python3-torchvision); onnx_import_tests imports the file
and compares its logits with torch's (docs/onnx.md, "Import")."""
import os
import sys

import numpy as np
import torch
import torchvision

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
torch.manual_seed(0)
model = torchvision.models.resnet18(weights=None, num_classes=1000).eval()
# non-trivial batch norm statistics (a fresh model has mean 0, var 1)
with torch.no_grad():
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-0.2, 0.2)
            m.running_var.uniform_(0.5, 1.5)
            m.weight.uniform_(0.5, 1.5)
            m.bias.uniform_(-0.2, 0.2)
x = torch.randn(2, 3, 224, 224, generator=torch.Generator().manual_seed(1))
with torch.no_grad():
    logits = model(x)
torch.onnx.export(model, x, os.path.join(out, "resnet18.onnx"), opset_version=17, input_names=["image"],
                  output_names=["logits"], dynamic_axes={"image": {0: "batch"}, "logits": {0: "batch"}})
np.save(os.path.join(out, "input.npy"), x.numpy())
np.save(os.path.join(out, "logits.npy"), logits.numpy())
print("resnet18.onnx written; logits", tuple(logits.shape))

# a small MLP with GELU (torch writes it as Div, Erf, Add, Mul, Mul) and LayerNorm: mlp.onnx,
# mlp_input.npy, mlp_output.npy
torch.manual_seed(1)
mlp = torch.nn.Sequential(torch.nn.Linear(12, 16), torch.nn.GELU(), torch.nn.LayerNorm(16), torch.nn.Dropout(0.1),
                          torch.nn.Linear(16, 5), torch.nn.LogSoftmax(dim=-1)).eval()
with torch.no_grad():
    mlp[2].weight.uniform_(0.5, 1.5)
    mlp[2].bias.uniform_(-0.5, 0.5)
xm = torch.randn(4, 12, generator=torch.Generator().manual_seed(2))
with torch.no_grad():
    ym = mlp(xm)
torch.onnx.export(mlp, xm, os.path.join(out, "mlp.onnx"), opset_version=17, input_names=["x"], output_names=["y"],
                  dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
np.save(os.path.join(out, "mlp_input.npy"), xm.numpy())
np.save(os.path.join(out, "mlp_output.npy"), ym.numpy())
print("mlp.onnx written")

# recurrent language models as torch.onnx writes nn.LSTM / nn.GRU / nn.RNN(batch_first=True): an
# Embedding (Gather), the recurrent node between Transposes (Squeeze of the direction axis, or
# Transpose and Reshape when bidirectional), zero initial states computed from the input's shape
# (ConstantOfShape, Slice per layer), and a Linear (MatMul, Add). Traced at length 5, run at
# length 7 (the time axis is dynamic): rnn_<name>.onnx, rnn_<name>_input.npy, rnn_<name>_output.npy


class LanguageModel(torch.nn.Module):
    def __init__(self, cell, layers, bidirectional, **kw):
        super().__init__()
        self.emb = torch.nn.Embedding(30, 8)
        self.rnn = cell(8, 6, num_layers=layers, batch_first=True, bidirectional=bidirectional, **kw)
        self.out = torch.nn.Linear(12 if bidirectional else 6, 30)

    def forward(self, ids):
        y, _ = self.rnn(self.emb(ids))
        return self.out(y)


for name, cell, layers, bi, kw in [("lstm2", torch.nn.LSTM, 2, False, {}), ("bilstm", torch.nn.LSTM, 1, True, {}),
                                   ("gru", torch.nn.GRU, 2, False, {}), ("rnn_relu", torch.nn.RNN, 1, True, {"nonlinearity": "relu"})]:
    torch.manual_seed(3)
    lm = LanguageModel(cell, layers, bi, **kw).eval()
    trace = torch.randint(0, 30, (3, 5), generator=torch.Generator().manual_seed(4))
    ids = torch.randint(0, 30, (2, 7), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        y = lm(ids)
    torch.onnx.export(lm, trace, os.path.join(out, f"rnn_{name}.onnx"), opset_version=17, input_names=["ids"], output_names=["logits"],
                      dynamic_axes={"ids": {0: "batch", 1: "time"}, "logits": {0: "batch", 1: "time"}})
    np.save(os.path.join(out, f"rnn_{name}_input.npy"), ids.numpy())
    np.save(os.path.join(out, f"rnn_{name}_output.npy"), y.numpy())
    print(f"rnn_{name}.onnx written")

# attention (docs/onnx.md): nn.TransformerEncoderLayer(batch_first=True), post-norm and norm_first,
# relu and gelu, and nn.MultiheadAttention (batch_first, self-attention, bias and none), traced at
# length 5 and run at length 7 (dynamic axes): attn_<name>.onnx, _input.npy, _output.npy. Layer
# norms and biases randomized (a fresh model has ones and zeros).


def randomize(module):
    with torch.no_grad():
        for name, p in module.named_parameters():
            if name.endswith("bias"):
                p.uniform_(-0.5, 0.5)
            elif "norm" in name:
                p.uniform_(0.5, 1.5)


class SelfAttention(torch.nn.Module):
    def __init__(self, **kw):
        super().__init__()
        self.attn = torch.nn.MultiheadAttention(16, 4, batch_first=True, **kw)

    def forward(self, x):
        return self.attn(x, x, x)[0]


class MaskedAttention(SelfAttention):  # refused: a causal attn_mask added to the scores
    def forward(self, x):
        n = x.shape[1]
        mask = torch.triu(torch.full((n, n), float("-inf")), diagonal=1)
        return self.attn(x, x, x, attn_mask=mask, need_weights=False)[0]


class PaddedAttention(SelfAttention):  # refused: key_padding_mask
    def forward(self, x, pad):
        return self.attn(x, x, x, key_padding_mask=pad, need_weights=False)[0]


class CrossAttention(SelfAttention):  # queries other than the keys and values
    def forward(self, x, y):
        return self.attn(x, y, y, need_weights=False)[0]


attention = [("post_relu", lambda: torch.nn.TransformerEncoderLayer(16, 4, 32, dropout=0.1, batch_first=True)),
             ("post_gelu", lambda: torch.nn.TransformerEncoderLayer(16, 4, 32, dropout=0.1, activation="gelu", batch_first=True)),
             ("pre_relu", lambda: torch.nn.TransformerEncoderLayer(16, 4, 32, dropout=0.1, batch_first=True, norm_first=True)),
             ("pre_gelu", lambda: torch.nn.TransformerEncoderLayer(16, 2, 24, dropout=0.1, activation="gelu", batch_first=True,
                                                                   norm_first=True, layer_norm_eps=1e-6)),
             ("mha", lambda: SelfAttention()), ("mha_nobias", lambda: SelfAttention(bias=False)), ("mha_masked", lambda: MaskedAttention())]
for name, make in attention:
    torch.manual_seed(7)
    m = make().eval()
    randomize(m)
    trace = torch.randn(2, 5, 16, generator=torch.Generator().manual_seed(8))
    x = torch.randn(3, 7, 16, generator=torch.Generator().manual_seed(9))
    y = m(x).detach()  # with gradients on: torch's eager fast path (which fails without biases in 1.13) is not taken
    torch.onnx.export(m, trace, os.path.join(out, f"attn_{name}.onnx"), opset_version=17, input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "batch", 1: "time"}, "y": {0: "batch", 1: "time"}})
    np.save(os.path.join(out, f"attn_{name}_input.npy"), x.numpy())
    np.save(os.path.join(out, f"attn_{name}_output.npy"), y.numpy())
    print(f"attn_{name}.onnx written")
torch.manual_seed(7)
torch.onnx.export(PaddedAttention().eval(), (torch.randn(2, 5, 16), torch.zeros(2, 5, dtype=torch.bool)), os.path.join(out, "attn_mha_padded.onnx"),
                  opset_version=17, input_names=["x", "pad"], output_names=["y"],
                  dynamic_axes={"x": {0: "batch", 1: "time"}, "pad": {0: "batch", 1: "time"}, "y": {0: "batch", 1: "time"}})
print("attn_mha_padded.onnx written")
# cross-attention: the queries from x, the keys and values from y (their in-projections sliced from
# in_proj_weight): traced at lengths 5 and 4, run at 7 and 6
torch.manual_seed(7)
cross = CrossAttention().eval()
randomize(cross)
x, y = torch.randn(3, 7, 16, generator=torch.Generator().manual_seed(10)), torch.randn(3, 6, 16, generator=torch.Generator().manual_seed(11))
z = cross(x, y).detach()
torch.onnx.export(cross, (torch.randn(2, 5, 16), torch.randn(2, 4, 16)), os.path.join(out, "attn_mha_cross.onnx"),
                  opset_version=17, input_names=["x", "y"], output_names=["z"],
                  dynamic_axes={"x": {0: "batch", 1: "time"}, "y": {0: "batch", 1: "time2"}, "z": {0: "batch", 1: "time"}})
np.save(os.path.join(out, "attn_mha_cross_input.npy"), x.numpy())
np.save(os.path.join(out, "attn_mha_cross_input2.npy"), y.numpy())
np.save(os.path.join(out, "attn_mha_cross_output.npy"), z.numpy())
print("attn_mha_cross.onnx written")
