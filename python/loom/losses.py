"""Losses by Keras' names as objects: loom.losses.mse, loom.losses.sparse_categorical_crossentropy,
... (every name of train::Loss::valid_names()), each callable on (prediction, target) and, given to
loom.Model, run as Loom's own loss (no call into Python per step). Loss(name) makes one by name."""
from . import _core


class Loss:
    def __init__(self, name):
        if name not in _core._loss_names():
            raise ValueError(f"loom.losses: unknown loss '{name}' (valid: {', '.join(_core._loss_names())})")
        self._loom_name = name
        self.__name__ = name

    def __call__(self, prediction, target):
        return _core._loss(self._loom_name, prediction, target)

    def __repr__(self):
        return f"loom.losses.Loss({self._loom_name!r})"


def names():
    return list(_core._loss_names())


for _n in _core._loss_names():
    globals()[_n] = Loss(_n)
del _n
