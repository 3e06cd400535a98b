"""Every registered layer kind as a constructor with keyword arguments (docs/python.md, "Layers
and graphs"): loom.layers.Linear(x, n_units=8), loom.layers.Conv2D(filters=16, kernel_size=3)(x).

Nothing here is written per kind. A kind's constructor is made from its registry entry
(nn::layer_kind_info): the options its factory reads and their defaults, so a kind registered in
C++ (built in or user-defined, before or after `import loom`) is an attribute of this module with
no change to the bindings. Keyword arguments are the kind's options under their saved names
(what `layer.options` shows); an argument is converted to its default's JSON type (an int where a
list of sizes is expected repeats, a dtype becomes its name, an initializer may be a name).

  layer = Kind(x, y, ..., name="", **options)   built on input layers now
  layer = Kind(name="", **options)              made without input (Keras style): its first call,
                                                layer(x), builds it; later calls share its state
Kinds that take no input layers (Input, Param, SparseInput) are built at once.
"""
import json as _json

from . import _core

_kinds: dict = {}  # LayerKind by name, made on first use


def _dtype_name(value):
    if isinstance(value, _core.DType):
        return value.name if value.name != "bool_" else "bool"
    import numpy as np

    return np.dtype(value).name


def _convert(kind, key, value, default):
    """`value` as the JSON type of the option's default."""
    if isinstance(value, _core.Tensor):
        value = value.tolist()
    elif hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        value = value.tolist()  # a NumPy array or scalar
    if isinstance(value, tuple):
        value = list(value)
    if isinstance(default, list) and isinstance(value, int) and not isinstance(value, bool):
        return [value]  # one size for every axis
    if isinstance(default, bool):
        return bool(value)
    if isinstance(default, float) and isinstance(value, int):
        return float(value)
    if isinstance(default, dict) and isinstance(value, str):
        return {"kind": value}  # an initializer by name: "he_normal"
    if isinstance(default, str) and not isinstance(value, str) and value is not None:
        try:
            return _dtype_name(value)
        except TypeError:
            pass
    return value


class LayerKind:
    """The constructor of one registered kind (see the module's doc)."""

    def __init__(self, kind):
        defaults_json, source = _core._layer_kind_info(kind)
        self.kind = kind
        self.defaults = _json.loads(defaults_json)
        self.source = source
        self.__name__ = kind
        self.__qualname__ = kind
        keys = ", ".join(f"{k}={_json.dumps(v)}" for k, v in self.defaults.items())
        self.__doc__ = f"loom.layers.{kind}(*inputs, name='', {keys})"

    def options(self, kwargs):
        """The options JSON for these keyword arguments (the defaults filled in)."""
        options = dict(self.defaults)
        for key, value in kwargs.items():
            if self.defaults and key not in self.defaults:
                raise TypeError(f"loom.layers.{self.kind}: unknown option '{key}' (valid: {', '.join(self.defaults)})")
            options[key] = _convert(self.kind, key, value, self.defaults.get(key))
        return _json.dumps(options)

    def __call__(self, *inputs, name="", **kwargs):
        if len(inputs) == 1 and isinstance(inputs[0], (list, tuple)):
            inputs = tuple(inputs[0])
        for x in inputs:
            if not isinstance(x, _core.Layer):
                raise TypeError(f"loom.layers.{self.kind}: positional arguments are input layers, got "
                                f"{type(x).__name__}; options are keyword arguments ({', '.join(self.defaults) or 'none'})")
        text = self.options(kwargs)
        name = name or ""
        if inputs or self.source:
            return _core._make_layer(self.kind, list(inputs), text, name)
        return _core._unbound_layer(self.kind, text, name)

    def __repr__(self):
        return f"<loom.layers.{self.kind}>"


def Input(shape, dtype="float32", name=""):
    """A graph input: `shape` with -1 for sizes known at run time; an int n is (-1, n)."""
    if isinstance(shape, int):
        shape = (-1, shape)
    return kind("Input")(name=name, shape=shape, dtype=dtype)


def Constant(value, name=""):
    """A fixed tensor (copied) as a layer."""
    return _core._constant(value, name)


# Kinds whose Python form is not a list of options: a Module or Sequential is made from layers,
# a ModuleOutput from a module and an index.
_special = {
    "Input": Input,
    "Constant": Constant,
    "Module": _core.Module,
    "Sequential": _core.Sequential,
    "ModuleOutput": _core.module_output,
}


def kind(name):
    """The constructor of the registered kind `name` (ValueError naming the registered ones)."""
    if name not in _kinds:
        _kinds[name] = LayerKind(name)
    return _kinds[name]


def kinds():
    """Every registered kind, sorted (the registry is read again each call)."""
    return _core.registered_layer_kinds()


def __getattr__(name):
    if name in _special:
        return _special[name]
    if not name.startswith("_") and name in _core.registered_layer_kinds():
        return kind(name)
    raise AttributeError(f"module 'loom.layers' has no attribute '{name}' (registered layer kinds: {', '.join(kinds())})")


def __dir__():
    return sorted(set(globals()) | set(kinds()))
