"""Zero-copy both ways (NumPy's buffer protocol and __array_interface__, DLPack), the copy rule,
lifetimes, and no leak over 10^5 conversions (docs/python.md, "From NumPy and DLPack")."""
import gc
import sys

import numpy as np
import pytest

import loom


def address(a):
    return a.__array_interface__["data"][0]


def test_asarray_shares_numpy_memory_both_ways():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = loom.asarray(a)
    assert t.data_ptr() == address(a)
    assert t.shape == (3, 4) and t.dtype == loom.float32 and t.strides == a.strides
    a[1, 2] = 100.0  # NumPy writes, Loom sees
    assert t[1, 2].item() == 100.0
    t[0, 0] = -5.0  # Loom writes, NumPy sees
    assert a[0, 0] == -5.0
    t += 1  # in place, through the shared memory
    assert a[2, 3] == 12.0


def test_numpy_export_shares_memory_and_keeps_the_tensor():
    t = loom.arange(6, dtype=loom.float64).reshape(2, 3)
    a = t.numpy()
    b = np.asarray(t)
    assert address(a) == t.data_ptr() == address(b)
    assert a.base is t  # NumPy keeps the tensor (and so its memory) alive
    a[1, 1] = 42.0
    assert t[1, 1].item() == 42.0
    t[0, 2] = 7.0
    assert b[0, 2] == 7.0
    # a strided view exports as one, with NumPy's byte strides
    v = t.T
    assert v.numpy().strides == (8, 24) and address(v.numpy()) == t.data_ptr()
    np.testing.assert_array_equal(v.numpy(), a.T)


@pytest.mark.parametrize("dtype", ["bool", "uint8", "int32", "int64", "float16", "float32", "float64"])
def test_every_dtype_round_trips_without_copy(dtype):
    a = (np.arange(10) % 3).astype(dtype)
    t = loom.asarray(a)
    assert t.dtype == getattr(loom, dtype if dtype != "bool" else "bool_")
    assert t.data_ptr() == address(a)
    back = t.numpy()
    assert back.dtype == a.dtype and address(back) == address(a)
    np.testing.assert_array_equal(back, a)


def test_views_zero_copy_negative_and_uneven_strides():
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    for view in (base[::-1], base[:, ::-2], base[1:, 2:5], base.T, base[::2, ::3]):
        t = loom.asarray(view)
        assert t.data_ptr() == address(view), view.strides
        np.testing.assert_array_equal(t.numpy(), view)
        np.testing.assert_array_equal((t * 2).numpy(), view * 2)
    rev = base[:, ::-1]
    loom.asarray(rev)[0, 0] = 99.0  # writes through a negative stride
    assert base[0, 5] == 99.0


def test_copy_rule_read_only_byte_swapped_unaligned():
    a = np.arange(6, dtype=np.float32)
    a.flags.writeable = False
    t = loom.asarray(a)
    assert t.data_ptr() != address(a)  # Loom has no read-only tensors: a copy
    np.testing.assert_array_equal(t.numpy(), a)

    swapped = np.arange(5, dtype=">f8")
    t = loom.asarray(swapped)
    assert t.dtype == loom.float64
    np.testing.assert_array_equal(t.numpy(), np.arange(5.0))

    raw = bytearray(4 * 5 + 1)
    unaligned = np.frombuffer(raw, dtype=np.float32, offset=1)
    unaligned[:] = [1, 2, 3, 4, 5]
    t = loom.asarray(unaligned)
    assert t.data_ptr() % 4 == 0
    np.testing.assert_array_equal(t.numpy(), [1, 2, 3, 4, 5])

    t = loom.tensor(np.ones(3, np.float32))  # loom.tensor always copies
    assert t.data_ptr() != 0 and t.numpy().base is t


def test_dtypes_loom_has_none_of_are_refused_with_the_valid_ones():
    with pytest.raises(loom.DTypeError, match="valid: bool, uint8, int32") as e:
        loom.asarray(np.zeros(3, np.int16))
    assert isinstance(e.value, TypeError)
    t = loom.asarray(np.arange(3, dtype=np.int16), dtype="int32")
    np.testing.assert_array_equal(t.numpy(), [0, 1, 2])


def test_python_data_and_scalars():
    assert loom.tensor([1.0, 2.0]).dtype == loom.float32  # Loom's default float
    assert loom.tensor([1, 2]).dtype == loom.int64
    assert loom.tensor([[True], [False]]).shape == (2, 1)
    assert loom.asarray(3.5).shape == ()
    assert loom.tensor([1, 2], dtype=loom.float64).dtype == loom.float64


def test_view_outlives_its_source():
    a = np.arange(1000, dtype=np.float64)
    t = loom.asarray(a)
    view = t[10:20]
    del a, t
    gc.collect()
    np.testing.assert_array_equal(view.numpy(), np.arange(10, 20, dtype=np.float64))

    t = loom.arange(100, dtype=loom.float32)
    arr = t[50:].numpy()
    del t
    gc.collect()
    np.testing.assert_array_equal(arr, np.arange(50, 100, dtype=np.float32))


def test_dlpack_both_ways_with_torch():
    torch = pytest.importorskip("torch")
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    t = loom.asarray(x)  # through __dlpack__
    assert t.data_ptr() == x.data_ptr()
    x[0, 1] = 50.0
    assert t[0, 1].item() == 50.0
    t[2, 3] = -1.0
    assert x[2, 3].item() == -1.0

    u = loom.arange(6, dtype=loom.int64).reshape(2, 3)
    y = torch.from_dlpack(u)
    assert y.data_ptr() == u.data_ptr() and y.dtype == torch.int64
    y[1, 2] = 77
    assert u[1, 2].item() == 77
    del u
    gc.collect()
    assert y.tolist() == [[0, 1, 2], [3, 4, 77]]  # the capsule keeps the tensor alive

    n = np.from_dlpack(loom.ones((2, 2)))
    assert n.dtype == np.float32 and n.sum() == 4


def test_export_refuses_a_tensor_that_requires_grad():
    t = loom.ones((2,)).requires_grad_()
    with pytest.raises(loom.AutogradError, match="detach"):
        t.numpy()
    np.testing.assert_array_equal(t.detach().numpy(), [1, 1])


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def test_no_leak_over_a_hundred_thousand_conversions():
    a = np.ones((4, 4), np.float32)
    for _ in range(2000):  # warm up caches and free lists
        loom.asarray(a).numpy()
    gc.collect()
    refs, rss = sys.getrefcount(a), rss_bytes()
    for _ in range(100_000):
        t = loom.asarray(a)
        b = t.numpy()
        loom.tensor(b)
    del t, b
    gc.collect()
    assert sys.getrefcount(a) == refs  # every buffer view released
    grown = rss_bytes() - rss
    # one leaked tensor per round would be > 100000 * 64 bytes = 6.4 MB
    assert grown < 4 * 2**20, f"RSS grew by {grown} bytes over 10^5 conversions"


def test_other_buffers_and_bfloat16_through_dlpack():
    import array

    raw = bytearray(8)
    t = loom.asarray(memoryview(raw).cast("f"))  # any writable buffer, not only NumPy's
    t[1] = 2.5
    assert np.frombuffer(raw, np.float32)[1] == 2.5
    ints = array.array("q", [1, 2, 3])
    assert loom.asarray(ints).dtype == loom.int64 and loom.asarray(ints).data_ptr() == ints.buffer_info()[0]
    assert loom.asarray(b"\x01\x02").dtype == loom.uint8  # bytes: read-only, so a copy
    torch = pytest.importorskip("torch")
    x = torch.arange(4, dtype=torch.bfloat16)
    b = loom.asarray(x)
    assert b.dtype == loom.bfloat16 and b.data_ptr() == x.data_ptr()
    assert b.astype(loom.float32).tolist() == [0.0, 1.0, 2.0, 3.0]


def test_import_loom_loads_libloom_only():
    import subprocess

    maps = subprocess.run([sys.executable, "-c", "import loom; print(open('/proc/self/maps').read())"],
                          capture_output=True, text=True, check=True).stdout
    assert "libloom.so" in maps
    for other in ("libloom_store", "libloom_serve", "libloom_dist", "libsqlite3", "libpq", "libmpi"):
        assert other not in maps, other
