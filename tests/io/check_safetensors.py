#!/usr/bin/python3
"""Checks Loom's safetensors files against an independent reader, and the reverse direction.

Usage: check_safetensors.py DIR
  1. reads DIR/loom.safetensors (written by `loom_io_pycheck write DIR`) with the strict reader
     below -- the format's rules, the standard json module and numpy only, no safetensors
     package -- and compares every tensor and the metadata with values recomputed here from
     the formulas mirrored in tests/io/io_pycheck_main.cpp;
  2. checks the reader rejects a few broken files;
  3. writes DIR/python.safetensors with an independent writer (other key order, other data order,
     ASCII-escaped JSON) for `loom_io_pycheck read DIR` to load and check.
Exits non-zero on the first mismatch.
"""
import json
import math
import struct
import sys

import numpy as np

# safetensors dtype -> numpy little-endian dtype (BF16 is read as its uint16 bits)
DTYPES = {
    "BOOL": np.dtype("?"), "U8": np.dtype("u1"), "I8": np.dtype("i1"), "I16": np.dtype("<i2"),
    "U16": np.dtype("<u2"), "I32": np.dtype("<i4"), "U32": np.dtype("<u4"), "I64": np.dtype("<i8"),
    "U64": np.dtype("<u8"), "F16": np.dtype("<f2"), "BF16": np.dtype("<u2"), "F32": np.dtype("<f4"),
    "F64": np.dtype("<f8"),
}
MAX_HEADER = 100_000_000


class FormatError(Exception):
    pass


def no_duplicates(pairs):
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise FormatError(f"duplicate key in {keys}")
    return dict(pairs)


def bf16_to_f32(bits):
    """BF16 is the top half of a float32: shift the bits up and reinterpret."""
    return (bits.astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16_bits(values):
    """Exact conversion (the test values are representable in bfloat16): keep the top half."""
    values = np.asarray(values, dtype=np.float32)
    bits = values.view(np.uint32)
    assert np.all(((bits & 0xFFFF) == 0) | np.isnan(values)), "value not exact in bfloat16"
    return (bits >> 16).astype(np.uint16)


def read_safetensors(data, require_padding=False):
    """A strict reader: returns ({name: (dtype name, numpy array)}, metadata)."""
    if len(data) < 8:
        raise FormatError("shorter than 8 bytes")
    (n,) = struct.unpack("<Q", data[:8])
    if n > MAX_HEADER:
        raise FormatError("header too large")
    if n > len(data) - 8:
        raise FormatError("header runs past the end")
    if require_padding and n % 8:
        raise FormatError(f"header size {n} is not a multiple of 8")
    raw = data[8:8 + n]
    if not raw.startswith(b"{"):
        raise FormatError("header does not begin with '{'")
    if require_padding and raw.rstrip(b" ") != raw.rstrip(b" \t\r\n"):
        raise FormatError("padding other than spaces")
    header = json.loads(raw.decode("utf-8"), object_pairs_hook=no_duplicates)
    if not isinstance(header, dict):
        raise FormatError("header is not an object")
    buffer = memoryview(data)[8 + n:]
    metadata = header.pop("__metadata__", {})
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise FormatError("metadata is not a map of strings")
    spans, tensors = [], {}
    for name, info in header.items():
        if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
            raise FormatError(f"{name}: bad description {info}")
        dt, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
        if dt not in DTYPES:
            raise FormatError(f"{name}: unknown dtype {dt}")
        if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
            raise FormatError(f"{name}: bad shape {shape}")
        if (not isinstance(offsets, list) or len(offsets) != 2 or not all(type(o) is int and o >= 0 for o in offsets)):
            raise FormatError(f"{name}: bad offsets {offsets}")
        begin, end = offsets
        if not begin <= end <= len(buffer):
            raise FormatError(f"{name}: offsets {offsets} out of range ({len(buffer)} bytes)")
        if math.prod(shape) * DTYPES[dt].itemsize != end - begin:
            raise FormatError(f"{name}: shape {shape} of {dt} does not fill {offsets}")
        spans.append((begin, end, name))
        array = np.frombuffer(buffer[begin:end], dtype=DTYPES[dt]).reshape(shape)
        if dt == "BOOL" and not np.all(np.frombuffer(buffer[begin:end], dtype=np.uint8) <= 1):
            raise FormatError(f"{name}: bool bytes other than 0 and 1")
        tensors[name] = (dt, array)
    at = 0
    for begin, end, name in sorted(spans):
        if begin != at:
            raise FormatError(f"{name}: {'overlap' if begin < at else 'hole'} at byte {at}")
        at = end
    if at != len(buffer):
        raise FormatError(f"{len(buffer) - at} bytes after the last tensor")
    return tensors, metadata


def expected():
    """The formulas of tests/io/io_pycheck_main.cpp: name -> (safetensors dtype, numpy values)."""
    i = np.arange(12)
    f32 = (((i * 37) % 101 - 50) / 8.0 + i / 1024.0).astype(np.float32).reshape(3, 4)
    inf, nan = np.inf, np.nan
    bf16 = np.array([1.0, -2.5, 3.140625, 2.0 ** 100, -(2.0 ** -100), 0.0, 2.0 ** -130, nan], dtype=np.float32)
    return {
        "f32": ("F32", f32),
        "f32_t": ("F32", np.ascontiguousarray(f32.T)),
        "f64": ("F64", ((i - 5) / 3.0).reshape(2, 3, 2)),
        "f16": ("F16", np.array([-1.5, -0.0, 0.375, 65504.0, inf, -inf, nan, 2.0 ** -24], dtype=np.float16)),
        "bf16": ("BF16", bf16.reshape(2, 4)),
        "i32": ("I32", np.array([-2 ** 31, -1, 0, 2 ** 31 - 1, 123456789], dtype=np.int32)),
        "i64": ("I64", np.array([-2 ** 63, -1, 2 ** 53 + 1, 2 ** 63 - 1], dtype=np.int64).reshape(2, 2)),
        "u8": ("U8", np.arange(256, dtype=np.uint8).reshape(16, 16)),
        "bool": ("BOOL", np.array([True, False, False, True, False, False, True])),
        "bool_2d": ("BOOL", np.array([[True, False, False], [True, True, False]])),
        "scalar": ("F32", np.array(42.5, dtype=np.float32)),
        "scalar_i64": ("I64", np.array(-7, dtype=np.int64)),
        "empty_f32": ("F32", np.zeros((0,), dtype=np.float32)),
        "empty_i64": ("I64", np.zeros((2, 0, 3), dtype=np.int64)),
        "empty_bf16": ("BF16", np.zeros((0,), dtype=np.float32)),
    }


METADATA = {"author": "loom", "unicode": "\u017c\u00f3\u0142w \u2713", "empty": "", "json": '{"a": [1, 2]}'}


def same(got, want):
    """Equal values of the same dtype and shape; NaNs equal; the sign of zero counts."""
    if got.shape != want.shape:
        return False
    if got.dtype.kind == "f":
        both_nan = np.isnan(got) & np.isnan(want)
        return bool(np.all(both_nan | ((got == want) & (np.signbit(got) == np.signbit(want)))))
    return bool(np.array_equal(got, want))


def check_loom_file(path):
    with open(path, "rb") as f:
        data = f.read()
    tensors, metadata = read_safetensors(data, require_padding=True)
    want = expected()
    errors = []
    if set(tensors) != set(want):
        errors.append(f"tensor names {sorted(tensors)} != {sorted(want)}")
    for name, (dt, values) in want.items():
        if name not in tensors:
            continue
        got_dt, array = tensors[name]
        if got_dt != dt:
            errors.append(f"{name}: dtype {got_dt}, expected {dt}")
            continue
        if dt == "BF16":
            array = bf16_to_f32(array)
        if not same(array, values):
            errors.append(f"{name}: values {array!r} != expected {values!r}")
    if metadata != METADATA:
        errors.append(f"metadata {metadata} != {METADATA}")
    # the data are in the header's key order (sorted names), tightly packed
    order = sorted(tensors)
    if [n for _, n in sorted((tensors_offsets(data)[k], k) for k in order)] != order:
        errors.append("data not in name order")
    if errors:
        sys.exit("check_safetensors: " + path + ":\n  " + "\n  ".join(errors))
    print(f"check_safetensors: {path}: {len(tensors)} tensors and metadata match")


def tensors_offsets(data):
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    return {k: tuple(v["data_offsets"]) for k, v in header.items() if k != "__metadata__"}


def encode(tensors, metadata):
    """An independent writer: data in reverse name order, header in insertion order, ASCII JSON."""
    header, chunks, offset = {}, [], 0
    for name in sorted(tensors, reverse=True):
        dt, values = tensors[name]
        if dt == "BF16":
            raw = f32_to_bf16_bits(values).astype("<u2").tobytes()
        else:
            raw = np.ascontiguousarray(values, dtype=DTYPES[dt]).tobytes()
        header[name] = {"dtype": dt, "shape": list(values.shape), "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    header["__metadata__"] = metadata
    text = json.dumps(header, ensure_ascii=True).encode("ascii")
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(chunks)


def check_rejections():
    good = encode({"a": ("F32", np.ones(2, dtype=np.float32))}, {})
    cases = {
        "short": good[:5],
        "truncated": good[:-1],
        "trailing": good + b"\0",
        "duplicate": struct.pack("<Q", 16) + b'{"a":1, "a":2}  ',
        "hole": encode({"a": ("F32", np.ones(1, dtype=np.float32))}, {}).replace(b"[0, 4]", b"[4, 8]") + b"\0" * 4,
    }
    for what, data in cases.items():
        try:
            read_safetensors(data)
        except (FormatError, ValueError):
            continue
        sys.exit(f"check_safetensors: the reader accepted a broken file ({what})")
    # and it reads its own writer's output
    t, m = read_safetensors(encode(expected(), METADATA), require_padding=True)
    assert len(t) == len(expected()) and m == METADATA


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    directory = sys.argv[1]
    check_rejections()
    check_loom_file(directory + "/loom.safetensors")
    with open(directory + "/python.safetensors", "wb") as f:
        f.write(encode(expected(), METADATA))
    print(f"check_safetensors: wrote {directory}/python.safetensors")


if __name__ == "__main__":
    main()
