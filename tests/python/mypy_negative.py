"""Type errors on purpose (tests/python/mypy_check.sh): mypy must report each one, which shows that
it reads Loom's stubs rather than taking loom for an untyped module (where all would pass)."""
import loom

t = loom.ones((2, 2))
as_int: int = t.numpy()  # expect: an ndarray is not an int
as_str: str = t.shape  # expect: a tuple is not a str
net = loom.zoo.mlp("784", [128], 10)  # expect: in_units is an int
t.no_such_method()  # expect: Tensor has no such attribute
# The narrowed argument and result types (python/src/common.h's typed objects, python/stubs.pat's
# aliases): each passes against stubs that say `object` or a bare `tuple`
loom.zeros("2, 3")  # expect: a shape is an int or a sequence of ints
loom.add(t, object())  # expect: an operand is array-like
u, s, vh, extra = loom.linalg.svd(t)  # expect: svd gives three tensors
size: str = t.shape[0]  # expect: a shape's sizes are ints
loom.Graph.build(t)  # expect: the outputs are layers
loom.sum(t, axis="0")  # expect: axes are ints
model = loom.Model(net.graph, loss="mse", optimizer=loom.optimizers.Adam(lr=1e-3))
model.fit(t, t, epochs="3")  # expect: Model.fit's epochs is an int
