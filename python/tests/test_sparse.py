"""loom.SparseTensor and loom.sparse.mm from Python (docs/python.md, "Sparse tensors"): COO and
CSR from NumPy arrays, to_dense and the conversions against NumPy, the product's values against
NumPy and its gradients (the dense operand's and the values') against torch.sparse.mm."""
import numpy as np
import pytest

import loom

torch = pytest.importorskip("torch")
rng = np.random.default_rng(0)


def dense_of(indices, values, shape):
    # duplicates add up, as Loom's to_dense and torch's
    out = np.zeros(shape, values.dtype)
    np.add.at(out, tuple(indices), values)
    return out


def test_coo_and_csr_from_numpy_arrays():
    indices = np.array([[0, 1, 0], [2, 0, 2]], dtype=np.int64)  # (0, 2) twice: duplicates add up
    values = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    s = loom.SparseTensor.coo(indices, values, (2, 3))
    assert (s.layout, s.shape, s.ndim, s.nnz, s.dtype) == ("coo", (2, 3), 2, 3, loom.float32)
    assert not s.is_coalesced()
    np.testing.assert_array_equal(s.to_dense().numpy(), [[0, 0, 4], [2, 0, 0]])
    np.testing.assert_array_equal(s.indices.numpy(), indices)
    np.testing.assert_array_equal(s.values.numpy(), values)
    c = s.coalesce()
    assert c.is_coalesced() and c.nnz == 2
    r = c.to_csr()
    assert r.layout == "csr"
    np.testing.assert_array_equal(r.crow_indices.numpy(), [0, 1, 2])
    np.testing.assert_array_equal(r.col_indices.numpy(), [2, 0])
    np.testing.assert_array_equal(r.values.numpy(), [4, 2])
    np.testing.assert_array_equal(r.to_coo().indices.numpy(), [[0, 1], [2, 0]])
    csr = loom.SparseTensor.csr(np.array([0, 1, 2]), np.array([2, 0], dtype=np.int32), np.array([4.0, 2.0]), (2, 3))
    assert csr.dtype == loom.float64 and csr.shape == (2, 3)
    np.testing.assert_array_equal(csr.to_dense().numpy(), [[0, 0, 4], [2, 0, 0]])
    d = np.array([[0.0, 1.5], [0.0, 0.0], [-2.0, 0.0]], dtype=np.float32)
    for layout in ("coo", "csr"):
        back = loom.SparseTensor.from_dense(d, layout=layout)
        assert back.layout == layout and back.nnz == 2
        np.testing.assert_array_equal(back.to_dense().numpy(), d)
    # a 3-d COO tensor
    idx = rng.integers(0, 4, (3, 10))
    val = rng.standard_normal(10)
    np.testing.assert_array_equal(loom.SparseTensor.coo(idx, val, (4, 4, 4)).to_dense().numpy(), dense_of(idx, val, (4, 4, 4)))
    assert "SparseTensor" in repr(s) and "nnz=3" in repr(s) and "layout=coo" in repr(s)


def test_bad_arrays_are_loom_errors_naming_what_is_valid():
    values = np.ones(2, np.float32)
    with pytest.raises(loom.IndexError, match="out of range.*valid: 0 to 2"):
        loom.SparseTensor.coo(np.array([[0, 1], [0, 3]]), values, (2, 3))
    with pytest.raises(loom.DTypeError, match="values has dtype int64 .valid: float32, float64."):
        loom.SparseTensor.coo(np.array([[0, 1], [0, 1]]), np.ones(2, np.int64), (2, 3))
    with pytest.raises(loom.ShapeError):
        loom.SparseTensor.csr(np.array([0, 1]), np.array([0]), np.ones(1, np.float32), (2, 3))
    with pytest.raises(loom.ValueError, match="layout 'dense'.*'coo', 'csr'"):
        loom.SparseTensor.from_dense(np.ones((2, 2), np.float32), layout="dense")
    with pytest.raises(loom.ValueError):
        loom.SparseTensor.coo(np.array([[0], [0]]), np.ones(1, np.float32), (2, 3)).crow_indices


@pytest.mark.parametrize("layout", ["coo", "csr"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sparse_mm_values_and_gradients_match_torch(layout, dtype):
    m, k, n, nnz = 5, 7, 4, 12
    indices = np.stack([rng.integers(0, m, nnz), rng.integers(0, k, nnz)])
    if layout == "csr":  # CSR holds no duplicates: the entries of a coalesced COO tensor
        indices = np.unique(indices, axis=1)
    values = rng.standard_normal(indices.shape[1]).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    g = rng.standard_normal((m, n)).astype(dtype)

    lv = loom.tensor(values).requires_grad_()
    lb = loom.tensor(b).requires_grad_()
    a = loom.SparseTensor.coo(indices, lv, (m, k))
    if layout == "csr":
        a = a.to_csr()
    out = loom.sparse.mm(a, lb)
    assert out.shape == (m, n) and out.dtype == (loom.float32 if dtype == np.float32 else loom.float64)
    np.testing.assert_allclose(out.detach().numpy(), dense_of(indices, values, (m, k)) @ b, rtol=1e-5, atol=1e-6)
    out.backward(loom.tensor(g))

    tv = torch.tensor(values, requires_grad=True)
    tb = torch.tensor(b, requires_grad=True)
    ta = torch.sparse_coo_tensor(torch.tensor(indices), tv, (m, k))
    torch.sparse.mm(ta, tb).backward(torch.tensor(g))
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(lb.grad.numpy(), tb.grad.numpy(), **tol)
    # CSR from a COO: the values' gradient reaches the COO's values through the conversion
    np.testing.assert_allclose(lv.grad.numpy(), tv.grad.numpy(), **tol)


def test_sparse_mm_with_duplicates_promotion_and_operands_as_arrays():
    indices = np.array([[0, 0, 1], [1, 1, 0]])  # (0, 1) twice
    values = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    a = loom.SparseTensor.coo(indices, values, (2, 2))
    b = np.arange(6, dtype=np.float64).reshape(2, 3)
    out = loom.sparse.mm(a, b)  # float32 x float64 promotes; the dense operand may be an array
    assert out.dtype == loom.float64
    np.testing.assert_array_equal(out.numpy(), dense_of(indices, values.astype(np.float64), (2, 2)) @ b)
    np.testing.assert_array_equal((a @ b).numpy(), out.numpy())
    empty = loom.SparseTensor.coo(np.zeros((2, 0), np.int64), np.zeros(0, np.float32), (2, 2))
    np.testing.assert_array_equal(loom.sparse.mm(empty, np.ones((2, 3), np.float32)).numpy(), np.zeros((2, 3)))
    with pytest.raises(loom.ShapeError):
        loom.sparse.mm(a, np.ones((3, 3), np.float32))
    import loom.sparse as sp  # importable as a module

    assert sp.mm is loom.sparse.mm
