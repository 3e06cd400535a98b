"""Runs every ```python block of docs/python.md and README.md's "From Python" section, each in a
fresh namespace (the C++ block runner, tests/docs, reads ```cpp blocks only)."""
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def blocks():
    for name in ("docs/python.md", "README.md"):
        text = (ROOT / name).read_text(encoding="utf-8")
        for i, match in enumerate(BLOCK.finditer(text)):
            line = text.count("\n", 0, match.start()) + 1
            yield pytest.param(match.group(1), id=f"{name}:{line}")


@pytest.mark.parametrize("code", list(blocks()))
def test_python_block_runs(code):
    exec(compile(code, "<doc block>", "exec"), {"__name__": "__doc_block__"})


def test_the_pages_have_python_blocks():
    assert len(list(blocks())) >= 3
