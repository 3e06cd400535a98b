"""The type stubs beside the package (python/loom/_core/*.pyi, docs/python.md "Type stubs") declare
what the module has at run time: the members python/loom/__init__.py adds to Tensor and Layer in
Python (which python/stubs.pat writes, by hand) included. ctest python_stubs checks the rest:
that the stubs are what nanobind's generator writes for the built module."""
import ast
import os

import loom
from loom import _core

STUBS = os.path.join(os.path.dirname(loom.__file__), "_core")


def declared(stub, cls_name):
    """The names a class of a stub file defines (methods, properties, attributes)."""
    with open(os.path.join(STUBS, stub), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == cls_name:
            names = set()
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    names.add(item.name)
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    names.add(item.target.id)
                elif isinstance(item, ast.Assign):
                    names.update(t.id for t in item.targets if isinstance(t, ast.Name))
            return names
    raise AssertionError(f"{stub} has no class {cls_name}")


def test_py_typed_marks_the_package():
    assert os.path.isfile(os.path.join(os.path.dirname(loom.__file__), "py.typed"))


def test_every_public_member_of_tensor_and_layer_is_in_the_stubs():
    for cls in (loom.Tensor, loom.Layer, loom.Graph, loom.Plan):
        runtime = {name for name in dir(cls) if not name.startswith("_")}
        missing = sorted(runtime - declared("__init__.pyi", cls.__name__))
        assert not missing, f"loom.{cls.__name__} has {missing} at run time, not in its stub (python/stubs.pat for " \
            "what python/loom/__init__.py adds; scripts/python_stubs.sh for the rest)"


def test_every_public_function_of_the_module_is_in_the_stubs():
    with open(os.path.join(STUBS, "__init__.pyi"), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    names = {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
    runtime = {name for name, value in vars(_core).items() if not name.startswith("_") and callable(value)}
    assert not sorted(runtime - names)
