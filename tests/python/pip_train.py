"""The installed package at work (tests/python/pip_install.sh runs it in the fresh venv that
`pip install .` filled, from a folder outside the checkout): loom and its libloom come from the
venv, the stubs came with it, and a small MLP's loss falls at every one of six epochs of Model.fit."""
import os
import sys

import numpy as np

import loom

package = os.path.dirname(os.path.abspath(loom.__file__))
assert package.startswith(os.path.realpath(sys.prefix) + os.sep), f"loom imported from {package}, not from the venv {sys.prefix}"
mapped = {line.split()[-1] for line in open("/proc/self/maps") if "libloom" in line}
assert mapped, "no libloom mapped after import loom"
assert all(os.path.dirname(path) == package for path in mapped), f"libloom mapped from outside the package: {mapped}"
for stub in ("py.typed", os.path.join("_core", "__init__.pyi")):
    assert os.path.isfile(os.path.join(package, stub)), f"the wheel lacks loom/{stub}"

rng = np.random.default_rng(0)
x = rng.standard_normal((256, 8)).astype(np.float32)
y = (x[:, 0] + x[:, 1] > 0).astype(np.int64) + (x[:, 2] > 1).astype(np.int64)  # three classes
loom.random.seed(0)
model = loom.Model(loom.zoo.mlp(8, [16], 3), loss="sparse_categorical_crossentropy", optimizer=loom.optimizers.Adam(lr=1e-2),
                   metrics=["accuracy"])
losses = model.fit(x, y, epochs=6, batch_size=32, verbose=0)["loss"]
print("losses by epoch:", [round(v, 4) for v in losses])
# 1.17 to 0.47 on the machine of docs/python.md
assert all(b < a for a, b in zip(losses, losses[1:])) and losses[-1] < 0.6 * losses[0], f"the loss did not fall: {losses}"
print(f"pip_train: loom {package}, libloom {sorted(mapped)}: the loss fell from {losses[0]:.4f} to {losses[-1]:.4f}")
