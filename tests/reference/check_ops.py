#!/usr/bin/python3
"""Replays every case written by loom_opcheck in PyTorch (NumPy where the question is NumPy's
semantics) and compares outputs and gradients with Loom's.

Usage: /usr/bin/python3 tests/reference/check_ops.py OUTDIR [--only OP,OP,...]

Run it with /usr/bin/python3: the reference is Debian 12's python3-torch (1.13) and
python3-numpy (1.24), which only that interpreter imports. See docs/testing.md. Under torch 2
(tests/reference/pytorch2.sh, the ctest reference_pytorch2, with --only) the ops that torch 1.13
lacks replay through torch's own functions: F.scaled_dot_product_attention and F.rms_norm.

For each case: the output's shape and dtype must equal the reference's exactly; values must be
within the tolerance of the op's category for the output's dtype (integers and bools exactly).
For cases with differentiable inputs, the reference computes the vector-Jacobian product with
the same cotangent (torch.autograd.grad, or an explicit NumPy scatter for indexing ops), and
Loom's gradients must match in shape, dtype and value. Prints one line per op and a final line
"N passed, M failed" (counting cases); exits 1 on any failure.
"""
import json
import math
import os
import sys
import warnings
from functools import reduce

import numpy as np
import torch
import torch.nn.functional as F

torch.set_num_threads(2)
np.seterr(all="ignore")  # special-value cases (nan, inf) are intended
warnings.filterwarnings("ignore")  # e.g. torch's note on padding="same" with even kernels

# ---------------------------------------------------------------- tolerances
# (rtol, atol) per op category and dtype; |loom - ref| <= atol + rtol * |ref|.
TOLERANCES = {
    "exact": {"float32": (1e-5, 1e-6), "float64": (1e-12, 1e-14)},
    "transcendental": {"float32": (1e-5, 1e-6), "float64": (1e-10, 1e-12)},
    "reduction": {"float32": (1e-4, 1e-5), "float64": (1e-10, 1e-12)},
    # LAPACK factorizations: different algorithms (Loom: gesdd/syevd/gelsd) round differently,
    # and gradients divide by gaps between singular values / eigenvalues
    "decomposition": {"float32": (1e-3, 1e-4), "float64": (1e-8, 1e-10)},
}
DECOMPOSITION = {
    "linalg.svd", "linalg.svdvals", "linalg.qr", "linalg.eigh", "linalg.eigvalsh", "linalg.cholesky", "linalg.solve",
    "linalg.inv", "linalg.det", "linalg.slogdet", "linalg.lstsq", "linalg.norm",
}
TRANSCENDENTAL = {
    "divide", "power", "exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid",
    "erf", "elu", "gelu", "softplus", "lstm_cell", "silu", "rotary_embedding",
}
REDUCTION = {
    "sum", "mean", "prod", "var", "std", "logsumexp", "cumsum", "softmax", "log_softmax", "matmul", "linear", "dot",
    "outer", "tensordot", "conv1d", "conv2d", "conv2d_transpose", "avg_pool2d", "global_avg_pool2d",
    "batch_norm", "layer_norm", "rms_norm", "cross_entropy", "nll_loss", "binary_cross_entropy_with_logits",
    "scaled_dot_product_attention", "einsum", "kron", "sparse.mm",
}


def category(op):
    if op in DECOMPOSITION:
        return "decomposition"
    if op in REDUCTION:
        return "reduction"
    if op in TRANSCENDENTAL:
        return "transcendental"
    return "exact"


def tolerance(op, dtype, grad):
    cat = category(op)
    # gradients compose several primitives (and sums over broadcast axes): at least the
    # transcendental tolerance
    if grad and cat == "exact":
        cat = "transcendental"
    return TOLERANCES[cat][dtype]


# ---------------------------------------------------------------- helpers
TORCH_DT = {
    "bool": torch.bool, "uint8": torch.uint8, "int32": torch.int32, "int64": torch.int64,
    "float32": torch.float32, "float64": torch.float64,
}


def np_dtype(t):
    return np.dtype(str(t.dtype).replace("torch.", ""))


def promote(*ts):
    """NumPy's promotion of the operands' dtypes (numpy.promote_types), applied in torch."""
    dt = reduce(np.promote_types, [np_dtype(t) for t in ts])
    return [t.to(TORCH_DT[dt.name]) for t in ts]


def fl(x):
    """Loom computes float functions of integer/bool input in float32 (documented deviation)."""
    return x if x.is_floating_point() else x.to(torch.float32)


def dims(attrs, ndim):
    axes = attrs.get("axes", [])
    return [a % ndim for a in axes] if axes else list(range(ndim))


def sum_to(g, shape):
    g = np.asarray(g)
    lead = g.ndim - len(shape)
    if lead:
        g = g.sum(axis=tuple(range(lead)))
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[i] != 1)
    if axes:
        g = g.sum(axis=axes, keepdims=True)
    return g.reshape(shape)


class NP:
    """A result computed (at least in part) outside torch autograd.

    out: the expected output (NumPy array). grads: {input index: expected gradient}, or None to
    take the gradients from torch autograd of `torch_out`."""

    def __init__(self, out, grads=None, torch_out=None):
        self.out = np.asarray(out)
        self.grads = grads
        self.torch_out = torch_out


def arr(t):
    return t.detach().numpy()


# ---------------------------------------------------------------- replays
# Each replay gets (xs, attrs, cot): xs are torch tensors (differentiable inputs require grad),
# cot is the NumPy cotangent (None without differentiable inputs). It returns a torch tensor
# (output and gradients from torch) or an NP.
#
# An op replays by its name unless R holds a line of its own (replay_of): torch.<name> (for
# "linalg.x", torch.linalg.x) on its operands promoted as NumPy promotes them, with the case's
# attrs as keyword arguments; numpy.<name> where torch has no such function (values only, so a
# differentiable op needs torch's). R holds only the ops whose PyTorch spelling, arguments or
# semantics differ from Loom's.
R = {}


def _attribute(module, dotted):
    """module.a.b for "a.b"; None when there is no such function."""
    for part in dotted.split("."):
        module = getattr(module, part, None)
        if module is None:
            return None
    return module if callable(module) else None


def by_name(op):
    """The replay of `op` by its name (above), or None when neither torch nor numpy has it."""
    def args(xs, attrs):
        picked = [xs[k] for k in attrs["operands"]] if "operands" in attrs else list(xs)
        keywords = {k: v for k, v in attrs.items() if k != "operands" and not k.startswith("_")}
        return picked, keywords

    fn = _attribute(torch, op)
    if fn is not None:
        def replay_torch(xs, attrs, cot):
            picked, keywords = args(xs, attrs)
            return fn(*(promote(*picked) if picked else []), **keywords)
        return replay_torch
    fn = _attribute(np, op)
    if fn is not None:
        def replay_numpy(xs, attrs, cot):
            picked, keywords = args(xs, attrs)
            return NP(fn(*[arr(x) for x in picked], **keywords))
        return replay_numpy
    return None


def replay_of(op):
    """The op's replay: its line in R, or by its name; None when it has neither."""
    return R.get(op) or by_name(op)


def replay(*names):
    def deco(f):
        for n in names:
            R[n] = f
        return f
    return deco


def operands(xs, attrs):
    """The two operands; attrs "operands" names input indices when one tensor is used twice."""
    k = attrs.get("operands", [0, 1])
    return xs[k[0]], xs[k[1]]


def binary_torch(fn):
    return lambda xs, attrs, cot: fn(*promote(*operands(xs, attrs)))


# add, subtract, multiply, maximum and minimum (ties: gradient split 0.5/0.5, as Loom's) replay
# by their names
R["power"] = binary_torch(torch.pow)


@replay("divide")
def _divide(xs, attrs, cot):
    a, b = promote(*operands(xs, attrs))
    if not a.is_floating_point():  # NumPy: true division of integers gives float64
        a, b = a.double(), b.double()
    return torch.div(a, b)


@replay("mod")
def _mod(xs, attrs, cot):
    # NumPy's mod (sign of the divisor) for the values; torch.remainder for the gradients
    a, b = promote(*operands(xs, attrs))
    return NP(np.mod(arr(a), arr(b)), torch_out=torch.remainder(a, b) if a.is_floating_point() else None)


@replay("floor_divide")
def _floor_divide(xs, attrs, cot):
    a, b = promote(*operands(xs, attrs))
    return NP(np.floor_divide(arr(a), arr(b)))


for _name in ["equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
              "logical_and", "logical_or", "logical_xor"]:
    R[_name] = (lambda f: lambda xs, attrs, cot: NP(f(arr(xs[0]), arr(xs[1]))))(getattr(np, _name))
R["logical_not"] = lambda xs, attrs, cot: NP(np.logical_not(arr(xs[0])))


@replay("where")
def _where(xs, attrs, cot):
    c = xs[0] if xs[0].dtype == torch.bool else xs[0] != 0
    a, b = promote(xs[1], xs[2])
    return torch.where(c, a, b)


@replay("clip")
def _clip(xs, attrs, cot):
    return torch.clamp(xs[0], min=attrs["lo"], max=attrs["hi"])


def unary(fn, float_fn=True):
    return lambda xs, attrs, cot: fn(fl(xs[0]) if float_fn else xs[0])


# abs, negative and relu replay by their names (integers stay integers, as in Loom); so do exp,
# log, log1p, expm1, sqrt, rsqrt, sin, cos, tanh, sigmoid and erf, whose torch functions compute
# integer and bool input in float32, Loom's documented deviation from NumPy (fl)
# numpy.sign: sign(nan) is nan (torch.sign gives 0)
R["sign"] = lambda xs, attrs, cot: NP(np.sign(arr(xs[0])) if xs[0].dtype != torch.bool else arr(xs[0]).copy())
R["square"] = unary(lambda x: x * x, False)
R["leaky_relu"] = lambda xs, attrs, cot: F.leaky_relu(fl(xs[0]), attrs["negative_slope"])
R["elu"] = lambda xs, attrs, cot: F.elu(fl(xs[0]), attrs["alpha"])
R["gelu"] = lambda xs, attrs, cot: F.gelu(fl(xs[0]), approximate=attrs["approximate"])
R["silu"] = lambda xs, attrs, cot: F.silu(fl(xs[0]))
R["softplus"] = lambda xs, attrs, cot: F.softplus(fl(xs[0]), attrs["beta"], attrs["threshold"])
for _name in ["floor", "ceil", "round"]:
    # integer input: returned unchanged (NumPy keeps the dtype)
    R[_name] = (lambda f: lambda xs, attrs, cot: f(xs[0]) if xs[0].is_floating_point() else xs[0].clone())(
        getattr(torch, _name))
R["astype"] = lambda xs, attrs, cot: xs[0].to(TORCH_DT[attrs["dtype"]])


# reductions
@replay("sum")
def _sum(xs, attrs, cot):
    x = xs[0]
    return torch.sum(x, dim=dims(attrs, x.ndim), keepdim=attrs["keepdims"]) if x.ndim else torch.sum(x)


@replay("mean")
def _mean(xs, attrs, cot):
    x = xs[0] if xs[0].is_floating_point() else xs[0].double()  # NumPy: mean of ints is float64
    return torch.mean(x, dim=dims(attrs, x.ndim), keepdim=attrs["keepdims"]) if x.ndim else x.clone()


@replay("prod")
def _prod(xs, attrs, cot):
    x = xs[0]
    if x.ndim == 0:
        return torch.prod(x)
    d = dims(attrs, x.ndim)
    y = x
    for a in sorted(d, reverse=True):
        y = torch.prod(y, a, keepdim=True)
    if not attrs["keepdims"]:
        y = y.reshape([n for i, n in enumerate(x.shape) if i not in d])
    return y


def _make_extremum(f):
    def g(xs, attrs, cot):
        x = xs[0]
        if x.ndim == 0:
            return x.clone()
        return f(x, dim=dims(attrs, x.ndim), keepdim=attrs["keepdims"])  # ties: split equally
    return g


R["max"] = _make_extremum(torch.amax)
R["min"] = _make_extremum(torch.amin)


def _make_var(take_sqrt):
    def g(xs, attrs, cot):
        x = xs[0] if xs[0].is_floating_point() else xs[0].double()
        ddof = attrs["ddof"]
        # torch.std, not sqrt(var): its gradient is 0 at zero variance (sqrt's would be NaN);
        # a 0-d input as the one-element vector (torch's 0-d std would take sqrt's NaN there)
        f = torch.std if take_sqrt else torch.var
        if x.ndim == 0:
            return f(x.reshape(1), dim=0, unbiased=bool(ddof), keepdim=False)
        return f(x, dim=dims(attrs, x.ndim), unbiased=bool(ddof), keepdim=attrs["keepdims"])
    return g


R["var"] = _make_var(False)
R["std"] = _make_var(True)


@replay("logsumexp")
def _logsumexp(xs, attrs, cot):
    x = fl(xs[0])
    if x.ndim == 0:
        return torch.logsumexp(x.reshape(1), 0).reshape(())
    return torch.logsumexp(x, dim=dims(attrs, x.ndim), keepdim=attrs["keepdims"])


def _np_axes(attrs):
    return tuple(attrs["axes"]) if attrs["axes"] else None


R["all"] = lambda xs, attrs, cot: NP(np.all(arr(xs[0]), axis=_np_axes(attrs), keepdims=attrs["keepdims"]))
R["any"] = lambda xs, attrs, cot: NP(np.any(arr(xs[0]), axis=_np_axes(attrs), keepdims=attrs["keepdims"]))
R["argmax"] = lambda xs, attrs, cot: NP(np.argmax(arr(xs[0]), axis=attrs["axis"], keepdims=attrs["keepdims"]))
R["argmin"] = lambda xs, attrs, cot: NP(np.argmin(arr(xs[0]), axis=attrs["axis"], keepdims=attrs["keepdims"]))
R["cumsum"] = lambda xs, attrs, cot: torch.cumsum(xs[0], attrs["axis"])
R["softmax"] = lambda xs, attrs, cot: torch.softmax(fl(xs[0]), attrs["axis"])
R["log_softmax"] = lambda xs, attrs, cot: torch.log_softmax(fl(xs[0]), attrs["axis"])


# linear algebra
@replay("matmul")
def _matmul(xs, attrs, cot):
    if attrs.get("x_xt"):
        return torch.matmul(xs[0], xs[0].T)
    a, b = promote(xs[0], xs[1])
    if not a.is_floating_point():
        return NP(np.matmul(arr(a), arr(b)))
    return torch.matmul(a, b)


@replay("linear")
def _linear(xs, attrs, cot):
    return torch.matmul(xs[0], xs[1]) + xs[2]


@replay("sparse.mm")
def _sparse_mm(xs, attrs, cot):
    # torch.sparse.mm of the uncoalesced COO tensor: duplicates add up, and each stored value
    # gets the gradient g[row] . dense[col]
    v, d = promote(xs[2], xs[3])
    s = torch.sparse_coo_tensor(torch.stack([xs[0].long(), xs[1].long()]), v, (attrs["m"], attrs["k"]))
    return torch.sparse.mm(s, d)


@replay("dot")
def _dot(xs, attrs, cot):
    a, b = promote(xs[0], xs[1])
    if a.ndim == 0 or b.ndim == 0:
        return a * b
    if a.ndim <= 2 and b.ndim <= 2:
        return torch.matmul(a, b)
    return torch.tensordot(a, b, dims=([a.ndim - 1], [b.ndim - 2 if b.ndim >= 2 else 0]))


@replay("outer")
def _outer(xs, attrs, cot):
    a, b = promote(xs[0], xs[1])
    return torch.outer(a.flatten(), b.flatten())


@replay("tensordot")
def _tensordot(xs, attrs, cot):
    a, b = promote(xs[0], xs[1])
    if "axes" in attrs:
        return torch.tensordot(a, b, dims=attrs["axes"])
    return torch.tensordot(a, b, dims=([x % a.ndim for x in attrs["axes_a"]], [x % b.ndim for x in attrs["axes_b"]]))


# torch.linalg (tests/reference/op_cases.cpp: gauge-fixed outputs, operands built in the case)
def _flat_cat(ts):
    return torch.cat([t.reshape(-1) for t in ts])


def _first_row_sign(v):
    return torch.sign(v[..., 0:1, :]).detach()


def _shift(x, c):
    return x + c * torch.eye(x.shape[-1], dtype=x.dtype)


def _spd(x):
    return _shift(x @ x.mT, float(x.shape[-1]))


@replay("linalg.svd")
def _svd(xs, attrs, cot):
    if attrs.get("full"):
        U, S, Vh = torch.linalg.svd(xs[0], full_matrices=True)
        s = _first_row_sign(U)
        return _flat_cat([U.mT @ U, S, Vh * s[..., :, :Vh.shape[-2]].mT])
    U, S, Vh = torch.linalg.svd(xs[0], full_matrices=False)
    s = _first_row_sign(U)
    return _flat_cat([U * s, S, Vh * s.mT])


R["linalg.svdvals"] = lambda xs, attrs, cot: torch.linalg.svdvals(xs[0])


@replay("linalg.qr")
def _qr(xs, attrs, cot):
    Q, Rm = torch.linalg.qr(xs[0])
    s = _first_row_sign(Q)
    return _flat_cat([Q * s, Rm * s.mT])


@replay("linalg.eigh")
def _eigh(xs, attrs, cot):
    if "uplo" in attrs:
        w, V = torch.linalg.eigh(xs[0], UPLO=attrs["uplo"])
    else:
        w, V = torch.linalg.eigh(xs[0] + xs[0].mT)
    return _flat_cat([w, V * _first_row_sign(V)])


R["linalg.eigvalsh"] = lambda xs, attrs, cot: torch.linalg.eigvalsh(xs[0] + xs[0].mT)
R["linalg.cholesky"] = lambda xs, attrs, cot: torch.linalg.cholesky(_spd(xs[0]), upper=attrs.get("upper", False))


@replay("linalg.solve")
def _solve(xs, attrs, cot):
    a, b = promote(_shift(xs[0], attrs["shift"]), xs[1])  # the case shifts a in its own dtype
    return torch.linalg.solve(a, b)


R["linalg.inv"] = lambda xs, attrs, cot: torch.linalg.inv(_shift(xs[0], attrs["shift"]))
R["linalg.det"] = lambda xs, attrs, cot: torch.linalg.det(xs[0])


@replay("linalg.slogdet")
def _slogdet(xs, attrs, cot):
    sign, logabs = torch.linalg.slogdet(xs[0])
    return _flat_cat([sign, logabs])


@replay("linalg.lstsq")
def _lstsq(xs, attrs, cot):
    a, b = xs
    vector = b.ndim == 1 or b.shape == a.shape[:-1]
    if vector:  # torch 1.13's lstsq takes matrices only
        b = b.unsqueeze(-1)
    x = torch.linalg.lstsq(a, b, driver="gelsd").solution
    return x.squeeze(-1) if vector else x


@replay("linalg.norm")
def _norm(xs, attrs, cot):
    ord_ = attrs["ord"]
    if isinstance(ord_, str) and ord_ in ("inf", "-inf"):
        ord_ = float(ord_)
    return torch.linalg.norm(xs[0], ord=ord_, dim=attrs["axes"], keepdim=attrs["keepdims"])


R["einsum"] = lambda xs, attrs, cot: torch.einsum(attrs["subscripts"], *xs)
R["kron"] = lambda xs, attrs, cot: torch.kron(*promote(xs[0], xs[1]))


# manipulation
R["reshape"] = lambda xs, attrs, cot: xs[0].reshape(attrs["shape"])


@replay("transpose")
def _transpose(xs, attrs, cot):
    x = xs[0]
    if x.ndim == 0:
        return x.clone()
    perm = [a % x.ndim for a in attrs["axes"]] if attrs["axes"] else list(reversed(range(x.ndim)))
    return x.permute(perm)


@replay("squeeze")
def _squeeze(xs, attrs, cot):
    x = xs[0]
    shape = np.squeeze(np.empty(tuple(x.shape)), axis=tuple(attrs["axes"]) if attrs["axes"] else None).shape
    return x.reshape(shape)


R["expand_dims"] = lambda xs, attrs, cot: torch.unsqueeze(xs[0], attrs["axis"])
R["broadcast_to"] = lambda xs, attrs, cot: torch.broadcast_to(xs[0], attrs["shape"])


def _select_range(x, axis, sl):
    """x[..., sl, ...] on `axis` with Python slice semantics (torch has no negative steps)."""
    axis %= x.ndim
    idx = np.arange(x.shape[axis])[sl]
    # a copy: a one-element slice with a negative step stays a negative-stride view otherwise
    return torch.index_select(x, axis, torch.from_numpy(np.array(idx, dtype=np.int64)))


@replay("slice")
def _slice(xs, attrs, cot):
    return _select_range(xs[0], attrs["axis"], slice(attrs["start"], attrs["stop"], attrs["step"]))


R["concatenate"] = lambda xs, attrs, cot: torch.cat(promote(*xs), attrs["axis"])
R["stack"] = lambda xs, attrs, cot: torch.stack(promote(*xs), attrs["axis"])


@replay("split")
def _split(xs, attrs, cot):
    x = xs[0]
    axis = attrs["axis"] % x.ndim
    n = x.shape[axis]
    if "sections" in attrs:
        s = attrs["sections"]
        indices = [n // s * i for i in range(1, s)]
    else:
        indices = attrs["indices"]
    div = [0] + list(indices) + [n]  # numpy.split: part k is x[div[k]:div[k+1]]
    k = attrs["part"]
    return _select_range(x, axis, slice(div[k], div[k + 1]))


@replay("pad")
def _pad(xs, attrs, cot):
    pw = attrs["pad_width"]
    pairs = [(pw[2 * i], pw[2 * i + 1]) for i in range(len(pw) // 2)]
    flat = []
    for b, a in reversed(pairs):  # F.pad starts from the last axis
        flat += [b, a]
    x = xs[0]
    if x.numel() == 0:  # torch 1.13's constant pad refuses some empty inputs; all padding then
        shape = [n + b + a for n, (b, a) in zip(x.shape, pairs)]
        return torch.full(shape, attrs["value"], dtype=x.dtype) + x.sum() * 0  # (zero gradient)
    return F.pad(x, flat, mode="constant", value=attrs["value"])


R["tile"] = lambda xs, attrs, cot: torch.tile(xs[0], attrs["reps"])


@replay("repeat")
def _repeat(xs, attrs, cot):
    if attrs["axis"] is None:
        return torch.repeat_interleave(xs[0].flatten(), attrs["repeats"])
    return torch.repeat_interleave(xs[0], attrs["repeats"], dim=attrs["axis"])


@replay("flip")
def _flip(xs, attrs, cot):
    x = xs[0]
    if x.ndim == 0:
        return x.clone()
    return torch.flip(x, dims(attrs, x.ndim))


# indexing: NumPy is the reference (advanced-index placement, masks, negative steps);
# gradients are the scatter-add of the cotangent onto the read positions.
def np_index(spec, xs):
    out = []
    for it in spec:
        k = it["kind"]
        if k == "int":
            out.append(it["value"])
        elif k == "slice":
            out.append(slice(it["start"], it["stop"], it["step"]))
        elif k == "ellipsis":
            out.append(Ellipsis)
        elif k == "newaxis":
            out.append(None)
        else:
            out.append(arr(xs[it["input"]]))
    return tuple(out)


def positions(x, reader):
    """The flat positions in x that `reader` (a function of an array shaped like x) reads."""
    return np.asarray(reader(np.arange(x.numel(), dtype=np.int64).reshape(tuple(x.shape))))


def scatter_grad(x, pos, cot):
    g = np.zeros(x.numel(), dtype=np.float64)
    np.add.at(g, pos.ravel(), np.asarray(cot, dtype=np.float64).ravel())
    return g.reshape(tuple(x.shape)).astype(np_dtype(x))


def gather_reader_result(xs, cot, reader):
    x = xs[0]
    out = reader(arr(x))
    grads = {0: scatter_grad(x, positions(x, reader), cot)} if x.requires_grad else {}
    return NP(np.array(out, copy=True), grads)


@replay("index")
def _index(xs, attrs, cot):
    idx = np_index(attrs["index"], xs)
    return gather_reader_result(xs, cot, lambda a: a[idx])


@replay("take")
def _take(xs, attrs, cot):
    i = arr(xs[1])
    return gather_reader_result(xs, cot, lambda a: np.take(a, i, axis=attrs["axis"]))


@replay("take_along_axis")
def _take_along_axis(xs, attrs, cot):
    i = arr(xs[1])
    return gather_reader_result(xs, cot, lambda a: np.take_along_axis(a, i, axis=attrs["axis"]))


@replay("scatter_add")
def _scatter_add(xs, attrs, cot):
    x, idx, src = xs
    src = src[tuple(slice(0, n) for n in idx.shape)]  # only the part of src the indices cover
    return torch.scatter_add(x, attrs["axis"], idx.long(), src.to(x.dtype))


@replay("index_put")
def _index_put(xs, attrs, cot):
    x = xs[0]
    v = xs[attrs["values"]]
    idx = np_index(attrs["index"], xs)
    pos = positions(x, lambda a: a[idx])
    out = arr(x).copy()
    flat = out.reshape(-1)
    vals = np.broadcast_to(arr(v).astype(out.dtype), pos.shape).ravel()
    if attrs["accumulate"]:
        np.add.at(flat, pos.ravel(), vals)
    else:
        flat[pos.ravel()] = vals
    grads = {}
    if cot is not None:
        if x.requires_grad:
            gx = np.array(cot, copy=True)
            if not attrs["accumulate"]:
                gx.reshape(-1)[pos.ravel()] = 0
            grads[0] = gx.astype(np_dtype(x))
        if v.requires_grad:
            gv = np.asarray(cot).reshape(-1)[pos.ravel()].reshape(pos.shape).astype(np.float64)
            grads[attrs["values"]] = sum_to(gv, tuple(v.shape)).astype(np_dtype(v))
    return NP(out, grads)


# neural-network ops: torch.nn.functional
def _bias(xs):
    return xs[2] if len(xs) == 3 else None


def _pad_arg(p):
    return p if isinstance(p, str) else tuple(p)


R["conv1d"] = lambda xs, a, cot: F.conv1d(xs[0], xs[1], _bias(xs), tuple(a["stride"]), _pad_arg(a["padding"]),
                                          tuple(a["dilation"]), a["groups"])
R["conv2d"] = lambda xs, a, cot: F.conv2d(xs[0], xs[1], _bias(xs), tuple(a["stride"]), _pad_arg(a["padding"]),
                                          tuple(a["dilation"]), a["groups"])
R["conv2d_transpose"] = lambda xs, a, cot: F.conv_transpose2d(
    xs[0], xs[1], _bias(xs), tuple(a["stride"]), tuple(a["padding"]), tuple(a["output_padding"]), a["groups"],
    tuple(a["dilation"]))
R["max_pool2d"] = lambda xs, a, cot: F.max_pool2d(xs[0], tuple(a["kernel_size"]), tuple(a["stride"]) or None,
                                                  tuple(a["padding"]), tuple(a["dilation"]), a["ceil_mode"])
R["avg_pool2d"] = lambda xs, a, cot: F.avg_pool2d(xs[0], tuple(a["kernel_size"]), tuple(a["stride"]) or None,
                                                  tuple(a["padding"]), a["ceil_mode"], a["count_include_pad"],
                                                  a["divisor_override"] or None)
R["global_avg_pool2d"] = lambda xs, a, cot: F.adaptive_avg_pool2d(xs[0], 1)
R["global_max_pool2d"] = lambda xs, a, cot: F.adaptive_max_pool2d(xs[0], 1)


@replay("batch_norm")
def _batch_norm(xs, a, cot):
    rm = xs[1].clone() if a["running"] else None
    rv = xs[2].clone() if a["running"] else None
    w = xs[3 if a["running"] else 1] if a["affine"] else None
    b = xs[4 if a["running"] else 2] if a["affine"] else None
    return F.batch_norm(xs[0], rm, rv, w, b, a["training"], a["momentum"], a["eps"])


@replay("layer_norm")
def _layer_norm(xs, a, cot):
    w = xs[1] if a["weight"] else None
    b = xs[2 if a["weight"] else 1] if a["bias"] else None
    return F.layer_norm(xs[0], a["normalized_shape"], w, b, a["eps"])


@replay("rms_norm")
def _rms_norm(xs, a, cot):
    if hasattr(F, "rms_norm"):  # torch >= 2.4
        return F.rms_norm(xs[0], a["normalized_shape"], xs[1] if a["weight"] else None, a["eps"])
    # torch 1.13 has no F.rms_norm: its documented formula
    x = xs[0]
    dims_ = tuple(range(x.dim() - len(a["normalized_shape"]), x.dim()))
    y = x * torch.rsqrt((x * x).mean(dim=dims_, keepdim=True) + a["eps"])
    return y * xs[1] if a["weight"] else y


@replay("rotary_embedding")
def _rotary_embedding(xs, a, cot):
    # the rotate-half form of transformers' Llama (apply_rotary_pos_emb), its frequencies as
    # _compute_default_rope_parameters / _compute_llama3_parameters compute them, in x's dtype
    x = xs[0]
    d, t = x.shape[-1], x.shape[-2]
    dt = x.dtype
    inv = 1.0 / (a["base"] ** (torch.arange(0, d, 2, dtype=torch.int64).to(dt) / d))
    if a["llama3_factor"]:
        f, lo, hi, old = a["llama3_factor"], a["low_freq_factor"], a["high_freq_factor"], a["original_max_positions"]
        wl = 2 * math.pi / inv
        scaled = torch.where(wl > old / lo, inv / f, inv)
        smooth = (old / wl - lo) / (hi - lo)
        smoothed = (1 - smooth) * scaled / f + smooth * scaled
        medium = ~(wl < old / hi) & ~(wl > old / lo)
        inv = torch.where(medium, smoothed, scaled)
    pos = (torch.arange(a["offset"], a["offset"] + t, dtype=torch.float64) / a["linear_factor"]).to(dt)
    ang = pos[:, None] * inv[None, :]
    emb = torch.cat([ang, ang], -1)
    cos, sin = emb.to(torch.float64).cos().to(dt), emb.to(torch.float64).sin().to(dt)
    rotated = torch.cat([-x[..., d // 2:], x[..., : d // 2]], -1)
    return x * cos + rotated * sin


@replay("lstm_cell")
def _lstm_cell(xs, a, cot):
    # torch's own cell, its input weights the identity and its recurrent weights zero: the
    # gates it computes are exactly Loom's pre-activations
    gates, c = xs
    B, n = c.shape
    eye = torch.eye(4 * n, dtype=gates.dtype)
    h2, c2 = torch.lstm_cell(gates, [torch.zeros(B, n, dtype=c.dtype), c], eye, torch.zeros(4 * n, n, dtype=c.dtype))
    return torch.cat([h2, c2], -1)


@replay("dropout")
def _dropout(xs, a, cot):
    x, p = xs[0], a["p"]
    if not a["training"] or p == 0:
        return x * 1
    if p == 1:
        return x * 0
    # the mask is random: take Loom's, and check that the kept values are x / (1 - p)
    keep = torch.from_numpy(np.asarray(a["_loom_out"] != 0))  # asarray: a 0-d comparison is a NumPy scalar
    return x * keep / (1 - p)


R["embedding"] = lambda xs, a, cot: F.embedding(xs[1].long(), xs[0],
                                                padding_idx=a["padding_idx"] if a["padding_idx"] >= 0 else None)


def _target(t):
    return t if t.is_floating_point() else t.long()


R["cross_entropy"] = lambda xs, a, cot: F.cross_entropy(
    xs[0], _target(xs[1]), xs[2] if len(xs) == 3 else None, ignore_index=a["ignore_index"], reduction=a["reduction"],
    label_smoothing=a["label_smoothing"])
R["nll_loss"] = lambda xs, a, cot: F.nll_loss(xs[0], xs[1].long(), xs[2] if len(xs) == 3 else None,
                                              ignore_index=a["ignore_index"], reduction=a["reduction"])


@replay("binary_cross_entropy_with_logits")
def _bce(xs, a, cot):
    x, y = xs[0], xs[1]
    w = xs[2] if a["weight"] else None
    pw = xs[3 if a["weight"] else 2] if a["pos_weight"] else None
    if w is None and pw is None:
        return F.binary_cross_entropy_with_logits(x, y, reduction=a["reduction"])
    # torch 1.13 has no gradient for weight / pos_weight: its own (ATen) formula, written out
    max_val = (-x).clamp_min(0)
    softplus_neg = ((-max_val).exp() + (-x - max_val).exp()).log() + max_val  # log(1 + exp(-x))
    log_weight = (pw - 1) * y + 1 if pw is not None else 1
    loss = (1 - y) * x + log_weight * softplus_neg
    if w is not None:
        loss = loss * w
    return {"none": lambda l: l, "sum": torch.sum, "mean": torch.mean}[a["reduction"]](loss)


@replay("scaled_dot_product_attention")
def _sdpa(xs, a, cot):
    q, k, v = xs[:3]
    mask = xs[3] if len(xs) == 4 else None
    if hasattr(F, "scaled_dot_product_attention"):  # torch >= 2 (enable_gqa: >= 2.5)
        gqa = {"enable_gqa": True} if a.get("enable_gqa") else {}
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=a["is_causal"], scale=a["scale"], **gqa)
    # torch 1.13 has no F.scaled_dot_product_attention: its documented math form, with torch
    # 2.5's rule for a query that sees no key (weights 0, where softmax alone gives NaN)
    if a.get("enable_gqa"):  # torch 2.5's flag: each key / value head repeated over its query heads
        k = k.repeat_interleave(q.shape[-3] // k.shape[-3], dim=-3)
        v = v.repeat_interleave(q.shape[-3] // v.shape[-3], dim=-3)
    scale = a["scale"] if a["scale"] is not None else 1.0 / np.sqrt(q.shape[-1])
    s = torch.matmul(q, k.transpose(-2, -1)) * scale
    if a["is_causal"]:
        L, S = s.shape[-2], s.shape[-1]
        s = s.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), float("-inf"))
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else s + mask
    unseen = (s == float("-inf")).all(-1, keepdim=True)
    w = torch.softmax(s.masked_fill(unseen, 0), -1).masked_fill(unseen, 0)
    return torch.matmul(w, v)


# ---------------------------------------------------------------- comparison
def compare(what, got, exp, op, grad):
    if got.shape != exp.shape:
        return f"{what}: shape {got.shape} != reference {exp.shape}"
    if got.dtype != exp.dtype:
        return f"{what}: dtype {got.dtype} != reference {exp.dtype}"
    if got.size == 0:
        return None
    if got.dtype.kind == "f":
        rtol, atol = tolerance(op, got.dtype.name, grad)
        g64, e64 = got.astype(np.float64), exp.astype(np.float64)
        ok = np.isclose(g64, e64, rtol=rtol, atol=atol, equal_nan=True)
        if not ok.all():
            bad = np.argwhere(~ok)[0]
            k = tuple(bad)
            err = np.nanmax(np.abs(g64 - e64))
            return (f"{what}: {int((~ok).sum())} of {got.size} values differ (rtol {rtol:g}, atol {atol:g}); "
                    f"first at {list(k)}: loom {g64[k]!r}, reference {e64[k]!r}; max abs error {err:.3g}")
        return None
    if not np.array_equal(got, exp):
        bad = tuple(np.argwhere(got != exp)[0]) if got.ndim else ()
        return f"{what}: values differ; first at {list(bad)}: loom {got[bad]!r}, reference {exp[bad]!r}"
    return None


def check_case(d, case):
    op = case["op"]
    if case.get("error"):
        return [f"Loom raised: {case['error']}"]
    fn = replay_of(op)
    if fn is None:
        return [f"no Python replay for op '{op}' (torch and numpy have no function of that name: add its line to R)"]
    ins = [np.load(os.path.join(d, i["file"])) for i in case["inputs"]]
    xs = []
    for a, info in zip(ins, case["inputs"]):
        if a.dtype.name != info["dtype"] or list(a.shape) != info["shape"]:
            return [f"input file {info['file']} does not match the manifest"]
        t = torch.from_numpy(np.array(a, copy=True))
        if info["diff"]:
            t.requires_grad_(True)
        xs.append(t)
    cot = np.load(os.path.join(d, case["cotangent"])) if case["cotangent"] else None
    problems = []
    got = np.load(os.path.join(d, case["output"]["file"]))
    # replays of random ops (dropout) read Loom's output to recover the random draw
    res = fn(xs, dict(case["attrs"], _loom_out=got), cot)
    if isinstance(res, NP):
        exp, torch_out = res.out, res.torch_out
    else:
        exp, torch_out = arr(res), res
    p = compare("output", got, exp, op, False)
    if p:
        problems.append(p)
        if got.shape != exp.shape:
            return problems  # the cotangent does not fit the reference's output
    diff = [k for k, info in enumerate(case["inputs"]) if info["diff"]]
    if not diff:
        return problems
    if isinstance(res, NP) and res.grads is not None:
        ref = res.grads
    else:
        if torch_out is None or not torch_out.requires_grad:
            return problems + ["the reference has no gradient for a differentiable case"]
        gs = torch.autograd.grad(torch_out, [xs[k] for k in diff], torch.from_numpy(cot).to(torch_out.dtype),
                                 allow_unused=True)
        ref = {k: (arr(g) if g is not None else np.zeros(tuple(xs[k].shape), np_dtype(xs[k]))) for k, g in zip(diff, gs)}
    for k in diff:
        gfile = case["grads"][k]
        if gfile is None:
            problems.append(f"grad of input {k}: missing")
            continue
        p = compare(f"grad of input {k}", np.load(os.path.join(d, gfile)), ref[k], op, True)
        if p:
            problems.append(p)
    return problems


def main():
    args = sys.argv[1:]
    only = None
    if len(args) == 3 and args[1] == "--only":
        only = set(args[2].split(","))
    elif len(args) != 1:
        print("usage: /usr/bin/python3 check_ops.py OUTDIR [--only OP,OP,...]", file=sys.stderr)
        return 2
    d = args[0]
    with open(os.path.join(d, "manifest.json")) as f:
        manifest = json.load(f)
    print(f"reference: torch {torch.__version__}, numpy {np.__version__}")
    by_op = {}
    for case in manifest["cases"]:
        if only is None or case["op"] in only:
            by_op.setdefault(case["op"], []).append(case)
    passed = failed = 0
    if only is not None and set(by_op) != only:
        print(f"FAIL --only names ops with no case: {sorted(only - set(by_op))}")
        failed += 1
    for reg in manifest["registry"]:
        if only is None and reg["name"] not in by_op:
            print(f"{reg['name']}: FAIL no test case for this registry op")
            failed += 1
    for op, cases in by_op.items():
        fails = []
        for case in cases:
            try:
                problems = check_case(d, case)
            except Exception as e:  # a replay that raises is a failure of that case
                problems = [f"replay raised {type(e).__name__}: {e}"]
            if problems:
                fails.append((case["label"], problems))
        n_ok = len(cases) - len(fails)
        passed += n_ok
        failed += len(fails)
        status = "ok" if not fails else "FAIL"
        print(f"{op}: {status} {n_ok}/{len(cases)} cases ({category(op)} tolerance)")
        for label, problems in fails:
            for p in problems:
                print(f"    [{label}] {p}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
