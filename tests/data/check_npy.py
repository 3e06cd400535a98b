"""Loads the files tests/data/npy_dump_main.cpp wrote with NumPy and compares them."""
import sys

import numpy as np

d = sys.argv[1]
a = np.arange(12).reshape(3, 4)
expected = {
    'f4': (a * 0.5).astype('<f4'),
    'f8': (a * 0.25).astype('<f8'),
    'i4': (a - 6).astype('<i4'),
    'i8': (a * 1000000000000).astype('<i8'),
    'u1': (a * 20).astype('|u1'),
    'b1': a % 3 == 0,
    'f2': (a * 0.5).astype('<f2'),
    'transposed': a.astype('<f4').T,
    'scalar': np.array(3.5),
    'empty': np.zeros((0, 5), dtype='<f4'),
    'vec': np.arange(7, dtype='<i4'),
}
failures = []
for name, want in expected.items():
    got = np.load(f'{d}/{name}.npy', allow_pickle=False)
    if got.dtype != want.dtype or got.shape != want.shape or not np.array_equal(got, want):
        failures.append(f'{name}.npy: got {got.dtype} {got.shape} {got!r}, want {want.dtype} {want.shape}')
    with open(f'{d}/{name}.npy', 'rb') as f:
        version = np.lib.format.read_magic(f)
        np.lib.format._read_array_header(f, version)  # validates the header dictionary
        if f.tell() % 64 != 0:
            failures.append(f'{name}.npy: data starts at {f.tell()}, not on a 64-byte boundary')
with np.load(f'{d}/arrays.npz', allow_pickle=False) as z:
    if sorted(z.files) != ['labels', 'x']:
        failures.append(f'arrays.npz: members {z.files}')
    else:
        if not np.array_equal(z['x'], (a * 0.5).astype('<f4')) or z['x'].dtype != np.float32:
            failures.append('arrays.npz: x differs')
        if not np.array_equal(z['labels'], np.arange(5)) or z['labels'].dtype != np.int64:
            failures.append('arrays.npz: labels differ')
import zipfile
with zipfile.ZipFile(f'{d}/arrays.npz') as zf:
    bad = zf.testzip()
    if bad is not None:
        failures.append(f'arrays.npz: CRC of {bad} is wrong')
if failures:
    print('\n'.join(failures))
    sys.exit(1)
print(f'{len(expected)} NPY files and 1 NPZ archive written by Loom load in NumPy {np.__version__}')
