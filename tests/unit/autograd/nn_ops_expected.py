# Prints the PyTorch values hard-coded in nn_ops_test.cpp. Run with Debian's torch 1.13:
#   /usr/bin/python3 tests/unit/autograd/nn_ops_expected.py
# Inputs are generated the same way on both sides: wave(shape, a, b) = sin(arange(n) * a + b)
# in float64, reshaped (see the C++ helper of the same name).
import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)


def wave(shape, a, b):
    n = 1
    for s in shape:
        n *= s
    return torch.sin(torch.arange(n, dtype=torch.float64) * a + b).reshape(shape)


def proj(y):
    # sum(y * wave(y.shape, 0.7, 0.0)): one number that depends on every element
    return float((y * wave(tuple(y.shape), 0.7, 0.0)).sum())


def emit(name, t):
    t = t.detach().reshape(-1)
    vals = ", ".join(repr(float(v)) for v in t)
    print(f"// {name}\nconst std::vector<double> {name} = {{{vals}}};")


def emit_scalar(name, v):
    print(f"constexpr double {name} = {float(v)!r};")


def emit_shape(name, t):
    print(f"// {name}: {tuple(t.shape)}")


# conv2d: small full case
x = wave((1, 2, 4, 4), 0.37, 0.1); w = wave((3, 2, 3, 3), 0.53, 0.2); b = wave((3,), 0.91, 0.3)
emit("kConv2dBasic", F.conv2d(x, w, b, stride=1, padding=1))
# conv2d: groups, stride, padding, dilation
x = wave((2, 4, 6, 5), 0.37, 0.1); w = wave((6, 2, 3, 2), 0.53, 0.2); b = wave((6,), 0.91, 0.3)
y = F.conv2d(x, w, b, stride=(2, 1), padding=(1, 0), dilation=(1, 2), groups=2)
emit_shape("conv2d complex", y); emit_scalar("kConv2dComplexProj", proj(y))
# conv2d: padding="same" with an even kernel and dilation (asymmetric padding)
x = wave((1, 2, 5, 6), 0.37, 0.1); w = wave((2, 2, 4, 3), 0.53, 0.2)
y = F.conv2d(x, w, None, padding="same", dilation=(1, 2))
emit_shape("conv2d same", y); emit_scalar("kConv2dSameProj", proj(y))
# conv1d
x = wave((2, 3, 7), 0.37, 0.1); w = wave((4, 3, 3), 0.53, 0.2); b = wave((4,), 0.91, 0.3)
emit("kConv1d", F.conv1d(x, w, b, stride=2, padding=1))
# conv_transpose2d
x = wave((1, 4, 3, 3), 0.37, 0.1); w = wave((4, 2, 3, 3), 0.53, 0.2); b = wave((4,), 0.91, 0.3)
y = F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1, groups=2)
emit_shape("conv_transpose2d", y); emit_scalar("kConvT2dProj", proj(y))
y = F.conv_transpose2d(x, w[:, :, :2, :], None, stride=(1, 2), padding=(0, 1), dilation=(2, 1), groups=1)
emit_shape("conv_transpose2d b", y); emit_scalar("kConvT2dProjB", proj(y))

# max_pool2d with ties: floor(2 * wave) has many equal values
x = torch.floor(wave((1, 2, 5, 5), 0.37, 0.1) * 2).requires_grad_()
y, idx = F.max_pool2d(x, 3, stride=2, padding=1, return_indices=True)
emit("kMaxPool", y); emit("kMaxPoolIdx", idx.double())
y.backward(torch.ones_like(y)); emit("kMaxPoolGrad", x.grad)
x = wave((1, 1, 6, 7), 0.37, 0.1)
y = F.max_pool2d(x, (2, 3), stride=(2, 2), padding=(1, 1), dilation=(2, 1), ceil_mode=True)
emit_shape("max_pool dil ceil", y); emit_scalar("kMaxPoolDilCeilProj", proj(y))
# avg_pool2d
x = wave((1, 2, 5, 5), 0.37, 0.1)
emit("kAvgPool", F.avg_pool2d(x, 3, stride=2, padding=1))
emit("kAvgPoolNoPadCount", F.avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=False))
y = F.avg_pool2d(x, (3, 2), stride=(2, 2), padding=(1, 1), ceil_mode=True)
emit_shape("avg ceil", y); emit("kAvgPoolCeil", y)

# batch_norm, training: statistics and running-stat update
x = wave((4, 3, 2, 2), 0.37, 0.1) * 2 + 0.5
rm = wave((3,), 0.3, 0.0); rv = 1 + wave((3,), 0.5, 0.2) ** 2
w = wave((3,), 0.91, 0.3); b = wave((3,), 0.2, 0.4)
y = F.batch_norm(x, rm, rv, w, b, training=True, momentum=0.1, eps=1e-5)
emit_scalar("kBatchNormTrainProj", proj(y)); emit("kBatchNormRunMean", rm); emit("kBatchNormRunVar", rv)
y = F.batch_norm(x, rm, rv, w, b, training=False, eps=1e-5)
emit_scalar("kBatchNormEvalProj", proj(y))
# layer_norm
x = wave((2, 3, 4), 0.37, 0.1) * 3
y = F.layer_norm(x, (3, 4), wave((3, 4), 0.91, 0.3), wave((3, 4), 0.2, 0.4), eps=1e-5)
emit_scalar("kLayerNormProj", proj(y))

# embedding: gradient accumulates over repeats; padding_idx=2 gets none
wt = wave((5, 3), 0.37, 0.1).requires_grad_()
ids = torch.tensor([[0, 2, 0], [4, 2, 1]])
y = F.embedding(ids, wt, padding_idx=2)
y.backward(wave((2, 3, 3), 0.7, 0.0)); emit("kEmbeddingGrad", wt.grad)

# cross_entropy / nll_loss
logits = wave((4, 5), 0.37, 0.1) * 3
tgt = torch.tensor([1, 2, 4, 0])
cw = 0.5 + wave((5,), 0.91, 0.3) ** 2
emit_scalar("kCeMean", F.cross_entropy(logits, tgt))
emit_scalar("kCeSum", F.cross_entropy(logits, tgt, reduction="sum"))
emit("kCeNone", F.cross_entropy(logits, tgt, reduction="none"))
emit_scalar("kCeIgnore", F.cross_entropy(logits, tgt, ignore_index=2))
emit_scalar("kCeWeightIgnore", F.cross_entropy(logits, tgt, weight=cw, ignore_index=2))
emit_scalar("kCeSmooth", F.cross_entropy(logits, tgt, label_smoothing=0.1))
emit_scalar("kCeSmoothIgnore", F.cross_entropy(logits, tgt, ignore_index=2, label_smoothing=0.2))
emit_scalar("kCeSmoothWeightIgnore", F.cross_entropy(logits, tgt, weight=cw, ignore_index=2, label_smoothing=0.2))
emit("kCeSmoothWeightIgnoreNone",
     F.cross_entropy(logits, tgt, weight=cw, ignore_index=2, label_smoothing=0.2, reduction="none"))
emit_scalar("kCeSmoothWeightIgnoreSum",
            F.cross_entropy(logits, tgt, weight=cw, ignore_index=2, label_smoothing=0.2, reduction="sum"))
# (N, C, d) logits
logits3 = wave((2, 4, 3), 0.37, 0.1) * 2
tgt3 = torch.tensor([[0, 3, 1], [2, 2, 3]])
emit_scalar("kCe3d", F.cross_entropy(logits3, tgt3, ignore_index=3, label_smoothing=0.1))
# probability targets
probs = torch.softmax(wave((4, 5), 0.53, 0.2) * 2, 1)
emit_scalar("kCeProbs", F.cross_entropy(logits, probs, weight=cw, label_smoothing=0.1))
lp = torch.log_softmax(logits, 1)
emit_scalar("kNllWeight", F.nll_loss(lp, tgt, weight=cw))
emit("kNllNone", F.nll_loss(lp, tgt, weight=cw, reduction="none", ignore_index=4))

# binary_cross_entropy_with_logits
xl = wave((3, 4), 0.37, 0.1) * 4
yt = (wave((3, 4), 0.53, 0.2) > 0).double() * 0.8 + 0.1
pw = 1.5 + wave((4,), 0.91, 0.3)
bw = 1 + 0.5 * wave((3, 4), 0.2, 0.4)
emit_scalar("kBceMean", F.binary_cross_entropy_with_logits(xl, yt))
emit("kBcePosWeightNone", F.binary_cross_entropy_with_logits(xl, yt, weight=bw, pos_weight=pw, reduction="none"))
emit_scalar("kBceLarge", F.binary_cross_entropy_with_logits(torch.tensor([-300.0, 300.0, 40.0]), torch.tensor([1.0, 0.0, 1.0]), reduction="sum"))


# scaled dot-product attention: softmax(q k^T * scale + mask) v
def sdpa(q, k, v, mask=None, causal=False, scale=None):
    s = (q @ k.transpose(-1, -2)) * (scale if scale is not None else 1 / q.shape[-1] ** 0.5)
    if causal:
        keep = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()
        s = s.masked_fill(~keep, float("-inf"))
    elif mask is not None:
        s = s.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else s + mask
    return torch.softmax(s, -1) @ v


q = wave((2, 3, 4), 0.37, 0.1); k = wave((2, 5, 4), 0.53, 0.2); v = wave((2, 5, 2), 0.91, 0.3)
emit("kSdpa", sdpa(q, k, v))
bmask = wave((3, 5), 0.7, 0.5) > -0.3
emit_scalar("kSdpaBoolProj", proj(sdpa(q, k, v, mask=bmask)))
emit_scalar("kSdpaFloatProj", proj(sdpa(q, k, v, mask=wave((2, 1, 5), 0.3, 0.0), scale=0.3)))
emit_scalar("kSdpaCausalProj", proj(sdpa(q, k, v, causal=True)))
