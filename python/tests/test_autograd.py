"""Autograd from Python against PyTorch's gradients (Debian's python3-torch)."""
import numpy as np
import pytest

import loom

torch = pytest.importorskip("torch")
rng = np.random.default_rng(1)


def loom_and_torch(*arrays):
    ls = [loom.tensor(a).requires_grad_() for a in arrays]
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    return ls, ts


CASES = {
    "mlp": (lambda m, x, w, b: m.sum(m.tanh(x @ w + b) ** 2),
            lambda x, w, b: torch.sum(torch.tanh(x @ w + b) ** 2),
            [(5, 3), (3, 4), (4,)]),
    "broadcast": (lambda m, x, w, b: m.mean(m.exp(x[:, :1] * b[:3]) / (1 + w[0, :3] ** 2)),
                  lambda x, w, b: torch.mean(torch.exp(x[:, :1] * b[:3]) / (1 + w[0, :3] ** 2)),
                  [(5, 3), (3, 4), (4,)]),
    "softmax": (lambda m, x, w, b: m.sum(m.log_softmax(x @ w, axis=1) * m.sigmoid(b)),
                lambda x, w, b: torch.sum(torch.log_softmax(x @ w, dim=1) * torch.sigmoid(b)),
                [(5, 3), (3, 4), (4,)]),
    "indexing": (lambda m, x, w, b: m.sum(x[::-1, 1:] * w[:2].T[:5, 0:1] + m.max(b)),
                 lambda x, w, b: torch.sum(x.flip(0)[:, 1:] * w[:2].T[:5, 0:1] + torch.max(b)),
                 [(5, 3), (3, 5), (4,)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_backward_matches_torch(name):
    f_loom, f_torch, shapes = CASES[name]
    arrays = [rng.standard_normal(s) for s in shapes]
    ls, ts = loom_and_torch(*arrays)
    out = f_loom(loom, *ls)
    out.backward()
    ref = f_torch(*ts)
    ref.backward()
    np.testing.assert_allclose(out.item(), ref.item(), rtol=1e-10)
    for l, t in zip(ls, ts):
        assert l.grad is not None and l.grad.shape == tuple(t.grad.shape)
        np.testing.assert_allclose(l.grad.numpy(), t.grad.numpy(), rtol=1e-9, atol=1e-12)


def test_grad_function_form_and_seeded_output():
    x = rng.standard_normal((3, 4))
    w = rng.standard_normal((4, 2))
    gx, gw = loom.grad(lambda a, b: loom.sum(loom.sin(a @ b)), [x, w])
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    ex, ew = torch.autograd.grad(torch.sum(torch.sin(tx @ tw)), [tx, tw])
    np.testing.assert_allclose(gx.numpy(), ex.numpy(), rtol=1e-10)
    np.testing.assert_allclose(gw.numpy(), ew.numpy(), rtol=1e-10)

    a = loom.tensor(x).requires_grad_()
    y = a * a
    seed = np.ones_like(x) * 0.5
    (g,) = loom.grad(y, [a], grad_output=seed)
    np.testing.assert_allclose(g.numpy(), x, rtol=1e-12)  # 2 x * 0.5
    assert a.grad is None  # returned, not accumulated


def test_grad_accumulates_and_no_grad_records_nothing():
    a = loom.tensor([1.0, 2.0, 3.0]).requires_grad_()
    assert a.requires_grad and a.is_leaf
    (a * 2).sum().backward()
    (a * 3).sum().backward()
    assert a.grad.tolist() == [5.0, 5.0, 5.0]
    a.zero_grad()
    assert a.grad is None
    with loom.no_grad():
        b = a * 2
        assert not loom.is_grad_enabled()
    assert loom.is_grad_enabled()
    assert not b.requires_grad

    @loom.no_grad()
    def step(t):
        return t + 1

    assert not step(a).requires_grad
    c = a.detach()
    assert not c.requires_grad and c.shares_memory_with(a)


def test_nn_ops_match_torch_values_and_gradients():
    F = torch.nn.functional
    x = rng.standard_normal((2, 3, 8, 8))
    w = rng.standard_normal((4, 3, 3, 3))
    b = rng.standard_normal((4,))
    labels = np.array([1, 3])
    (lx, lw, lb), (tx, tw, tb) = loom_and_torch(x, w, b)

    def loom_net(m, x, w, b):
        y = m.conv2d(x, w, b, stride=1, padding="same")
        y = m.max_pool2d(m.relu(y), 2)
        y = m.layer_norm(y, (4, 4))
        return m.cross_entropy(m.mean(y, axis=(2, 3)), labels)

    out = loom_net(loom, lx, lw, lb)
    out.backward()
    y = F.conv2d(tx, tw, tb, stride=1, padding="same")
    y = F.layer_norm(F.max_pool2d(F.relu(y), 2), (4, 4))
    ref = F.cross_entropy(y.mean(dim=(2, 3)), torch.tensor(labels))
    ref.backward()
    np.testing.assert_allclose(out.item(), ref.item(), rtol=1e-10)
    for l, t in ((lx, tx), (lw, tw), (lb, tb)):
        np.testing.assert_allclose(l.grad.numpy(), t.grad.numpy(), rtol=1e-8, atol=1e-12)
