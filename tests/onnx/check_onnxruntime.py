"""Runs the ONNX models Loom exported (tests/onnx/onnx_export_tests.cpp) in ONNX Runtime and
compares with Loom's outputs.

Usage: check_onnxruntime.py DIR [EXPECTED_COUNT]
For every DIR/NAME.onnx and batch in (1, 3): feeds input<i> of DIR/NAME_b<batch>.npz to the
model's inputs in order, and requires each output to have Loom's shape and dtype and to be within
1e-5 of Loom's output<j> relative to its scale (max |ort - loom| <= 1e-5 * max(max |loom|, 1e-6)).
Prints one line per model and batch with the relative difference; exits non-zero on any failure
or when fewer than EXPECTED_COUNT models are found.
Runs under the pinned ONNX Runtime (tests/onnx/requirements.txt, build/onnx-venv).
"""
import glob
import os
import sys

import numpy as np
import onnxruntime as ort

TOLERANCE = 1e-5


def main():
    folder = sys.argv[1]
    expected = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    models = sorted(glob.glob(os.path.join(folder, "*.onnx")))
    print(f"onnxruntime {ort.__version__}: {len(models)} models in {folder}")
    if len(models) < expected:
        print(f"FAIL: expected at least {expected} models")
        return 1
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    failures, worst = [], 0.0
    for path in models:
        name = os.path.basename(path)[: -len(".onnx")]
        try:
            session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        except Exception as e:  # noqa: BLE001 - report every model
            failures.append(f"{name}: ONNX Runtime cannot load it: {e}")
            continue
        for batch in (1, 3):
            data = np.load(os.path.join(folder, f"{name}_b{batch}.npz"))
            feeds = {i.name: data[f"input{k}"] for k, i in enumerate(session.get_inputs())}
            try:
                outs = session.run(None, feeds)
            except Exception as e:  # noqa: BLE001
                failures.append(f"{name} batch {batch}: ONNX Runtime failed: {e}")
                continue
            for j, got in enumerate(outs):
                want = data[f"output{j}"]
                if got.shape != want.shape or got.dtype != want.dtype:
                    failures.append(f"{name} batch {batch} output {j}: {got.dtype}{got.shape}, Loom {want.dtype}{want.shape}")
                    continue
                scale = max(float(np.max(np.abs(want))) if want.size else 0.0, 1e-6)
                diff = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64)))) if want.size else 0.0
                rel = diff / scale
                worst = max(worst, rel)
                ok = rel <= TOLERANCE
                print(f"  {'ok  ' if ok else 'FAIL'} {name} batch {batch} output {j} {tuple(want.shape)}: "
                      f"max |diff| {diff:.3g}, scale {scale:.3g}, relative {rel:.3g}")
                if not ok:
                    failures.append(f"{name} batch {batch} output {j}: relative difference {rel:.3g} > {TOLERANCE}")
    print(f"worst relative difference {worst:.3g} (tolerance {TOLERANCE})")
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
