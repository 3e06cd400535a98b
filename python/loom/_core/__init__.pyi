from collections.abc import Sequence
import enum
from typing import Any

import numpy.typing

from . import (
    data as data,
    io as io,
    linalg as linalg,
    random as random,
    sparse as sparse,
    zoo as zoo
)


import builtins
import collections.abc
import typing
import numpy
import numpy.typing

# The types of the bindings' arguments (python/src/common.h's typed objects), as aliases:
# what loom.asarray takes (a Tensor, or what NumPy makes an array of), a dtype (loom.float32,
# "float32", numpy.float32, ...), a shape or per-axis sizes, axes, tensor operands in a list.
ArrayLike: typing.TypeAlias = Tensor | numpy.typing.ArrayLike
ArraySequence: typing.TypeAlias = collections.abc.Sequence[ArrayLike]
DTypeLike: typing.TypeAlias = DType | numpy.typing.DTypeLike
ShapeLike: typing.TypeAlias = int | collections.abc.Sequence[int]
AxesLike: typing.TypeAlias = int | collections.abc.Sequence[int]

class Error(Exception):
    """Every error Loom raises."""

class ShapeError(Error, builtins.ValueError):
    """Shapes that do not fit the op."""

class DTypeError(Error, builtins.TypeError):
    """A dtype the op does not take."""

class DeviceError(Error, builtins.ValueError):
    """A device that is unknown or does not fit."""

class IndexError(Error, builtins.IndexError):
    """An index out of range."""

class ValueError(Error, builtins.ValueError):
    """An argument's value is not valid."""

class LinAlgError(ValueError):
    """A matrix the decomposition cannot take."""

class OutOfMemoryError(Error, builtins.MemoryError):
    """The memory limit or the system's memory ran out."""

class AutogradError(Error, builtins.RuntimeError):
    """A gradient that cannot be taken."""

class IOError(Error, builtins.OSError):
    """A file or stream that cannot be read or written."""

class DType(enum.Enum):
    """Loom's element types; loom.float32 and the others are its values."""

    bool_ = 0

    uint8 = 1

    int32 = 2

    int64 = 3

    float16 = 4

    bfloat16 = 5

    float32 = 6

    float64 = 7

class Tensor:
    """A strided view of Loom memory, with autograd (docs/python.md)."""

    def __init__(self, data: ArrayLike, dtype: DTypeLike | None = None) -> None: ...

    def __add__(self, other: ArrayLike, /) -> Tensor: ...

    def __radd__(self, other: ArrayLike, /) -> Tensor: ...

    def __sub__(self, other: ArrayLike, /) -> Tensor: ...

    def __rsub__(self, other: ArrayLike, /) -> Tensor: ...

    def __mul__(self, other: ArrayLike, /) -> Tensor: ...

    def __rmul__(self, other: ArrayLike, /) -> Tensor: ...

    def __mod__(self, other: ArrayLike, /) -> Tensor: ...

    def __rmod__(self, other: ArrayLike, /) -> Tensor: ...

    def __pow__(self, other: ArrayLike, mod: None = None, /) -> Tensor: ...

    def __rpow__(self, other: ArrayLike, mod: None = None, /) -> Tensor: ...

    def __and__(self, other: ArrayLike, /) -> Tensor: ...

    def __rand__(self, other: ArrayLike, /) -> Tensor: ...

    def __xor__(self, other: ArrayLike, /) -> Tensor: ...

    def __rxor__(self, other: ArrayLike, /) -> Tensor: ...

    def __or__(self, other: ArrayLike, /) -> Tensor: ...

    def __ror__(self, other: ArrayLike, /) -> Tensor: ...

    def __floordiv__(self, other: ArrayLike, /) -> Tensor: ...

    def __rfloordiv__(self, other: ArrayLike, /) -> Tensor: ...

    def __truediv__(self, other: ArrayLike, /) -> Tensor: ...

    def __rtruediv__(self, other: ArrayLike, /) -> Tensor: ...

    def __matmul__(self, other: ArrayLike, /) -> Tensor: ...

    def __rmatmul__(self, other: ArrayLike, /) -> Tensor: ...

    @property
    def shape(self) -> tuple[int, ...]:
        """The size of each axis, a tuple."""

    @property
    def strides(self) -> tuple[int, ...]:
        """
        The step between elements along each axis, in bytes (NumPy's unit; C++ counts elements).
        """

    @property
    def ndim(self) -> int:
        """The number of axes."""

    @property
    def size(self) -> int:
        """The number of elements."""

    @property
    def itemsize(self) -> int:
        """The bytes of one element."""

    @property
    def nbytes(self) -> int:
        """The bytes of the elements (size * itemsize)."""

    @property
    def dtype(self) -> DType:
        """The element type, a loom.DType."""

    @property
    def device(self) -> str:
        """The device the memory is on, by name ("cpu")."""

    @property
    def T(self) -> Tensor:
        """The tensor with its axes reversed, a view."""

    def data_ptr(self) -> int:
        """The address of the first element (as torch's data_ptr)."""

    def is_contiguous(self) -> bool:
        """Whether the elements lie in row-major order without gaps."""

    def shares_memory_with(self, other: Tensor) -> bool:
        """Whether this tensor and other are views of the same memory."""

    def __len__(self) -> int: ...

    def __bool__(self) -> bool: ...

    def __float__(self) -> float: ...

    def __int__(self) -> int: ...

    def item(self) -> bool | int | float:
        """
        The value of a one-element tensor as a Python bool, int or float (by dtype).
        """

    def __repr__(self) -> str: ...

    def __str__(self) -> str: ...

    def astype(self, dtype: DTypeLike) -> Tensor:
        """A copy converted to dtype."""

    def copy(self) -> Tensor:
        """A copy with memory of its own, contiguous."""

    def contiguous(self) -> Tensor:
        """The tensor itself when contiguous, else a contiguous copy."""

    def fill_(self, value: bool | int | float) -> Tensor:
        """Sets every element to value, in place; returns the tensor."""

    def copy_(self, src: ArrayLike) -> Tensor:
        """
        Copies src (broadcast to this tensor's shape) into this tensor's memory; returns the tensor.
        """

    @property
    def __array_interface__(self) -> dict: ...

    def numpy(self) -> numpy.typing.NDArray[Any]:
        """A NumPy array over the same memory (no copy); writes go both ways."""

    def __dlpack__(self, stream: object | None = None) -> object: ...

    def __dlpack_device__(self) -> tuple[int, int]: ...

    def __getitem__(self, arg: object, /) -> Tensor: ...

    def __setitem__(self, arg0: object, arg1: ArrayLike, /) -> None: ...

    @property
    def requires_grad(self) -> bool:
        """
        Whether backward() computes a gradient for this tensor (settable on leaves).
        """

    @requires_grad.setter
    def requires_grad(self, arg: bool, /) -> None: ...

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        """Sets requires_grad, in place; returns the tensor."""

    @property
    def grad(self) -> Tensor | None:
        """The gradient accumulated by backward(), or None before one."""

    @property
    def is_leaf(self) -> bool:
        """
        Whether the tensor was made by the user rather than computed by a recorded op.
        """

    def zero_grad(self) -> None:
        """Drops the accumulated gradient (grad becomes None)."""

    def detach(self) -> Tensor:
        """A view of the same memory without history (requires_grad False)."""

    def backward(self, grad: ArrayLike | None = None, retain_graph: bool = False) -> None:
        """
        Accumulates the gradients of this tensor into the .grad of the leaves it was computed from. grad seeds a non-scalar tensor; retain_graph=True keeps the graph for another backward.
        """

    def __neg__(self) -> Tensor: ...

    def __pos__(self) -> Tensor: ...

    def __abs__(self) -> Tensor: ...

    def __invert__(self) -> Tensor: ...

    def __eq__(self, other: object | None) -> Tensor: ...  # type: ignore[override]

    def __ne__(self, other: object | None) -> Tensor: ...  # type: ignore[override]

    def __lt__(self, other: ArrayLike) -> Tensor: ...

    def __le__(self, other: ArrayLike) -> Tensor: ...

    def __gt__(self, other: ArrayLike) -> Tensor: ...

    def __ge__(self, other: ArrayLike) -> Tensor: ...

    def __iadd__(self, other: ArrayLike, /) -> Tensor: ...

    def __isub__(self, other: ArrayLike, /) -> Tensor: ...

    def __imul__(self, other: ArrayLike, /) -> Tensor: ...

    def __itruediv__(self, other: ArrayLike, /) -> Tensor: ...

    __hash__: typing.ClassVar[None]  # type: ignore[assignment]

    __array_priority__: int = 1000

    def sum(self, axis: AxesLike | None = None, keepdims: bool = False) -> Tensor:
        """
        t.sum(...) is loom.sum(t, ...): The sum over axis (None: every axis; an int or a tuple), keepdims as NumPy's.
        """

    def mean(self, axis: AxesLike | None = None, keepdims: bool = False) -> Tensor:
        """
        t.mean(...) is loom.mean(t, ...): The mean over axis (None: every axis; an int or a tuple), keepdims as NumPy's.
        """

    def prod(self, axis: AxesLike | None = None, keepdims: bool = False) -> Tensor:
        """
        t.prod(...) is loom.prod(t, ...): The product over axis (None: every axis; an int or a tuple), keepdims as NumPy's.
        """

    def max(self, axis: AxesLike | None = None, keepdims: bool = False) -> Tensor:
        """
        t.max(...) is loom.max(t, ...): The largest element over axis (None: every axis; an int or a tuple), keepdims as NumPy's.
        """

    def min(self, axis: AxesLike | None = None, keepdims: bool = False) -> Tensor:
        """
        t.min(...) is loom.min(t, ...): The smallest element over axis (None: every axis; an int or a tuple), keepdims as NumPy's.
        """

    def var(self, axis: AxesLike | None = None, ddof: int = 0, keepdims: bool = False) -> Tensor:
        """
        t.var(...) is loom.var(t, ...): The variance over axis, dividing by n - ddof; keepdims as NumPy's.
        """

    def std(self, axis: AxesLike | None = None, ddof: int = 0, keepdims: bool = False) -> Tensor:
        """
        t.std(...) is loom.std(t, ...): The standard deviation over axis, dividing by n - ddof; keepdims as NumPy's.
        """

    def argmax(self, axis: int | None = None, keepdims: bool = False) -> Tensor:
        """
        t.argmax(...) is loom.argmax(t, ...): The index of the largest element along axis (None: of the flattened x).
        """

    def argmin(self, axis: int | None = None, keepdims: bool = False) -> Tensor:
        """
        t.argmin(...) is loom.argmin(t, ...): The index of the smallest element along axis (None: of the flattened x).
        """

    def all(self, axis: AxesLike | None = None, keepdims: bool = False) -> Tensor:
        """
        t.all(...) is loom.all(t, ...): Whether every element over axis is true (a bool tensor); keepdims as NumPy's.
        """

    def any(self, axis: AxesLike | None = None, keepdims: bool = False) -> Tensor:
        """
        t.any(...) is loom.any(t, ...): Whether some element over axis is true (a bool tensor); keepdims as NumPy's.
        """

    def cumsum(self, axis: int | None = None) -> Tensor:
        """
        t.cumsum(...) is loom.cumsum(t, ...): The running sum along axis (None: of the flattened x).
        """

    def logsumexp(self, axis: AxesLike | None = None, keepdims: bool = False) -> Tensor:
        """
        t.logsumexp(...) is loom.logsumexp(t, ...): log(sum(exp(x))) over axis, computed without overflow; keepdims as NumPy's.
        """

    def swapaxes(self, axis1: int, axis2: int) -> Tensor:
        """
        t.swapaxes(...) is loom.swapaxes(t, ...): x with axis1 and axis2 exchanged, a view.
        """

    def flatten(self) -> Tensor:
        """
        t.flatten(...) is loom.flatten(t, ...): x as one axis: reshape(x, -1), a view where the strides allow.
        """

    def clip(self, a_min: ArrayLike | None = None, a_max: ArrayLike | None = None) -> Tensor:
        """
        t.clip(...) is loom.clip(t, ...): x limited to [a_min, a_max] elementwise (None: no bound on that side).
        """

    def round(self) -> Tensor:
        """
        t.round(...) is loom.round(t, ...): x rounded to the nearest integer, halves to even (NumPy's round), elementwise.
        """

    def take(self, indices: ArrayLike, axis: int | None = None) -> Tensor:
        """
        t.take(...) is loom.take(t, ...): The elements of x at indices along axis (None: of the flattened x), as NumPy's take.
        """

    def repeat(self, repeats: int, axis: int | None = None) -> Tensor:
        """
        t.repeat(...) is loom.repeat(t, ...): Each element of x repeated repeats times along axis (None: of the flattened x).
        """

    def squeeze(self, axis: AxesLike | None = None) -> Tensor:
        """
        t.squeeze(...) is loom.squeeze(t, ...): x without its axes of size 1 (None: all of them), a view.
        """

    def nonzero(self) -> tuple[Tensor, ...]:
        """
        t.nonzero(...) is loom.nonzero(t, ...): The indices of the non-zero elements: a tuple of one index tensor per axis, as NumPy's.
        """

    def softmax(self, axis: int = -1) -> Tensor:
        """
        t.softmax(...) is loom.softmax(t, ...): exp(x) / sum(exp(x)) along axis, computed without overflow.
        """

    def log_softmax(self, axis: int = -1) -> Tensor:
        """
        t.log_softmax(...) is loom.log_softmax(t, ...): log(softmax(x)) along axis, computed without overflow.
        """

    def expand_dims(self, axis: int) -> Tensor:
        """
        t.expand_dims(...) is loom.expand_dims(t, ...): x with a new axis of size 1 at position axis, a view.
        """

    def broadcast_to(self, shape: ShapeLike) -> Tensor:
        """
        t.broadcast_to(...) is loom.broadcast_to(t, ...): x broadcast to shape (NumPy's rules), a view with zero strides.
        """

    def flip(self, axis: AxesLike | None = None) -> Tensor:
        """
        t.flip(...) is loom.flip(t, ...): x with the order of its elements reversed along axis (None: every axis).
        """

    def reshape(self, *shape: ShapeLike) -> Tensor:
        """t.reshape(2, 3) or t.reshape((2, 3)), as NumPy's."""

    def transpose(self, *axes: AxesLike) -> Tensor:
        """
        t.transpose() reverses the axes; t.transpose(1, 0, 2) or t.transpose((1, 0, 2)).
        """

    def permute(self, *axes: AxesLike) -> Tensor:
        """
        t.transpose() reverses the axes; t.transpose(1, 0, 2) or t.transpose((1, 0, 2)).
        """

    def tolist(self) -> typing.Any:
        """
        The elements as nested Python lists (a Python number for a 0-d tensor), as NumPy's tolist.
        """

_operator_functions: dict = ...

def asarray(obj: ArrayLike, dtype: DTypeLike | None = None) -> Tensor:
    """
    A tensor over obj's memory where Loom can represent it, a copy otherwise (docs/python.md).
    """

def tensor(data: ArrayLike, dtype: DTypeLike | None = None) -> Tensor:
    """A new tensor holding a copy of data."""

def from_dlpack(obj: ArrayLike) -> Tensor:
    """
    A tensor over the memory of a DLPack producer (a torch tensor, a JAX array), without a copy (as asarray).
    """

def add(x1: ArrayLike, x2: ArrayLike) -> Tensor:
    """x1 + x2, elementwise, broadcasting and promoting as NumPy."""

def subtract(x1: ArrayLike, x2: ArrayLike) -> Tensor:
    """x1 - x2, elementwise, broadcasting and promoting as NumPy."""

def multiply(x1: ArrayLike, x2: ArrayLike) -> Tensor:
    """x1 * x2, elementwise, broadcasting and promoting as NumPy."""

def divide(x1: ArrayLike, x2: ArrayLike) -> Tensor:
    """
    x1 / x2, elementwise (true division: integers give float64), broadcasting as NumPy.
    """

def power(x1: ArrayLike, x2: ArrayLike) -> Tensor:
    """x1 ** x2, elementwise, broadcasting and promoting as NumPy."""

def maximum(x1: ArrayLike, x2: ArrayLike) -> Tensor:
    """The larger of x1 and x2, elementwise."""

def minimum(x1: ArrayLike, x2: ArrayLike) -> Tensor:
    """The smaller of x1 and x2, elementwise."""

def mod(x1: ArrayLike, x2: ArrayLike) -> Tensor:
    """x1 % x2, elementwise, with the sign of x2 as NumPy's mod."""

def floor_divide(x1: ArrayLike, x2: ArrayLike) -> Tensor:
    """x1 // x2, elementwise: the floor of the quotient."""

def equal(x1: ArrayLike, x2: ArrayLike) -> Tensor:
    """x1 == x2, elementwise: a bool tensor."""

def not_equal(x1: ArrayLike, x2: ArrayLike) -> Tensor:
    """x1 != x2, elementwise: a bool tensor."""

def less(x1: ArrayLike, x2: ArrayLike) -> Tensor:
    """x1 < x2, elementwise: a bool tensor."""

def less_equal(x1: ArrayLike, x2: ArrayLike) -> Tensor:
    """x1 <= x2, elementwise: a bool tensor."""

def greater(x1: ArrayLike, x2: ArrayLike) -> Tensor:
    """x1 > x2, elementwise: a bool tensor."""

def greater_equal(x1: ArrayLike, x2: ArrayLike) -> Tensor:
    """x1 >= x2, elementwise: a bool tensor."""

def logical_and(x1: ArrayLike, x2: ArrayLike) -> Tensor:
    """x1 and x2 (as truth values), elementwise: a bool tensor."""

def logical_or(x1: ArrayLike, x2: ArrayLike) -> Tensor:
    """x1 or x2 (as truth values), elementwise: a bool tensor."""

def logical_xor(x1: ArrayLike, x2: ArrayLike) -> Tensor:
    """x1 xor x2 (as truth values), elementwise: a bool tensor."""

def matmul(x1: ArrayLike, x2: ArrayLike) -> Tensor:
    """
    x1 @ x2: the matrix product, batched over leading axes as NumPy's matmul.
    """

def dot(x1: ArrayLike, x2: ArrayLike) -> Tensor:
    """
    NumPy's dot: the inner product of vectors, the matrix product of matrices.
    """

def outer(x1: ArrayLike, x2: ArrayLike) -> Tensor:
    """The outer product of two vectors (flattened first, as NumPy's)."""

def kron(x1: ArrayLike, x2: ArrayLike) -> Tensor:
    """The Kronecker product of x1 and x2."""

def logical_not(x: ArrayLike) -> Tensor:
    """not x (as a truth value), elementwise: a bool tensor."""

def abs(x: ArrayLike) -> Tensor:
    """|x|, elementwise."""

def sign(x: ArrayLike) -> Tensor:
    """-1, 0 or 1 by the sign of x, elementwise."""

def negative(x: ArrayLike) -> Tensor:
    """-x, elementwise."""

def exp(x: ArrayLike) -> Tensor:
    """e ** x, elementwise."""

def log(x: ArrayLike) -> Tensor:
    """The natural logarithm of x, elementwise."""

def log1p(x: ArrayLike) -> Tensor:
    """log(1 + x), elementwise, accurate near 0."""

def expm1(x: ArrayLike) -> Tensor:
    """exp(x) - 1, elementwise, accurate near 0."""

def sqrt(x: ArrayLike) -> Tensor:
    """The square root of x, elementwise."""

def rsqrt(x: ArrayLike) -> Tensor:
    """1 / sqrt(x), elementwise."""

def square(x: ArrayLike) -> Tensor:
    """x * x, elementwise."""

def sin(x: ArrayLike) -> Tensor:
    """The sine of x (radians), elementwise."""

def cos(x: ArrayLike) -> Tensor:
    """The cosine of x (radians), elementwise."""

def tanh(x: ArrayLike) -> Tensor:
    """The hyperbolic tangent of x, elementwise."""

def sigmoid(x: ArrayLike) -> Tensor:
    """1 / (1 + exp(-x)), elementwise."""

def relu(x: ArrayLike) -> Tensor:
    """max(x, 0), elementwise."""

def erf(x: ArrayLike) -> Tensor:
    """The error function of x, elementwise."""

def floor(x: ArrayLike) -> Tensor:
    """The largest integer not above x, elementwise."""

def ceil(x: ArrayLike) -> Tensor:
    """The smallest integer not below x, elementwise."""

def round(x: ArrayLike) -> Tensor:
    """
    x rounded to the nearest integer, halves to even (NumPy's round), elementwise.
    """

def flatten(x: ArrayLike) -> Tensor:
    """x as one axis: reshape(x, -1), a view where the strides allow."""

def count_nonzero(x: ArrayLike) -> Tensor:
    """How many elements of x are not zero (a scalar tensor)."""

def sum(x: ArrayLike, axis: AxesLike | None = None, keepdims: bool = False) -> Tensor:
    """
    The sum over axis (None: every axis; an int or a tuple), keepdims as NumPy's.
    """

def mean(x: ArrayLike, axis: AxesLike | None = None, keepdims: bool = False) -> Tensor:
    """
    The mean over axis (None: every axis; an int or a tuple), keepdims as NumPy's.
    """

def prod(x: ArrayLike, axis: AxesLike | None = None, keepdims: bool = False) -> Tensor:
    """
    The product over axis (None: every axis; an int or a tuple), keepdims as NumPy's.
    """

def max(x: ArrayLike, axis: AxesLike | None = None, keepdims: bool = False) -> Tensor:
    """
    The largest element over axis (None: every axis; an int or a tuple), keepdims as NumPy's.
    """

def min(x: ArrayLike, axis: AxesLike | None = None, keepdims: bool = False) -> Tensor:
    """
    The smallest element over axis (None: every axis; an int or a tuple), keepdims as NumPy's.
    """

def logsumexp(x: ArrayLike, axis: AxesLike | None = None, keepdims: bool = False) -> Tensor:
    """
    log(sum(exp(x))) over axis, computed without overflow; keepdims as NumPy's.
    """

def all(x: ArrayLike, axis: AxesLike | None = None, keepdims: bool = False) -> Tensor:
    """
    Whether every element over axis is true (a bool tensor); keepdims as NumPy's.
    """

def any(x: ArrayLike, axis: AxesLike | None = None, keepdims: bool = False) -> Tensor:
    """
    Whether some element over axis is true (a bool tensor); keepdims as NumPy's.
    """

def where(condition: ArrayLike, x: ArrayLike, y: ArrayLike) -> Tensor:
    """
    Elementwise: x where condition holds, y elsewhere (broadcasting the three).
    """

def clip(x: ArrayLike, a_min: ArrayLike | None = None, a_max: ArrayLike | None = None) -> Tensor:
    """x limited to [a_min, a_max] elementwise (None: no bound on that side)."""

def leaky_relu(x: ArrayLike, negative_slope: float = 0.01) -> Tensor:
    """x where x > 0, negative_slope * x elsewhere (torch's leaky_relu)."""

def elu(x: ArrayLike, alpha: float = 1.0) -> Tensor:
    """x where x > 0, alpha * (exp(x) - 1) elsewhere (torch's elu)."""

def gelu(x: ArrayLike, approximate: bool = False) -> Tensor:
    """approximate=True: the tanh approximation."""

def silu(x: ArrayLike) -> Tensor:
    """x * sigmoid(x)."""

def softplus(x: ArrayLike, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """
    log(1 + exp(beta * x)) / beta, and x itself where beta * x > threshold (torch's softplus).
    """

def astype(x: ArrayLike, dtype: DTypeLike) -> Tensor:
    """x converted to dtype (a new tensor)."""

def var(x: ArrayLike, axis: AxesLike | None = None, ddof: int = 0, keepdims: bool = False) -> Tensor:
    """The variance over axis, dividing by n - ddof; keepdims as NumPy's."""

def std(x: ArrayLike, axis: AxesLike | None = None, ddof: int = 0, keepdims: bool = False) -> Tensor:
    """
    The standard deviation over axis, dividing by n - ddof; keepdims as NumPy's.
    """

def argmax(x: ArrayLike, axis: int | None = None, keepdims: bool = False) -> Tensor:
    """
    The index of the largest element along axis (None: of the flattened x).
    """

def argmin(x: ArrayLike, axis: int | None = None, keepdims: bool = False) -> Tensor:
    """
    The index of the smallest element along axis (None: of the flattened x).
    """

def cumsum(x: ArrayLike, axis: int | None = None) -> Tensor:
    """The running sum along axis (None: of the flattened x)."""

def softmax(x: ArrayLike, axis: int = -1) -> Tensor:
    """exp(x) / sum(exp(x)) along axis, computed without overflow."""

def log_softmax(x: ArrayLike, axis: int = -1) -> Tensor:
    """log(softmax(x)) along axis, computed without overflow."""

def reshape(x: ArrayLike, shape: ShapeLike) -> Tensor:
    """
    x with a new shape of the same size (-1: inferred); a view where the strides allow, else a copy.
    """

def transpose(x: ArrayLike, axes: AxesLike | None = None) -> Tensor:
    """x with its axes permuted (None: reversed), a view."""

def permute_dims(x: ArrayLike, axes: AxesLike) -> Tensor:
    """
    x with its axes in the order axes, a view (the array API's permute_dims).
    """

def swapaxes(x: ArrayLike, axis1: int, axis2: int) -> Tensor:
    """x with axis1 and axis2 exchanged, a view."""

def moveaxis(x: ArrayLike, source: int, destination: int) -> Tensor:
    """x with axis source moved to position destination, a view."""

def squeeze(x: ArrayLike, axis: AxesLike | None = None) -> Tensor:
    """x without its axes of size 1 (None: all of them), a view."""

def expand_dims(x: ArrayLike, axis: int) -> Tensor:
    """x with a new axis of size 1 at position axis, a view."""

def broadcast_to(x: ArrayLike, shape: ShapeLike) -> Tensor:
    """x broadcast to shape (NumPy's rules), a view with zero strides."""

def slice(x: ArrayLike, axis: int, start: int | None = None, stop: int | None = None, step: int = 1) -> Tensor:
    """x[start:stop:step] along one axis, a view."""

def concatenate(arrays: ArraySequence, axis: int = 0) -> Tensor:
    """The tensors joined along an existing axis."""

def stack(arrays: ArraySequence, axis: int = 0) -> Tensor:
    """The tensors, of one shape, joined along a new axis."""

def split(x: ArrayLike, indices_or_sections: ShapeLike, axis: int = 0) -> list[Tensor]:
    """
    x cut along axis into a list of views: into n equal parts (an int) or at the given indices.
    """

def unbind(x: ArrayLike, axis: int = 0) -> list[Tensor]:
    """The slices of x along axis, as a list of views with that axis removed."""

def pad(x: ArrayLike, pad_width: object, constant_values: ArrayLike = 0) -> Tensor:
    """
    x padded with constant_values: pad_width is n, (before, after), or one (before, after) per axis.
    """

def tile(x: ArrayLike, reps: ShapeLike) -> Tensor:
    """x repeated reps times along each axis, as NumPy's tile."""

def repeat(x: ArrayLike, repeats: int, axis: int | None = None) -> Tensor:
    """
    Each element of x repeated repeats times along axis (None: of the flattened x).
    """

def flip(x: ArrayLike, axis: AxesLike | None = None) -> Tensor:
    """
    x with the order of its elements reversed along axis (None: every axis).
    """

def index(x: ArrayLike, key: object) -> Tensor:
    """x[key] (basic indices give views, arrays and masks copies)."""

def index_put(x: ArrayLike, key: object, values: ArrayLike, accumulate: bool = False) -> Tensor:
    """
    A copy of x with x[key] = values (or +=, accumulate=True), differentiable.
    """

def take(x: ArrayLike, indices: ArrayLike, axis: int | None = None) -> Tensor:
    """
    The elements of x at indices along axis (None: of the flattened x), as NumPy's take.
    """

def take_along_axis(x: ArrayLike, indices: ArrayLike, axis: int) -> Tensor:
    """
    The elements of x at indices along axis, indices broadcasting with x (NumPy's take_along_axis).
    """

def scatter_add(x: ArrayLike, axis: int, indices: ArrayLike, src: ArrayLike) -> Tensor:
    """
    A copy of x where src is added at indices along axis (torch's scatter_add).
    """

def nonzero(x: ArrayLike) -> tuple[Tensor, ...]:
    """
    The indices of the non-zero elements: a tuple of one index tensor per axis, as NumPy's.
    """

def tensordot(a: ArrayLike, b: ArrayLike, axes: AxesLike = 2) -> Tensor:
    """
    The sum of products over axes: an int n (the last n of a with the first n of b) or a pair (axes_a, axes_b).
    """

def einsum(subscripts: str, *operands) -> Tensor:
    """
    Einstein summation over the operands, in NumPy's subscripts notation ("ij,jk->ik").
    """

def linear(x: ArrayLike, weight: ArrayLike, bias: ArrayLike | None = None) -> Tensor:
    """
    x @ weight + bias, weight shaped (in, out) as a Linear layer's (torch's linear takes it transposed); without a bias, x @ weight.
    """

def zeros(shape: ShapeLike, dtype: DTypeLike | None = None) -> Tensor:
    """A new tensor of shape filled with 0 (dtype: float32 unless given)."""

def ones(shape: ShapeLike, dtype: DTypeLike | None = None) -> Tensor:
    """A new tensor of shape filled with 1 (dtype: float32 unless given)."""

def empty(shape: ShapeLike, dtype: DTypeLike | None = None) -> Tensor:
    """
    A new tensor of shape whose values are not set (dtype: float32 unless given).
    """

def full(shape: ShapeLike, fill_value: ArrayLike, dtype: DTypeLike | None = None) -> Tensor:
    """
    A new tensor of shape filled with fill_value (dtype: that of the value unless given).
    """

def zeros_like(x: ArrayLike) -> Tensor:
    """A new tensor of x's shape and dtype filled with 0."""

def ones_like(x: ArrayLike) -> Tensor:
    """A new tensor of x's shape and dtype filled with 1."""

def full_like(x: ArrayLike, fill_value: ArrayLike) -> Tensor:
    """A new tensor of x's shape and dtype filled with fill_value."""

def arange(start: float, stop: float | None = None, step: float = 1, dtype: DTypeLike | None = None) -> Tensor:
    """
    Evenly spaced values in [start, stop) by step: arange(stop) or arange(start, stop, step); integers give int64, else float32.
    """

def linspace(start: float, stop: float, num: int = 50, endpoint: bool = True, dtype: DTypeLike | None = None) -> Tensor:
    """
    num evenly spaced values from start to stop (stop included unless endpoint=False).
    """

def eye(N: int, M: int | None = None, k: int = 0, dtype: DTypeLike | None = None) -> Tensor:
    """
    An N x M matrix (M: N when None) with ones on diagonal k and zeros elsewhere.
    """

def allclose(a: ArrayLike, b: ArrayLike, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> bool:
    """
    Whether |a - b| <= atol + rtol * |b| everywhere (NaNs equal with equal_nan=True).
    """

def array_equal(a1: ArrayLike, a2: ArrayLike) -> bool:
    """Whether a1 and a2 have one shape and equal elements."""

def _grad(output: Tensor, inputs: Sequence[Tensor], grad_output: ArrayLike | None = None) -> list[Tensor]: ...

def conv1d(x: ArrayLike, weight: ArrayLike, bias: ArrayLike | None = None, stride: ShapeLike = 1, padding: ShapeLike = 0, dilation: ShapeLike = 1, groups: int = 1) -> Tensor:
    """
    1-d convolution of x (N, C, L) with weight (O, C / groups, K), as torch's conv1d; padding is an int, per-axis ints, or "same" / "valid".
    """

def conv2d(x: ArrayLike, weight: ArrayLike, bias: ArrayLike | None = None, stride: ShapeLike = 1, padding: ShapeLike = 0, dilation: ShapeLike = 1, groups: int = 1) -> Tensor:
    """
    2-d convolution of x (N, C, H, W) with weight (O, C / groups, KH, KW), as torch's conv2d; padding is an int, per-axis ints, or "same" / "valid".
    """

def conv2d_transpose(x: ArrayLike, weight: ArrayLike, bias: ArrayLike | None = None, stride: ShapeLike = 1, padding: ShapeLike = 0, output_padding: ShapeLike = 0, groups: int = 1, dilation: ShapeLike = 1) -> Tensor:
    """
    The transposed 2-d convolution (the gradient of conv2d with respect to its input) of x with weight (C, O / groups, KH, KW), as torch's conv_transpose2d.
    """

def max_pool2d(x: ArrayLike, kernel_size: ShapeLike, stride: ShapeLike | None = None, padding: ShapeLike = 0, dilation: ShapeLike = 1, ceil_mode: bool = False) -> Tensor:
    """
    The maximum over each kernel_size window of x (N, C, H, W), as torch's max_pool2d (stride None: kernel_size).
    """

def avg_pool2d(x: ArrayLike, kernel_size: ShapeLike, stride: ShapeLike | None = None, padding: ShapeLike = 0, ceil_mode: bool = False, count_include_pad: bool = True, divisor_override: int = 0) -> Tensor:
    """
    The mean over each kernel_size window of x (N, C, H, W), as torch's avg_pool2d (stride None: kernel_size; divisor_override 0: none).
    """

def global_avg_pool2d(x: ArrayLike) -> Tensor:
    """The mean of each channel of x (N, C, H, W) over H and W: (N, C, 1, 1)."""

def global_max_pool2d(x: ArrayLike) -> Tensor:
    """
    The maximum of each channel of x (N, C, H, W) over H and W: (N, C, 1, 1).
    """

def batch_norm(x: ArrayLike, running_mean: ArrayLike, running_var: ArrayLike, weight: ArrayLike | None = None, bias: ArrayLike | None = None, training: bool = False, momentum: float = 0.1, eps: float = 1e-05) -> Tensor:
    """
    Batch normalization of x (N, C, ...) per channel, as torch's batch_norm: with training=True the batch's statistics, updating running_mean and running_var by momentum; else the running ones.
    """

def layer_norm(x: ArrayLike, normalized_shape: ShapeLike, weight: ArrayLike | None = None, bias: ArrayLike | None = None, eps: float = 1e-05) -> Tensor:
    """
    Layer normalization of x over its last axes normalized_shape, scaled by weight and shifted by bias when given.
    """

def rms_norm(x: ArrayLike, normalized_shape: ShapeLike, weight: ArrayLike | None = None, eps: float = 1e-06) -> Tensor:
    """
    x divided by the root mean square over its last axes normalized_shape (plus eps), scaled by weight when given.
    """

def rotary_embedding(x: ArrayLike, offset: int = 0, base: float = 10000.0, linear_factor: float = 1.0, llama3_factor: float = 0.0, low_freq_factor: float = 1.0, high_freq_factor: float = 4.0, original_max_positions: int = 8192) -> Tensor:
    """
    Rotary position embedding of x (..., T, D), Llama's rotate-half pairs, positions offset, offset + 1, ...
    """

def dropout(x: ArrayLike, p: float = 0.5, training: bool = True, generator: random.Generator | None = None) -> Tensor:
    """
    With training=True, each element zeroed with probability p and the rest scaled by 1 / (1 - p); x itself otherwise.
    """

def embedding(weight: ArrayLike, ids: ArrayLike, padding_idx: int = -1) -> Tensor:
    """
    The rows of weight at ids (any shape): ids.shape + (D,). Row padding_idx (when >= 0) gets no gradient; a negative one means none.
    """

def cross_entropy(logits: ArrayLike, target: ArrayLike, weight: ArrayLike | None = None, reduction: str = 'mean', ignore_index: int = -100, label_smoothing: float = 0.0) -> Tensor:
    """
    The cross-entropy of logits (N, C, ...) against class indices target, as torch's cross_entropy (weight per class, reduction "mean", "sum" or "none", ignore_index, label_smoothing).
    """

def nll_loss(log_probs: ArrayLike, target: ArrayLike, weight: ArrayLike | None = None, reduction: str = 'mean', ignore_index: int = -100) -> Tensor:
    """
    The negative log-likelihood of log_probs (N, C, ...) at the class indices target, as torch's nll_loss.
    """

def binary_cross_entropy_with_logits(logits: ArrayLike, targets: ArrayLike, weight: ArrayLike | None = None, pos_weight: ArrayLike | None = None, reduction: str = 'mean') -> Tensor:
    """
    The binary cross-entropy of sigmoid(logits) against targets, computed from the logits without overflow, as torch's binary_cross_entropy_with_logits.
    """

def scaled_dot_product_attention(q: ArrayLike, k: ArrayLike, v: ArrayLike, mask: ArrayLike | None = None, is_causal: bool = False, scale: float | None = None) -> Tensor:
    """
    softmax(q @ k.T * scale + mask) @ v over the last two axes, as torch's scaled_dot_product_attention: scale None is 1 / sqrt(q's last size); a bool mask is True where a position is attended, a float one is added to the scores; is_causal masks the later positions.
    """

def lstm_cell(gates: ArrayLike, c: ArrayLike) -> Tensor:
    """
    The LSTM cell's pointwise part: gates (N, 4H) and c (N, H) to [h, c] packed (N, 2H).
    """

class _ModeContext:
    def __enter__(self) -> None: ...

    def __exit__(self, *args) -> bool: ...

def train_mode() -> _ModeContext:
    """
    `with loom.train_mode():` layers and plans run in Train mode (dropout active, batch norm on batch statistics) on this thread.
    """

def eval_mode() -> _ModeContext:
    """`with loom.eval_mode():` Eval mode (the default) on this thread."""

def is_training() -> bool:
    """Whether this thread runs layers in Train mode."""

class Layer:
    """
    A TensorX layer: a stateful function and the end node of the graph that feeds it (docs/python.md).
    """

    def __call__(self, *args: object) -> Any:
        """
        layer(x, ...) with layers: the Keras-style call (the first call of a layer made without input builds it; later calls are reuse_with). With tensors or arrays: the layer's value on them, now. With nothing: the value of the graph that ends here.
        """

    def compute(self, *args) -> Tensor:
        """Only this layer's op on the given tensors, one per input."""

    def reuse_with(self, *inputs, name: str = '') -> Layer:
        """
        A layer of the same kind on new inputs, sharing this layer's state (weights).
        """

    @property
    def name(self) -> str:
        """The layer's name, unique in its graph."""

    @property
    def kind(self) -> str:
        """The layer kind's registered name ("Linear", "Activation", ...)."""

    @property
    def inputs(self) -> list[Layer]:
        """The layers this layer reads, in order."""

    @property
    def shape(self) -> tuple[int, ...]:
        """Output shape; -1 marks a size known only at run time (the batch)."""

    @property
    def n_units(self) -> int:
        """The last dimension of the output."""

    @property
    def dtype(self) -> DType:
        """The output's dtype."""

    @property
    def bound(self) -> bool:
        """False for a layer made without input that has not been called yet."""

    @property
    def node(self) -> Layer:
        """
        The graph node this handle stands for: itself, or for a layer made without input the layer its first call built.
        """

    def parameters(self) -> list[Tensor]:
        """The trainable tensors of this layer's state, each once."""

    @property
    def weights(self) -> list[Tensor]:
        """
        The trainable tensors of this layer's state, each once (as parameters()).
        """

    @property
    def _options_json(self) -> str: ...

    def shares_state_with(self, arg: Layer, /) -> bool:
        """
        Whether this layer and other share one state (weights): reuse_with and Keras-style calls of one layer do.
        """

    def set_value(self, value: ArrayLike) -> None:
        """
        Sets an Input layer's value, read when the graph is called without arguments (its shape and dtype checked).
        """

    @property
    def value(self) -> Tensor:
        """An Input layer's value (ValueError when it holds none)."""

    def has_value(self) -> bool:
        """Whether an Input layer holds a value."""

    def clear(self) -> None:
        """Drops an Input layer's value."""

    def __eq__(self, arg: object, /) -> bool: ...

    def __hash__(self) -> int: ...

    def __repr__(self) -> str: ...

    @property
    def options(self) -> dict[str, typing.Any]:
        """
        The layer's options as a dict (what it is saved with, and the keyword arguments of its kind).
        """

def registered_layer_kinds() -> list[str]:
    """Every registered layer kind, sorted."""

def _layer_kind_info(arg: str, /) -> tuple: ...

def _make_layer(arg0: str, arg1: object, arg2: str, arg3: str, /) -> Layer: ...

def _unbound_layer(arg0: str, arg1: str, arg2: str, /) -> Layer: ...

def _constant(value: ArrayLike, name: str = '') -> Layer: ...

def Module(inputs: Layer | Sequence[Layer], outputs: Layer | Sequence[Layer], name: str = '') -> Layer:
    """
    A subgraph from `inputs` to `outputs` as one layer (kind Module); reuse_with shares every inner weight.
    """

def module_output(module: Layer, index: int, name: str = '') -> Layer:
    """
    A layer (kind ModuleOutput) reading output index of module, a Module with several outputs or a reuse_with of one.
    """

def module_graph(arg: Layer, /) -> Graph | None:
    """
    The inner graph of a layer of kind Module or Sequential, or None for other kinds.
    """

def Sequential(steps: object, input: object | None = None, name: str = '') -> Layer:
    """
    Layers applied in order as one layer (kind Sequential); made without input, its first call builds it.
    """

class Plan:
    """
    A compiled graph (docs/compile.md): call it on tensors, one per graph input.
    """

    def __call__(self, *args: object) -> Any:
        """
        The outputs for one tensor (or array) per graph input: a tensor for one output, a list for several.
        """

    def run(self, inputs: ArraySequence | None = None) -> list[Tensor]:
        """Every output, as a list, for the inputs given positionally."""

    @property
    def graph(self) -> Graph:
        """The graph the plan was compiled from."""

    @property
    def input_shapes(self) -> list[tuple[int, ...]]:
        """
        The shapes the plan was compiled for, one per input (-1: open at run time).
        """

    @property
    def output_shapes(self) -> list[tuple[int, ...]]:
        """The compiled shape of each output (-1: sized at run time)."""

    @property
    def shape_polymorphic(self) -> bool:
        """
        Whether some input dimension is open (-1): the plan then runs any size there.
        """

    def peak_bytes(self) -> int:
        """
        The bytes of activations live at once at the plan's peak, from the compiled shapes; -1 when some shape is open.
        """

    def dump(self) -> str:
        """
        The optimized plan as text: each step, what each pass removed, merged or folded, and the peak bytes.
        """

    def __repr__(self) -> str: ...

class Graph:
    """A layer graph traced back from its outputs (Graph.build)."""

    @staticmethod
    def build(outputs: Layer | Sequence[Layer], inputs: Layer | Sequence[Layer] | None = None) -> Graph:
        """
        Traces from `outputs` back to `inputs` (every Input reached when not given).
        """

    @property
    def nodes(self) -> list[Layer]:
        """The layers in dependency order."""

    @property
    def inputs(self) -> list[Layer]:
        """The graph's Input layers, in the order a call takes their values."""

    @property
    def outputs(self) -> list[Layer]:
        """The graph's output layers."""

    def edges(self) -> list[tuple[int, int]]:
        """The edges as (from, to) positions in nodes."""

    def layer(self, name: str) -> Layer:
        """
        The layer named name (ValueError listing the graph's layer names when there is none).
        """

    def parameters(self) -> list[Tensor]:
        """
        Every trainable tensor of the graph's layers (inner Module layers included), each once, in node order.
        """

    def parameter_count(self) -> int:
        """
        The number of elements of the graph's trainable tensors, each counted once.
        """

    def summary(self) -> str:
        """A Keras-like table of the layers, shapes and parameter counts."""

    def to_dot(self) -> str:
        """Graphviz DOT text of the graph."""

    def to_json(self) -> str:
        """
        The architecture as JSON text (no weights); Graph.from_json reads it back.
        """

    @staticmethod
    def from_json(arg: str, /) -> Graph:
        """A graph from the JSON text of to_json, with newly initialized weights."""

    def compile(self, input_shapes: Sequence[ShapeLike] | None = None, **flags) -> Plan:
        """
        The optimized plan; with input_shapes (one per input, -1 open) specialized to them.
        """

    def __call__(self, *args: object) -> Any:
        """
        The graph run without compiling on one tensor (or array) per input: a tensor for one output, a list for several.
        """

    def __repr__(self) -> str: ...

def copy_state(source: Graph, target: Graph) -> None:
    """
    Copies every parameter and buffer of `source` into the layer of the same name in `target`.
    """

class _ParamOptimizer:
    """A loom.optimizers object's C++ optimizer over given tensors."""

    def step(self) -> None:
        """One update of every parameter that has a gradient."""

    def zero_grad(self) -> None:
        """Drops every parameter's gradient (grad becomes None)."""

    @property
    def lr(self) -> float:
        """The learning rate (settable)."""

    @lr.setter
    def lr(self, arg: float, /) -> None: ...

    @property
    def steps(self) -> int:
        """Updates taken."""

    @property
    def params(self) -> list[Tensor]:
        """The tensors it updates."""

def _param_optimizer(name: str, kwargs: dict, params: Sequence[Tensor]) -> _ParamOptimizer: ...

def _loss_names() -> list[str]: ...

def _metric_names() -> list[str]: ...

def _loss(name: str, prediction: ArrayLike, target: ArrayLike) -> Tensor:
    """The loss of Keras' name `name` (train::Loss) on these tensors."""

class _NativeCallback:
    pass

def _native_callback(kind: str, model: _Model | None, kwargs: dict) -> _NativeCallback: ...

class _Model:
    def __init__(self, graph: Graph | zoo.Network, loss: object, optimizer: object, metrics: object | None) -> None: ...

    def _fit(self, x: object, y: object | None, epochs: int, batch_size: int, validation_split: float, shuffle: bool, seed: int, callbacks: object, progress: bool, progress_every: int, validation: object | None) -> dict[str, list[float]]: ...

    def _evaluate_loader(self, arg: data.DataLoader, /) -> dict[str, float]: ...

    def evaluate(self, x: ArrayLike, y: ArrayLike, batch_size: int = 32) -> dict[str, float]:
        """Mean loss and metrics over the samples (Eval mode, no gradients)."""

    def predict(self, x: ArrayLike, batch_size: int = 256) -> Tensor:
        """The output for x in batches (Eval mode, no gradients)."""

    def save(self, path: str) -> None:
        """
        The graph's architecture and weights in one model file (loom.load_model reads it).
        """

    def save_checkpoint(self, path: str) -> None:
        """Weights, optimizer state, generator, epoch count and history."""

    def load_checkpoint(self, path: str) -> None:
        """All or nothing: a bad file leaves the model as it was."""

    def stop_training(self) -> None:
        """
        Asks fit to stop after the current batch (as setting stop_training = True from a callback).
        """

    @property
    def graph(self) -> Graph:
        """The graph the model trains."""

    @property
    def history(self) -> dict[str, list[float]]:
        """
        Every epoch's logs across fit calls: a dict of lists (loss, metrics, val_..., lr).
        """

    @property
    def epochs_done(self) -> int:
        """The epochs trained across fit calls."""

    @property
    def lr(self) -> float:
        """The optimizer's learning rate (settable)."""

    @lr.setter
    def lr(self, arg: float, /) -> None: ...

    @property
    def steps(self) -> int:
        """Optimizer steps taken (batches trained)."""

    @property
    def optimizer_name(self) -> str:
        """The optimizer's name ("adam", "sgd", ...)."""

    def summary(self) -> str:
        """
        The inference graph's summary table, then the optimizer (name, learning rate, the tensors and values it trains) and the metrics.
        """

class TrainStep:
    """
    One training step compiled once (train::TrainStep): step(x, y) runs zero_grad, forward, loss, backward and the optimizer's update on one batch, without the GIL, and returns the loss.
    """

    def __init__(self, graph: Graph | zoo.Network, loss: object, optimizer: object = 'adam', clip_grad_norm: float = 0.0) -> None: ...

    def __call__(self, x: ArrayLike, y: ArrayLike) -> Tensor:
        """
        One step on the batch (x: the graph's inputs, y the target); the loss (0-d).
        """

    @property
    def lr(self) -> float:
        """The optimizer's learning rate (settable)."""

    @lr.setter
    def lr(self, arg: float, /) -> None: ...

    @property
    def steps(self) -> int:
        """Steps taken."""

    def dump(self) -> str:
        """
        The compiled step as text: the forward plan, the loss, backward and update stages, and the last step's memory figures.
        """

class SparseTensor:
    """
    A sparse tensor as torch.sparse's: COO (indices int64 (ndim, nnz), values (nnz,)) of any rank, or CSR (crow_indices (rows + 1,), col_indices (nnz,), values (nnz,)) of 2-d, with float32 or float64 values. The index arrays are copied (int64); the values are kept as given (a tensor, or an array's memory without a copy), so gradients of to_dense and sparse.mm reach them.
    """

    @staticmethod
    def coo(indices: ArrayLike, values: ArrayLike, shape: ShapeLike) -> SparseTensor:
        """
        A COO tensor: indices int32/int64 (ndim, nnz), every index in [0, shape[d]); values float32/float64 (nnz,). Duplicate indices are allowed and add up. A ShapeError, DTypeError or IndexError names what is wrong.
        """

    @staticmethod
    def csr(crow_indices: ArrayLike, col_indices: ArrayLike, values: ArrayLike, shape: ShapeLike) -> SparseTensor:
        """
        A 2-d CSR tensor: crow_indices (rows + 1,) non-decreasing from 0 to nnz, col_indices (nnz,) in [0, cols), values (nnz,).
        """

    @staticmethod
    def from_dense(dense: ArrayLike, layout: str = 'coo') -> SparseTensor:
        """
        The non-zero elements of a float32/float64 tensor or array (NaN counts as non-zero), "coo" or "csr" (2-d).
        """

    @property
    def layout(self) -> str:
        """"coo" or "csr"."""

    @property
    def shape(self) -> tuple[int, ...]:
        """The dense shape, a tuple."""

    @property
    def ndim(self) -> int:
        """The number of axes."""

    @property
    def dtype(self) -> DType:
        """The values' dtype (float32 or float64)."""

    @property
    def nnz(self) -> int:
        """The number of stored entries (duplicates counted)."""

    @property
    def values(self) -> Tensor:
        """The stored values (nnz,): the tensor given at creation."""

    @property
    def indices(self) -> Tensor:
        """COO: the indices, int64 (ndim, nnz) (a loom.ValueError for CSR)."""

    @property
    def crow_indices(self) -> Tensor:
        """CSR: the row pointers, int64 (rows + 1,) (a loom.ValueError for COO)."""

    @property
    def col_indices(self) -> Tensor:
        """
        CSR: the column of each entry, int64 (nnz,) (a loom.ValueError for COO).
        """

    def is_coalesced(self) -> bool:
        """Whether the entries are sorted in row-major order without duplicates."""

    def coalesce(self) -> SparseTensor:
        """
        Duplicates summed and entries sorted (the layout kept); differentiable in the values.
        """

    def to_dense(self) -> Tensor:
        """The dense tensor (duplicates add up); differentiable in the values."""

    def to_coo(self) -> SparseTensor:
        """The COO form (itself when COO)."""

    def to_csr(self) -> SparseTensor:
        """
        The CSR form of a 2-d tensor (COO is coalesced first; itself when CSR).
        """

    def __matmul__(self, other: ArrayLike) -> Tensor:
        """sparse.mm(self, other)."""

    def __repr__(self) -> str: ...

def set_num_threads(n: int) -> None:
    """Threads of Loom's pool (1 runs every op inline)."""

def get_num_threads() -> int:
    """Threads of Loom's pool (the calling thread included)."""

def is_grad_enabled() -> bool:
    """Whether ops record gradients on this thread."""

def set_grad_enabled(enabled: bool) -> None:
    """
    Turns gradient recording on or off on this thread (loom.no_grad and loom.enable_grad use it).
    """

def op_registry() -> list[tuple[str, str, bool]]:
    """
    Every op of Loom as (name, category, differentiable), as op_registry() in C++.
    """
