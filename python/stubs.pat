# Patterns for nanobind's stub generator (scripts/python_stubs.sh; nanobind's docs, "Pattern
# files"): what python/loom/__init__.py adds to the native classes in Python, which the generator
# would otherwise write as imports from loom, and Loom's error classes (made by
# PyErr_NewExceptionWithDoc, named loom.X), whose bases it cannot see. Each entry is a regular
# expression on an entry's qualified name, then the lines that replace it (\doc: its docstring).
# test_stubs.py fails when a public attribute of Tensor or Layer is missing from the stubs.

# the module: the names these entries use
^loom\._core\.__prefix__:
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

# the arithmetic operators, the type's number slots (python/src/tensor.cpp), which Python
# describes as untyped slot wrappers
^loom\._core\.Tensor\.__(r?)(add|sub|mul|mod|and|xor|or|floordiv|truediv|matmul)__$:
    def __\1\2__(self, other: ArrayLike, /) -> Tensor: ...

^loom\._core\.Tensor\.__(r?)pow__$:
    def __\1pow__(self, other: ArrayLike, mod: None = None, /) -> Tensor: ...

# NumPy's array methods that are the ops with the array first (python/loom/__init__.py)
^loom\._core\.Tensor\.sum$:
    def sum(self, axis: AxesLike | None = None, keepdims: bool = False) -> Tensor:
        \doc

^loom\._core\.Tensor\.mean$:
    def mean(self, axis: AxesLike | None = None, keepdims: bool = False) -> Tensor:
        \doc

^loom\._core\.Tensor\.prod$:
    def prod(self, axis: AxesLike | None = None, keepdims: bool = False) -> Tensor:
        \doc

^loom\._core\.Tensor\.max$:
    def max(self, axis: AxesLike | None = None, keepdims: bool = False) -> Tensor:
        \doc

^loom\._core\.Tensor\.min$:
    def min(self, axis: AxesLike | None = None, keepdims: bool = False) -> Tensor:
        \doc

^loom\._core\.Tensor\.var$:
    def var(self, axis: AxesLike | None = None, ddof: int = 0, keepdims: bool = False) -> Tensor:
        \doc

^loom\._core\.Tensor\.std$:
    def std(self, axis: AxesLike | None = None, ddof: int = 0, keepdims: bool = False) -> Tensor:
        \doc

^loom\._core\.Tensor\.argmax$:
    def argmax(self, axis: int | None = None, keepdims: bool = False) -> Tensor:
        \doc

^loom\._core\.Tensor\.argmin$:
    def argmin(self, axis: int | None = None, keepdims: bool = False) -> Tensor:
        \doc

^loom\._core\.Tensor\.all$:
    def all(self, axis: AxesLike | None = None, keepdims: bool = False) -> Tensor:
        \doc

^loom\._core\.Tensor\.any$:
    def any(self, axis: AxesLike | None = None, keepdims: bool = False) -> Tensor:
        \doc

^loom\._core\.Tensor\.cumsum$:
    def cumsum(self, axis: int | None = None) -> Tensor:
        \doc

^loom\._core\.Tensor\.logsumexp$:
    def logsumexp(self, axis: AxesLike | None = None, keepdims: bool = False) -> Tensor:
        \doc

^loom\._core\.Tensor\.swapaxes$:
    def swapaxes(self, axis1: int, axis2: int) -> Tensor:
        \doc

^loom\._core\.Tensor\.flatten$:
    def flatten(self) -> Tensor:
        \doc

^loom\._core\.Tensor\.clip$:
    def clip(self, a_min: ArrayLike | None = None, a_max: ArrayLike | None = None) -> Tensor:
        \doc

^loom\._core\.Tensor\.round$:
    def round(self) -> Tensor:
        \doc

^loom\._core\.Tensor\.take$:
    def take(self, indices: ArrayLike, axis: int | None = None) -> Tensor:
        \doc

^loom\._core\.Tensor\.repeat$:
    def repeat(self, repeats: int, axis: int | None = None) -> Tensor:
        \doc

^loom\._core\.Tensor\.squeeze$:
    def squeeze(self, axis: AxesLike | None = None) -> Tensor:
        \doc

^loom\._core\.Tensor\.nonzero$:
    def nonzero(self) -> tuple[Tensor, ...]:
        \doc

^loom\._core\.Tensor\.softmax$:
    def softmax(self, axis: int = -1) -> Tensor:
        \doc

^loom\._core\.Tensor\.log_softmax$:
    def log_softmax(self, axis: int = -1) -> Tensor:
        \doc

^loom\._core\.Tensor\.expand_dims$:
    def expand_dims(self, axis: int) -> Tensor:
        \doc

^loom\._core\.Tensor\.broadcast_to$:
    def broadcast_to(self, shape: ShapeLike) -> Tensor:
        \doc

^loom\._core\.Tensor\.flip$:
    def flip(self, axis: AxesLike | None = None) -> Tensor:
        \doc

^loom\._core\.Tensor\.reshape$:
    def reshape(self, *shape: ShapeLike) -> Tensor:
        \doc

^loom\._core\.Tensor\.transpose$:
    def transpose(self, *axes: AxesLike) -> Tensor:
        \doc

^loom\._core\.Tensor\.permute$:
    def permute(self, *axes: AxesLike) -> Tensor:
        \doc

^loom\._core\.Tensor\.tolist$:
    def tolist(self) -> typing.Any:
        \doc

# Layer.options (python/loom/__init__.py)
^loom\._core\.Layer\.options$:
    @property
    def options(self) -> dict[str, typing.Any]:
        \doc

# Loom's errors (python/src/module.cpp): each a loom.Error and the built-in class for its kind
^loom\._core\.Error$:
    class Error(Exception):
        \doc

^loom\._core\.ShapeError$:
    class ShapeError(Error, builtins.ValueError):
        \doc

^loom\._core\.DTypeError$:
    class DTypeError(Error, builtins.TypeError):
        \doc

^loom\._core\.DeviceError$:
    class DeviceError(Error, builtins.ValueError):
        \doc

^loom\._core\.IndexError$:
    class IndexError(Error, builtins.IndexError):
        \doc

^loom\._core\.ValueError$:
    class ValueError(Error, builtins.ValueError):
        \doc

^loom\._core\.LinAlgError$:
    class LinAlgError(ValueError):
        \doc

^loom\._core\.OutOfMemoryError$:
    class OutOfMemoryError(Error, builtins.MemoryError):
        \doc

^loom\._core\.AutogradError$:
    class AutogradError(Error, builtins.RuntimeError):
        \doc

^loom\._core\.IOError$:
    class IOError(Error, builtins.OSError):
        \doc
# == and != are elementwise (a bool tensor, as NumPy's), which object's "-> bool" does not allow:
# the override is intended, as NumPy's own stubs mark theirs; for the same reason a Tensor is
# not hashable (typeshed writes unhashable classes' __hash__ so)
^loom\._core\.Tensor\.__eq__$:
    def __eq__(self, other: object | None) -> Tensor: ...  # type: ignore[override]

^loom\._core\.Tensor\.__ne__$:
    def __ne__(self, other: object | None) -> Tensor: ...  # type: ignore[override]

^loom\._core\.Tensor\.__hash__$:
    __hash__: typing.ClassVar[None]  # type: ignore[assignment]

# the Enum machinery's own attributes, which -P (private names) would list as DType's members
^loom\._core\.DType\._(new_member|use_args|member_names|member_map|value2member_map|unhashable_values|value_repr|member_type|generate_next_value)_$:

