"""Every public function, class, method and property of the native module (loom._core and its
submodules) has a docstring (docs/python.md, "Type stubs"): help(), IDEs and the stubs
(scripts/python_stubs.sh copies the docstrings into python/loom/_core/*.pyi) show it. A binding
added without one fails here, named."""
import inspect
import types

import loom
from loom import _core


def nanobind_doc(obj):
    """The docstring text of a nanobind function or method (its __doc__ also holds the generated
    signature, which is not documentation), or None for other objects."""
    signatures = getattr(obj, "__nb_signature__", None)
    if signatures is None:
        return None
    return "\n".join(entry[1] for entry in signatures if entry[1])


def documented(obj):
    if isinstance(obj, property):
        getter = obj.fget
        doc = nanobind_doc(getter) if getter is not None else None
        if doc is not None:
            return bool(doc.strip()) or bool(obj.__doc__ and obj.__doc__ != getter.__doc__)
        return bool(inspect.getdoc(obj))
    doc = nanobind_doc(obj)
    if doc is not None:
        return bool(doc.strip())
    return bool(obj.__doc__ and obj.__doc__.strip())


def native_modules():
    """_core and every submodule bound under it (linalg, random, zoo, io, data, ...)."""
    found, stack = [], [_core]
    while stack:
        module = stack.pop()
        found.append(module)
        for value in vars(module).values():
            if isinstance(value, types.ModuleType) and value.__name__.startswith(module.__name__ + "."):
                stack.append(value)
    return found


def is_native(obj):
    return hasattr(obj, "__nb_signature__") or (inspect.isclass(obj) and obj.__module__.startswith("loom"))


def undocumented():
    missing, seen = [], set()
    for module in native_modules():
        for name, value in sorted(vars(module).items()):
            if name.startswith("_") or isinstance(value, types.ModuleType) or id(value) in seen:
                continue
            where = f"{module.__name__}.{name}"
            if inspect.isclass(value):
                seen.add(id(value))
                if not documented(value):
                    missing.append(where)
                for member_name, member in sorted(vars(value).items()):
                    if member_name.startswith("_"):
                        continue
                    # Methods and properties bound in C++ (the Python ones loom/__init__.py adds
                    # to Tensor carry the docstrings of the functions they call)
                    native = hasattr(member, "__nb_signature__") or (
                        isinstance(member, property) and hasattr(member.fget, "__nb_signature__"))
                    if native and not documented(member):
                        missing.append(f"{where}.{member_name}")
            elif callable(value) and is_native(value) and not documented(value):
                missing.append(where)
    return missing


def test_every_public_binding_has_a_docstring():
    missing = undocumented()
    assert not missing, f"{len(missing)} public bindings lack a docstring (python/src): " + ", ".join(missing)


def test_the_check_sees_a_missing_docstring():
    # A nanobind function's __doc__ is never empty (it starts with the generated signature): the
    # check reads the docstring part of __nb_signature__, as for a binding made without one.
    class Bound:
        __doc__ = "f(x: int) -> int"
        __nb_signature__ = (("def f(x: int) -> int", None, None),)

    assert not documented(Bound())
    assert documented(_core.set_num_threads) and nanobind_doc(_core.set_num_threads) != _core.set_num_threads.__doc__
    assert loom.linalg in native_modules() and loom.random in native_modules()
