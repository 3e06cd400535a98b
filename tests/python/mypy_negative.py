"""Type errors on purpose (tests/python/mypy_check.sh): mypy must report each one, which shows that
it reads Loom's stubs rather than taking loom for an untyped module (where all would pass)."""
import loom

t = loom.ones((2, 2))
as_int: int = t.numpy()  # expect: an ndarray is not an int
as_str: str = t.shape  # expect: a tuple is not a str
net = loom.zoo.mlp("784", [128], 10)  # expect: in_units is an int
t.no_such_method()  # expect: Tensor has no such attribute
