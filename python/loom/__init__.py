"""Loom from Python: tensors, NumPy-named ops, autograd, layers and graphs, training, files
(docs/python.md).

`import loom` loads libloom only. The store, flow, dist and serve parts are to be submodules
that load their own libraries when imported.
"""
import sys as _sys

from . import _core
from ._core import *  # noqa: F401,F403  (the ops, Tensor, asarray, tensor, the errors)
from ._core import DType, Graph, Layer, Module, Plan, Sequential, SparseTensor, Tensor, TrainStep, data, io, linalg, random, sparse, zoo

# Importable as modules too: `import loom.linalg`, `from loom.random import Generator`.
_sys.modules[__name__ + ".linalg"] = linalg
_sys.modules[__name__ + ".random"] = random
_sys.modules[__name__ + ".zoo"] = zoo
_sys.modules[__name__ + ".io"] = io
_sys.modules[__name__ + ".data"] = data
_sys.modules[__name__ + ".sparse"] = sparse

from . import callbacks, layers, losses, metrics, optimizers, schedules  # noqa: E402
from .layers import Input  # noqa: E402
from .training import History, Model  # noqa: E402

load_model = io.load_model
save_model = io.save_model


def _layer_options(self):
    """The layer's options as a dict (what it is saved with, and the keyword arguments of its kind)."""
    import json

    return json.loads(self._options_json)


# Members added in Python are set with setattr: the stubs declare them (python/stubs.pat), and
# mypy, reading the stubs, takes a plain assignment for the replacement of a method.
setattr(Layer, "options", property(_layer_options))

bool_ = DType.bool_
uint8 = DType.uint8
int32 = DType.int32
int64 = DType.int64
float16 = DType.float16
bfloat16 = DType.bfloat16
float32 = DType.float32
float64 = DType.float64


class no_grad:
    """Ops inside record no gradients (on this thread): `with loom.no_grad(): ...`, or as a
    decorator."""

    def __enter__(self):
        self._previous = _core.is_grad_enabled()
        _core.set_grad_enabled(False)
        return self

    def __exit__(self, *exc):
        _core.set_grad_enabled(self._previous)
        return False

    def __call__(self, f):
        def wrapped(*args, **kwargs):
            with no_grad():
                return f(*args, **kwargs)

        wrapped.__name__ = getattr(f, "__name__", "wrapped")
        wrapped.__doc__ = getattr(f, "__doc__", None)
        return wrapped


class enable_grad(no_grad):
    """Turns recording back on inside a no_grad region."""

    def __enter__(self):
        self._previous = _core.is_grad_enabled()
        _core.set_grad_enabled(True)
        return self


def grad(f, inputs, grad_output=None):
    """Gradients of a scalar result with respect to each input, returned (not accumulated in
    .grad).

    grad(f, inputs): calls f(*xs) on differentiable copies xs of the inputs (tensors or anything
    loom.asarray takes) and returns a list with one gradient per input.
    grad(output, inputs): the gradients of a tensor already computed from the inputs.
    grad_output seeds a non-scalar output (its shape)."""
    if isinstance(f, Tensor):
        return _core._grad(f, list(inputs), grad_output)
    xs = [asarray(x).detach().requires_grad_() for x in inputs]  # noqa: F405
    with enable_grad():
        out = f(*xs)
    return _core._grad(out, xs, grad_output)


def _method(fn, name):
    def method(self, *args, **kwargs):
        return fn(self, *args, **kwargs)

    method.__name__ = name
    # the op's docstring without the signature nanobind puts first (the method's differs)
    doc = next((entry[1] for entry in fn.__nb_signature__ if entry[1]), "")
    method.__doc__ = f"t.{name}(...) is loom.{name}(t, ...): {doc}"
    return method


# NumPy's array methods that are the ops with the array first: t.sum(axis=1), t.reshape(2, 3).
for _name in ("sum", "mean", "prod", "max", "min", "var", "std", "argmax", "argmin", "all", "any", "cumsum",
              "logsumexp", "swapaxes", "flatten", "clip", "round", "take", "repeat", "squeeze", "nonzero",
              "softmax", "log_softmax", "expand_dims", "broadcast_to", "flip"):
    setattr(Tensor, _name, _method(getattr(_core, _name), _name))


def _reshape(self, *shape):
    """t.reshape(2, 3) or t.reshape((2, 3)), as NumPy's."""
    return reshape(self, shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape)  # noqa: F405


def _transpose(self, *axes):
    """t.transpose() reverses the axes; t.transpose(1, 0, 2) or t.transpose((1, 0, 2))."""
    if len(axes) == 1 and not isinstance(axes[0], int):
        axes = axes[0]
    return transpose(self, axes if axes else None)  # noqa: F405


def _tolist(self):
    """The elements as nested Python lists (a Python number for a 0-d tensor), as NumPy's tolist."""
    return self.numpy().tolist() if self.dtype != bfloat16 else self.astype(float32).numpy().tolist()


for _name, _fn in (("reshape", _reshape), ("transpose", _transpose), ("permute", _transpose), ("tolist", _tolist)):
    setattr(Tensor, _name, _fn)
del _name, _fn
