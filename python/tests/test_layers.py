"""Layers and graphs from Python (docs/python.md, "Layers and graphs"): every registered layer kind
built through loom.layers with keyword arguments and run against NumPy (or torch where NumPy has
no such op), reuse_with, Module, Sequential, Graph.build, compile and plans, summary, to_dot, the
zoo."""
import numpy as np
import pytest

import loom

torch = pytest.importorskip("torch")  # after loom: libstdc++'s static TLS fills up the other way round

L = loom.layers
RNG = np.random.default_rng(0)


def arr(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def run(out, inputs, arrays):
    """The graph from `inputs` to `out`, compiled and run on `arrays`; its value and state as NumPy."""
    g = loom.Graph.build(out, inputs)
    with loom.no_grad():
        value = g.compile()(*arrays)
    state = {k: v.detach().numpy() for k, v in loom.io.graph_state(g).items()}
    return value.numpy(), state


def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


# One case per registered kind: it builds the layer from Python and checks its value. A kind
# registered without a case fails test_every_registered_kind_has_a_case.
CASES = {}


def case(kind):
    def register(f):
        CASES[kind] = f
        return f

    return register


@case("Activation")
def _():
    x = loom.Input(5)
    a = arr(3, 5)
    y, _ = run(L.Activation(x, fn="relu"), [x], [a])
    np.testing.assert_allclose(y, np.maximum(a, 0))


@case("AdaptiveAvgPool2D")
def _():
    x = loom.Input((-1, 3, 4, 4))
    a = arr(2, 3, 4, 4)
    y, _ = run(L.AdaptiveAvgPool2D(x, output_size=1), [x], [a])
    np.testing.assert_allclose(y, a.mean(axis=(2, 3), keepdims=True), rtol=1e-6, atol=1e-6)


@case("Add")
def _():
    x, z = loom.Input(4), loom.Input(4)
    a, b = arr(3, 4), arr(3, 4)
    y, _ = run(L.Add(x, z), [x, z], [a, b])
    np.testing.assert_allclose(y, a + b)


@case("AvgPool2D")
def _():
    x = loom.Input((-1, 3, 4, 4))
    a = arr(2, 3, 4, 4)
    y, _ = run(L.AvgPool2D(x, kernel_size=2), [x], [a])
    np.testing.assert_allclose(y, a.reshape(2, 3, 2, 2, 2, 2).mean(axis=(3, 5)), rtol=1e-6, atol=1e-6)


@case("AxisSlice")
def _():
    x = loom.Input(6)
    a = arr(3, 6)
    y, _ = run(L.AxisSlice(x, axis=0, start=1, stop=5, step=2), [x], [a])  # axes after the batch axis
    np.testing.assert_array_equal(y, a[:, 1:5:2])


@case("BatchNorm")
def _():
    x = loom.Input((-1, 3, 4, 4))
    a = arr(2, 3, 4, 4)
    y, s = run(L.BatchNorm(x, eps=1e-3, name="bn"), [x], [a])  # Eval mode: the running statistics
    c = lambda v: v.reshape(1, 3, 1, 1)  # noqa: E731
    want = (a - c(s["bn/running_mean"])) / np.sqrt(c(s["bn/running_var"]) + 1e-3) * c(s["bn/weight"]) + c(s["bn/bias"])
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)


@case("Concat")
def _():
    x, z = loom.Input(2), loom.Input(3)
    a, b = arr(4, 2), arr(4, 3)
    y, _ = run(L.Concat([x, z], axis=1), [x, z], [a, b])
    np.testing.assert_array_equal(y, np.concatenate([a, b], axis=1))


@case("Constant")
def _():
    c = L.Constant(np.arange(6, dtype=np.float32).reshape(2, 3), name="c")
    with loom.no_grad():
        y = loom.Graph.build(c).compile()()
    np.testing.assert_array_equal(y.numpy(), np.arange(6).reshape(2, 3))


@case("Conv1D")
def _():
    x = loom.Input((-1, 6, 8))
    a = arr(2, 6, 8)
    y, s = run(L.Conv1D(x, filters=4, kernel_size=3, stride=2, padding=1, name="c1"), [x], [a])
    want = torch.nn.functional.conv1d(torch.from_numpy(a), torch.from_numpy(s["c1/weights"]), torch.from_numpy(s["c1/bias"]),
                                      stride=2, padding=1)
    np.testing.assert_allclose(y, want.numpy(), rtol=1e-5, atol=1e-5)


@case("Conv2D")
def _():
    x = loom.Input((-1, 3, 5, 5))
    a = arr(2, 3, 5, 5)
    y, s = run(L.Conv2D(x, filters=4, kernel_size=3, padding="same", name="c2"), [x], [a])
    want = torch.nn.functional.conv2d(torch.from_numpy(a), torch.from_numpy(s["c2/weights"]), torch.from_numpy(s["c2/bias"]), padding=1)
    np.testing.assert_allclose(y, want.numpy(), rtol=1e-5, atol=1e-5)


@case("Conv2DTranspose")
def _():
    x = loom.Input((-1, 3, 4, 4))
    a = arr(2, 3, 4, 4)
    y, s = run(L.Conv2DTranspose(x, filters=2, kernel_size=2, stride=2, name="ct"), [x], [a])
    want = torch.nn.functional.conv_transpose2d(torch.from_numpy(a), torch.from_numpy(s["ct/weights"]),
                                                torch.from_numpy(s["ct/bias"]), stride=2)
    np.testing.assert_allclose(y, want.numpy(), rtol=1e-5, atol=1e-5)


@case("DropConnect")
def _():
    x = loom.Input(4)
    a = arr(3, 4)
    y, s = run(L.DropConnect(x, n_units=2, probability=0.5, name="dc"), [x], [a])  # Eval mode: no drop
    np.testing.assert_allclose(y, a @ s["dc/weights"] + s["dc/bias"], rtol=1e-5, atol=1e-6)


@case("Dropout")
def _():
    x = loom.Input(4)
    a = arr(3, 4)
    y, _ = run(L.Dropout(x, probability=0.5), [x], [a])  # Eval mode: the identity
    np.testing.assert_array_equal(y, a)


@case("Flip")
def _():
    x = loom.Input((-1, 3, 4))
    a = arr(2, 3, 4)
    y, _ = run(L.Flip(x, axes=[1]), [x], [a])  # axes after the batch axis
    np.testing.assert_array_equal(y, a[:, :, ::-1])


def cell_case(kind, torch_cell, state_units):
    x, h = loom.Input(4), loom.Input(state_units)
    a, b = arr(3, 4), arr(3, state_units)
    y, s = run(L.kind(kind)(x, h, n_units=3, name="cell"), [x, h], [a, b])
    cell = torch_cell(4, 3)
    with torch.no_grad():
        cell.weight_ih.copy_(torch.from_numpy(s["cell/w_ih"].T))
        cell.weight_hh.copy_(torch.from_numpy(s["cell/w_hh"].T))
        cell.bias_ih.copy_(torch.from_numpy(s["cell/b_ih"]))
        cell.bias_hh.copy_(torch.from_numpy(s["cell/b_hh"]))
        if state_units == 6:  # LSTM: the state is [h, c] packed, and so is the output
            hn, cn = cell(torch.from_numpy(a), (torch.from_numpy(b[:, :3]), torch.from_numpy(b[:, 3:])))
            want = torch.cat([hn, cn], 1)
        else:
            want = cell(torch.from_numpy(a), torch.from_numpy(b))
    np.testing.assert_allclose(y, want.numpy(), rtol=1e-5, atol=1e-5)


@case("GRUCell")
def _():
    cell_case("GRUCell", torch.nn.GRUCell, 3)


@case("LSTMCell")
def _():
    cell_case("LSTMCell", torch.nn.LSTMCell, 6)


@case("RNNCell")
def _():
    cell_case("RNNCell", torch.nn.RNNCell, 3)


@case("Gate")
def _():
    x, g = loom.Input(4), loom.Input(2)
    a, b = arr(3, 4), arr(3, 2)
    y, s = run(L.Gate(x, g, name="gate"), [x, g], [a, b])
    (w,) = [v for k, v in s.items() if k.endswith("weights")]
    (bias,) = [v for k, v in s.items() if k.endswith("bias")]
    np.testing.assert_allclose(y, a * sigmoid(b @ w + bias), rtol=1e-5, atol=1e-6)


@case("GlobalPool")
def _():
    x = loom.Input((-1, 3, 4, 4))
    a = arr(2, 3, 4, 4)
    y, _ = run(L.GlobalPool(x, mode="max"), [x], [a])
    np.testing.assert_array_equal(y, a.max(axis=(2, 3)))


@case("Input")
def _():
    x = L.Input((-1, 3), dtype=loom.float64, name="x64")
    assert x.kind == "Input" and x.shape == (-1, 3) and x.dtype == loom.float64
    a = np.arange(6.0).reshape(2, 3)
    x.set_value(a)
    with loom.no_grad():
        np.testing.assert_array_equal(x().numpy(), a)  # the graph that ends in x, on its value


@case("LayerNorm")
def _():
    x = loom.Input((-1, 6, 4))
    a = arr(2, 6, 4)
    y, s = run(L.LayerNorm(x, eps=1e-5, name="ln"), [x], [a])
    want = (a - a.mean(-1, keepdims=True)) / np.sqrt(a.var(-1, keepdims=True) + 1e-5) * s["ln/weight"] + s["ln/bias"]
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)


@case("Linear")
def _():
    x = loom.Input(4)
    a = arr(3, 4)
    y, s = run(L.Linear(x, n_units=2, weight_init="he_normal", name="lin"), [x], [a])
    np.testing.assert_allclose(y, a @ s["lin/weights"] + s["lin/bias"], rtol=1e-5, atol=1e-6)


@case("Lookup")
def _():
    x = loom.Input((-1, 5), dtype=loom.int64)
    ids = RNG.integers(0, 10, (2, 5))
    y, s = run(L.Lookup(x, vocab_size=10, n_units=3, name="lk"), [x], [ids])
    np.testing.assert_array_equal(y, s["lk/weights"][ids])


@case("PositionEmbedding")
def _():
    x = loom.Input((-1, -1), dtype=loom.int64)
    ids = RNG.integers(0, 10, (2, 5))
    y, s = run(L.PositionEmbedding(x, n_positions=8, n_units=3, name="pe"), [x], [ids])
    np.testing.assert_array_equal(y, s["pe/weights"][:5])  # rows 0..T-1, whatever the ids


@case("MaxPool2D")
def _():
    x = loom.Input((-1, 3, 4, 4))
    a = arr(2, 3, 4, 4)
    y, _ = run(L.MaxPool2D(x, kernel_size=2, stride=2), [x], [a])
    np.testing.assert_array_equal(y, a.reshape(2, 3, 2, 2, 2, 2).max(axis=(3, 5)))


@case("Mean")
def _():
    x, z = loom.Input(4), loom.Input(4)
    a, b = arr(3, 4), arr(3, 4)
    y, _ = run(L.Mean(x, z), [x, z], [a, b])
    np.testing.assert_allclose(y, (a + b) / 2, rtol=1e-6)


@case("Module")
def _():
    i = loom.Input(4)
    inner = L.Activation(L.Linear(i, n_units=3, name="m_lin"), fn="tanh")
    module = L.Module([i], [inner], name="block")
    assert module.kind == "Module"
    x = loom.Input(4)
    a = arr(2, 4)
    y, s = run(module.reuse_with(x), [x], [a])  # a module on new inputs, sharing the inner weights
    (w,) = [v for k, v in s.items() if k.endswith("m_lin/weights")]  # under the module's name
    (b,) = [v for k, v in s.items() if k.endswith("m_lin/bias")]
    np.testing.assert_allclose(y, np.tanh(a @ w + b), rtol=1e-5, atol=1e-6)


@case("ModuleOutput")
def _():
    i = loom.Input(4)
    module = loom.Module([i], [L.Activation(i, fn="relu"), L.Activation(i, fn="sigmoid")])
    second = L.ModuleOutput(module, 1)
    assert second.kind == "ModuleOutput"
    a = arr(3, 4)
    y, _ = run(second, [i], [a])
    np.testing.assert_allclose(y, sigmoid(a), rtol=1e-6)


@case("MultiHeadAttention")
def _():
    x = loom.Input((-1, 5, 4))
    a = arr(2, 5, 4)
    y, s = run(L.MultiHeadAttention(x, x, x, n_heads=2, causal=True, name="mha"), [x], [a])
    p = lambda n: a @ s[f"mha/{n}_weight"] + s[f"mha/{n}_bias"]  # noqa: E731
    heads = lambda t: t.reshape(2, 5, 2, 2).transpose(0, 2, 1, 3)  # noqa: E731
    q, k, v = heads(p("q")), heads(p("k")), heads(p("v"))
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(2) + np.triu(np.full((5, 5), -np.inf), 1)
    att = (softmax(scores) @ v).transpose(0, 2, 1, 3).reshape(2, 5, 4)
    np.testing.assert_allclose(y, att @ s["mha/out_weight"] + s["mha/out_bias"], rtol=1e-4, atol=1e-5)


@case("Multiply")
def _():
    x, z = loom.Input(4), loom.Input(4)
    a, b = arr(3, 4), arr(3, 4)
    y, _ = run(L.Multiply(x, z), [x, z], [a, b])
    np.testing.assert_allclose(y, a * b)


@case("OneHot")
def _():
    x = loom.Input((-1,), dtype=loom.int64)
    ids = np.array([0, 3, 2])
    y, _ = run(L.OneHot(x, n_classes=4), [x], [ids])
    np.testing.assert_array_equal(y, np.eye(4)[ids])


@case("Param")
def _():
    p = L.Param(value=2.5, name="p")
    assert p.kind == "Param" and p.options == {"value": 2.5}
    with loom.no_grad():
        assert p().tolist() == 2.5


@case("RMSNorm")
def _():
    x = loom.Input((-1, 4))
    a = arr(3, 4)
    y, s = run(L.RMSNorm(x, eps=1e-6, name="rms"), [x], [a])
    np.testing.assert_allclose(y, a / np.sqrt((a * a).mean(-1, keepdims=True) + 1e-6) * s["rms/weight"], rtol=1e-5, atol=1e-6)


@case("RNN")
def _():
    x = loom.Input((-1, 6, 4))
    a = arr(2, 6, 4)
    y, s = run(L.RNN(x, cell="GRU", n_units=3, name="rnn"), [x], [a])
    gru = torch.nn.GRU(4, 3, batch_first=True)
    with torch.no_grad():
        gru.weight_ih_l0.copy_(torch.from_numpy(s["rnn/w_ih"].T))
        gru.weight_hh_l0.copy_(torch.from_numpy(s["rnn/w_hh"].T))
        gru.bias_ih_l0.copy_(torch.from_numpy(s["rnn/b_ih"]))
        gru.bias_hh_l0.copy_(torch.from_numpy(s["rnn/b_hh"]))
        want, _ = gru(torch.from_numpy(a))
    np.testing.assert_allclose(y, want.numpy(), rtol=1e-5, atol=1e-5)


@case("Reshape")
def _():
    x = loom.Input((-1, 2, 6))
    a = arr(3, 2, 6)
    y, _ = run(L.Reshape(x, shape=[3, -1]), [x], [a])  # the shape of each sample
    np.testing.assert_array_equal(y, a.reshape(3, 3, 4))


@case("Residual")
def _():
    x, z = loom.Input(4), loom.Input(4)
    a, b = arr(3, 4), arr(3, 4)
    y, _ = run(L.Residual(x, z), [x, z], [a, b])
    np.testing.assert_allclose(y, a + b)


@case("Sequential")
def _():
    x = loom.Input(4)
    seq = loom.Sequential([L.Linear(n_units=3, name="s_lin"), L.Activation(fn="relu")], name="seq")
    out = seq(x)  # made without input: its first call builds it
    assert out.kind == "Sequential"
    a = arr(2, 4)
    y, s = run(out, [x], [a])
    (w,) = [v for k, v in s.items() if k.endswith("s_lin/weights")]
    (b,) = [v for k, v in s.items() if k.endswith("s_lin/bias")]
    np.testing.assert_allclose(y, np.maximum(a @ w + b, 0), rtol=1e-5, atol=1e-6)
    # with the input given, a step may also be a Python function of a layer
    seq2 = loom.Sequential([lambda h: L.Linear(h, n_units=2), L.Activation(fn="tanh")], input=x)
    assert seq2.shape == (-1, 2)


@case("SparseInput")
def _():
    # Its value is a SparseTensor, which the Python module does not bind yet; it builds and
    # feeds the shape rule of what reads it.
    sp = L.SparseInput(n_units=50, name="bag")
    assert sp.kind == "SparseInput" and sp.shape == (-1, 50)
    assert L.Linear(sp, n_units=4).shape == (-1, 4)


@case("Subtract")
def _():
    x, z = loom.Input(4), loom.Input(4)
    a, b = arr(3, 4), arr(3, 4)
    y, _ = run(L.Subtract(x, z), [x, z], [a, b])
    np.testing.assert_allclose(y, a - b)


@case("SwiGLU")
def _():
    x = loom.Input((-1, 4))
    a = arr(3, 4)
    y, s = run(L.SwiGLU(x, hidden=5, name="sw"), [x], [a])
    g = a @ s["sw/gate"]
    np.testing.assert_allclose(y, (g * sigmoid(g) * (a @ s["sw/up"])) @ s["sw/down"], rtol=1e-5, atol=1e-5)


@case("TransformerEncoderLayer")
def _():
    x = loom.Input((-1, 5, 4))
    a = arr(2, 5, 4)
    layer = L.TransformerEncoderLayer(x, n_heads=2, ff_units=8, dropout=0.0, name="enc")
    y, s = run(layer, [x], [a])
    # torch's post-norm encoder layer with the same weights (Linear weights are (in, out) in Loom)
    t = torch.nn.TransformerEncoderLayer(4, 2, dim_feedforward=8, dropout=0.0, batch_first=True)
    g = lambda key: torch.from_numpy(s["enc/" + key])  # noqa: E731
    with torch.no_grad():
        att = "self_attention/"
        t.self_attn.in_proj_weight.copy_(torch.cat([g(att + "q_weight").T, g(att + "k_weight").T, g(att + "v_weight").T]))
        t.self_attn.in_proj_bias.copy_(torch.cat([g(att + "q_bias"), g(att + "k_bias"), g(att + "v_bias")]))
        t.self_attn.out_proj.weight.copy_(g(att + "out_weight").T)
        t.self_attn.out_proj.bias.copy_(g(att + "out_bias"))
        t.linear1.weight.copy_(g("ff/w1").T)
        t.linear1.bias.copy_(g("ff/b1"))
        t.linear2.weight.copy_(g("ff/w2").T)
        t.linear2.bias.copy_(g("ff/b2"))
        for n in ("norm1", "norm2"):
            getattr(t, n).weight.copy_(g(n + "/weight"))
            getattr(t, n).bias.copy_(g(n + "/bias"))
        want = t.eval()(torch.from_numpy(a))
    assert y.shape == (2, 5, 4)
    np.testing.assert_allclose(y, want.numpy(), rtol=1e-4, atol=1e-4)


def causal_attention(q, k, v):
    """(N, H, T, d) heads attending causally, as NumPy."""
    t = q.shape[2]
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(q.shape[-1])
    scores = np.where(np.tril(np.ones((t, t), dtype=bool)), scores, -np.inf)
    return softmax(scores) @ v


def heads(x, h):
    n, t, e = x.shape
    return x.reshape(n, t, h, e // h).transpose(0, 2, 1, 3)


def merged(x):
    n, h, t, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(n, t, h * d)


@case("GptBlock")
def _():
    x = loom.Input((-1, -1, 8))
    a = arr(2, 5, 8)
    y, s = run(L.GptBlock(x, n_heads=2, ff_units=12, eps=1e-5, name="blk"), [x], [a])
    g = lambda key: s["blk/" + key]  # noqa: E731

    def norm(v, n):
        mu, var = v.mean(-1, keepdims=True), v.var(-1, keepdims=True)
        return (v - mu) / np.sqrt(var + 1e-5) * g(n + "/weight") + g(n + "/bias")

    h = norm(a, "ln_1")
    q, k, v = (heads(h @ g(f"attn/{p}_weight") + g(f"attn/{p}_bias"), 2) for p in "qkv")
    h = a + merged(causal_attention(q, k, v)) @ g("attn/out_weight") + g("attn/out_bias")
    f = norm(h, "ln_2") @ g("mlp/c_fc/weight") + g("mlp/c_fc/bias")
    f = 0.5 * f * (1 + np.tanh(np.sqrt(2 / np.pi) * (f + 0.044715 * f ** 3)))  # GPT-2's GELU
    np.testing.assert_allclose(y, h + f @ g("mlp/c_proj/weight") + g("mlp/c_proj/bias"), rtol=1e-4, atol=1e-4)


@case("LlamaBlock")
def _():
    x = loom.Input((-1, -1, 8))
    a = arr(2, 5, 8)
    y, s = run(L.LlamaBlock(x, n_heads=4, n_kv_heads=2, ff_units=12, eps=1e-6, rotary_base=100.0, name="blk"), [x], [a])
    g = lambda key: s["blk/" + key]  # noqa: E731

    def rms(v, n):
        return v / np.sqrt((v * v).mean(-1, keepdims=True) + 1e-6) * g(n + "/weight")

    def rope(v):  # rotate-half, positions 0 .. T-1, head size 2
        d, t = v.shape[-1], v.shape[-2]
        inv = 1.0 / 100.0 ** (np.arange(0, d, 2) / d)
        ang = np.arange(t)[:, None] * inv[None, :]
        ang = np.concatenate([ang, ang], -1)
        return v * np.cos(ang) + np.concatenate([-v[..., d // 2:], v[..., :d // 2]], -1) * np.sin(ang)

    h = rms(a, "input_layernorm")
    q = rope(heads(h @ g("self_attn/q_weight"), 4))
    k, v = rope(heads(h @ g("self_attn/k_weight"), 2)), heads(h @ g("self_attn/v_weight"), 2)
    k, v = np.repeat(k, 2, axis=1), np.repeat(v, 2, axis=1)  # each key / value head serves 2 query heads
    h = a + merged(causal_attention(q, k, v)) @ g("self_attn/out_weight")
    m = rms(h, "post_attention_layernorm")
    gate = m @ g("mlp/gate")
    np.testing.assert_allclose(y, h + (gate * sigmoid(gate) * (m @ g("mlp/up"))) @ g("mlp/down"), rtol=1e-4, atol=1e-4)


@case("Transpose")
def _():
    x = loom.Input((-1, 3, 4))
    a = arr(2, 3, 4)
    y, _ = run(L.Transpose(x, perm=[1, 0]), [x], [a])  # a permutation of the axes after the batch
    np.testing.assert_array_equal(y, a.transpose(0, 2, 1))


# ---------------------------------------------------------------------------------------------


def test_every_registered_kind_has_a_case():
    kinds = set(loom.layers.kinds())
    assert kinds - set(CASES) == set(), "registered kinds without a Python case (add one to CASES)"
    assert set(CASES) - kinds == set(), "cases of kinds no longer registered"


@pytest.mark.parametrize("kind", sorted(CASES))
def test_kind_builds_and_runs_against_numpy(kind):
    assert callable(getattr(loom.layers, kind))  # reachable under its registry name
    CASES[kind]()


@pytest.mark.parametrize("kind", sorted(set(loom.layers.kinds()) - {"Input", "Constant", "Module", "Sequential", "ModuleOutput"}))
def test_a_kinds_keywords_are_its_saved_options(kind):
    """The constructor's keywords (the registry's defaults) are exactly what the layer saves."""
    made = loom.layers.kind(kind)
    keys = set(made.defaults)
    # a layer of the kind as its case builds it: the options it writes have the same keys
    built = {}
    original = loom.layers.LayerKind.__call__

    def spy(self, *inputs, name="", **kwargs):
        layer = original(self, *inputs, name=name, **kwargs)
        if self.kind == kind:
            built.setdefault("layer", layer)
        return layer

    loom.layers.LayerKind.__call__ = spy
    try:
        CASES[kind]()
    finally:
        loom.layers.LayerKind.__call__ = original
    assert set(built["layer"].options) == keys


def test_unknown_keyword_and_positional_option_are_refused():
    x = loom.Input(4)
    with pytest.raises(TypeError, match="unknown option 'units'.*n_units"):
        L.Linear(x, units=3)
    with pytest.raises(TypeError, match="keyword arguments"):
        L.Linear(x, 3)
    with pytest.raises(loom.ValueError, match="n_units"):
        L.Linear(x)  # n_units has no usable default: the factory's range check names it
    with pytest.raises(AttributeError, match="registered layer kinds"):
        L.NoSuchKind


def test_keras_call_and_reuse_with_share_state():
    x, z = loom.Input(4, name="a_in"), loom.Input(4, name="b_in")
    dense = L.Linear(n_units=3, name="shared")
    assert not dense.bound
    h1 = dense(x)
    h2 = dense(z)  # later calls: reuse_with
    h3 = h1.reuse_with(z, name="again")
    assert dense.bound and h1.shares_state_with(h2) and h1.shares_state_with(h3)
    assert h3.name == "again" and h3.inputs == [z]
    a = arr(2, 4)
    with loom.no_grad():
        np.testing.assert_array_equal(loom.Graph.build(h2, [z]).compile()(a).numpy(), loom.Graph.build(h1, [x]).compile()(a).numpy())
    # a tensor call: the layer's value now
    with loom.no_grad():
        direct = dense(loom.asarray(a))
    np.testing.assert_allclose(direct.numpy(), a @ h1.parameters()[0].detach().numpy() + h1.parameters()[1].detach().numpy(), rtol=1e-5)


def test_graph_build_compile_summary_dot_and_json():
    x = loom.Input(4, name="gx")
    h = L.Activation(L.Linear(x, n_units=8, name="g_dense"), fn="relu", name="g_relu")
    out = L.Linear(h, n_units=2, name="g_out")
    g = loom.Graph.build(out, [x])
    assert [n.name for n in g.nodes] == ["gx", "g_dense", "g_relu", "g_out"]
    assert g.inputs == [x] and g.outputs == [out] and g.layer("g_relu") == h
    assert g.parameter_count() == 4 * 8 + 8 + 8 * 2 + 2
    summary = g.summary()
    assert "g_dense" in summary and "Total params: 58" in summary
    dot = g.to_dot()
    assert dot.startswith("digraph") and "g_relu" in dot
    plan = g.compile(input_shapes=[(5, 4)], fuse_elementwise=False)
    assert plan.output_shapes == [(5, 2)] and not plan.shape_polymorphic and plan.peak_bytes() > 0
    a = arr(5, 4)
    with loom.no_grad():
        y = plan(a).numpy()
        s = {k: v.detach().numpy() for k, v in loom.io.graph_state(g).items()}
        want = np.maximum(a @ s["g_dense/weights"] + s["g_dense/bias"], 0) @ s["g_out/weights"] + s["g_out/bias"]
        np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(g(a).numpy(), y, rtol=1e-6)
    with pytest.raises(loom.ValueError, match="unknown option"):
        g.compile(fuse_everything=True)
    # the architecture as JSON, rebuilt with fresh weights, then given these
    again = loom.Graph.from_json(g.to_json())
    loom.copy_state(g, again)
    with loom.no_grad():
        np.testing.assert_array_equal(again.compile()(a).numpy(), y)


def test_zoo_networks():
    net = loom.zoo.mlp(784, [128], 10)
    assert net.parameter_count() == 784 * 128 + 128 + 128 * 10 + 10
    assert loom.zoo.lenet().parameter_count() == 61706
    assert loom.zoo.fashion_cnn().parameter_count() == 390634
    with loom.no_grad():
        assert net(np.zeros((3, 784), np.float32)).shape == (3, 10)
    assert "Total params" in net.summary()


def test_train_mode_turns_dropout_on():
    x = loom.Input(1000)
    drop = L.Dropout(x, probability=0.5, seed=3)
    plan = loom.Graph.build(drop, [x]).compile()
    ones = np.ones((2, 1000), np.float32)
    with loom.no_grad():
        assert not loom.is_training()
        np.testing.assert_array_equal(plan(ones).numpy(), ones)  # Eval: the identity
        with loom.train_mode():
            assert loom.is_training()
            y = plan(ones).numpy()
            with loom.eval_mode():
                np.testing.assert_array_equal(plan(ones).numpy(), ones)
        assert not loom.is_training()
    assert set(np.unique(y)) == {0.0, 2.0} and 0.4 < (y == 0).mean() < 0.6  # inverted dropout


def test_a_sequential_keeps_no_python_step():
    """A Python function step is called while the Sequential is built and not kept: no layer
    holds a Python object the collector cannot see."""
    import gc
    import weakref

    class Step:
        def __call__(self, h):
            return L.Linear(h, n_units=2)

    step = Step()
    alive = weakref.ref(step)
    seq = loom.Sequential([step, L.Activation(fn="tanh")], input=loom.Input(4))
    assert seq.kind == "Sequential" and seq.shape == (-1, 2)
    del step
    gc.collect()
    assert alive() is None
    with pytest.raises(TypeError, match="when the input is given"):
        loom.Sequential([lambda h: h])  # without input the steps would be kept: refused
