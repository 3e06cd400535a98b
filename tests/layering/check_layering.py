#!/usr/bin/env python3
"""The architecture as a test (docs/architecture.md, "Parts and their order").

Every file of a part (src/<part>/, include/loom/<part>/, tools/<part>/) may include the public
headers of its own part and of the parts below it (loom/<part>/...), its own part's private
headers (src/<part>/...) and the internal interfaces that a lower part declares for the parts
above it (INTERFACES below). Anything else fails: an include of a higher part, or of another
part's private header.

The unit tests follow the same order (docs/testing.md): a test in tests/unit/<part>/ (built into
loom_<part>_tests) may include what a file of <part> may, the helpers of its own and lower parts'
tests (unit/<part>/...) and those of tests/unit/common/ (core's level, for every part), never the
umbrella loom/loom.h; a helper elsewhere under tests/ that it includes (reference/op_cases.h) is
held to the same rule. A few tests reach a private header that their part's files may not
(TEST_PRIVATE below). A test file outside a part's folder fails too: no binary would build it.

  check_layering.py ROOT            check the tree at ROOT; exit 1 and list every violation
  check_layering.py --plant ROOT    check that planted violations in a copy of ROOT are caught
"""
import os
import re
import shutil
import sys
import tempfile

# docs/architecture.md's order, bottom to top (tools: the `loom` command line)
ORDER = ["core", "ops", "autograd", "nn", "graph", "zoo", "data", "io", "train", "store", "flow", "serve", "ui", "dist", "tools"]
RANK = {p: i for i, p in enumerate(ORDER)}

# Private headers a lower part offers to the parts above it, each a declared seam (not
# installed, not for users): the JSON and UTF-8 helpers every reader and writer shares, the
# backend table (the one door to kernels, through which train's optimizers reach theirs), the
# fused kernels the plan compiler emits, the layer kinds' JSON options and registration that
# graph's serialisation and modules read, and the HTTP server the model server and the
# dashboard share.
INTERFACES = {
    "core/json_util.h", "core/utf8.h",
    "ops/backend.h", "ops/internal.h", "ops/conv_fused.h", "ops/fused_elementwise.h",
    "nn/options_json.h", "nn/register_kinds.h",
    "serve/http_server.h",
}

# Crossings still to remove; each still present is tolerated, each gone must leave this list
# (so it only shrinks).
PENDING = set()  # none left: flow uses the store's public seam, sync batch norm the public op API

# The unit tests' folders: the parts', and common/ (helpers every part's tests share) at core's level.
TEST_DIR = "tests/unit"
TEST_LEVEL = {**RANK, "common": RANK["core"]}

# Private headers of another part that a test reaches, each a test's own need (the library's
# files may not): conv_infer_test compares the inference path with oneDNN's and Loom's kernels
# called directly; attention_flash_test holds the fused attention kernel to the math form. Like
# PENDING, each entry no longer included must leave the list.
TEST_PRIVATE = {
    ("tests/unit/autograd/attention_flash_test.cpp", "ops/attention_internal.h"),
    ("tests/unit/train/conv_infer_test.cpp", "ops/cpu/nn_kernels.h"),
    ("tests/unit/train/conv_infer_test.cpp", "ops/cpu/onednn.h"),
}

INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^">]+)[">]')


def part_of(rel):
    p = rel.split("/")
    if p[0] == "src" and len(p) > 2:
        return p[1]
    if p[:2] == ["include", "loom"] and len(p) > 3:
        return p[2]
    if p[0] == "tools" and len(p) > 2:
        return "tools"
    return None


def violations(root):
    found, pending_seen = [], set()
    for base in ("src", "include/loom", "tools"):
        for dirpath, _, files in os.walk(os.path.join(root, base)):
            for f in sorted(files):
                if not f.endswith((".h", ".cpp", ".inc")):
                    continue
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, root)
                part = part_of(rel)
                if part not in RANK:
                    continue
                with open(path, errors="replace") as fh:
                    for n, line in enumerate(fh, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        h = m.group(1)
                        if h.startswith("loom/"):
                            q = h.split("/")[1]
                            if q in RANK and RANK[q] > RANK[part]:
                                found.append(f"{rel}:{n}: includes {h}: {q} is above {part}")
                            continue
                        q = h.split("/")[0]
                        if q not in RANK or q == part or not os.path.exists(os.path.join(root, "src", h)):
                            continue
                        if (rel, h) in PENDING:
                            pending_seen.add((rel, h))
                        elif h in INTERFACES and RANK[q] < RANK[part]:
                            pass
                        elif h in INTERFACES:
                            found.append(f"{rel}:{n}: includes {h}, an interface of {q}, which is above {part}")
                        else:
                            found.append(f"{rel}:{n}: includes {h}, a private header of {q}")
    for rel, h in sorted(PENDING - pending_seen):
        found.append(f"{rel} no longer includes {h}: remove it from PENDING in {os.path.basename(__file__)}")
    return found + test_violations(root)


def includes(path):
    with open(path, errors="replace") as fh:
        for n, line in enumerate(fh, 1):
            m = INCLUDE.match(line)
            if m:
                yield n, m.group(1)


def test_violations(root):
    """The unit tests' includes (module docstring): each test at its folder's part."""
    found, private_seen = [], set()
    tests = os.path.join(root, TEST_DIR)

    def check_file(path, rel, folder, where, seen):
        level = TEST_LEVEL[folder]
        for n, h in includes(path):
            at = f"{where}{os.path.relpath(path, root)}:{n}"
            if h.startswith("."):  # a relative path: to what it names under the root
                h = os.path.relpath(os.path.normpath(os.path.join(os.path.dirname(path), h)), root)
                if h.startswith("src/"):
                    h = h[len("src/"):]
                elif h.startswith("tests/"):
                    h = h[len("tests/"):]
            if h == "loom/loom.h":
                found.append(f"{at}: includes {h}, the umbrella: a test includes its part's headers")
                continue
            if h.startswith("loom/"):
                q = h.split("/")[1]
                if q in RANK and RANK[q] > level:
                    found.append(f"{at}: includes {h}: {q} is above the tests of {folder}")
                continue
            if h.startswith("unit/"):
                q = h.split("/")[1]
                if q not in TEST_LEVEL:
                    found.append(f"{at}: includes {h}, not a helper of a part's tests")
                elif TEST_LEVEL[q] > level:
                    found.append(f"{at}: includes {h}, a helper of the tests of {q}, which is above {folder}")
                continue
            if os.path.exists(os.path.join(root, "tests", h)):  # a helper elsewhere under tests/
                helper = os.path.join(root, "tests", h)
                if helper not in seen:
                    seen.add(helper)
                    check_file(helper, rel, folder, f"{at}: via ", seen)
                continue
            q = h.split("/")[0]
            if q not in RANK or not os.path.exists(os.path.join(root, "src", h)):
                continue
            if q == folder or (h in INTERFACES and RANK[q] < level):
                pass
            elif (rel, h) in TEST_PRIVATE:
                private_seen.add((rel, h))
            else:
                found.append(f"{at}: includes {h}, a private header of {q}")

    for dirpath, _, files in os.walk(tests):
        for f in sorted(files):
            if not f.endswith((".h", ".cpp", ".inc")):
                continue
            path = os.path.join(dirpath, f)
            rel = os.path.relpath(path, root)
            folder = os.path.relpath(path, tests).split(os.sep)[0]
            if folder not in TEST_LEVEL or os.path.dirname(path) == tests:
                found.append(f"{rel}: not in a part's folder (tests/unit/<part>/), so in no test binary")
                continue
            check_file(path, rel, folder, "", set())
    for rel, h in sorted(TEST_PRIVATE - private_seen):
        found.append(f"{rel} no longer includes {h}: remove it from TEST_PRIVATE in {os.path.basename(__file__)}")
    return found


def check(root):
    bad = violations(root)
    for b in bad:
        print(b)
    print(f"layering: {0 if bad else 1} passed, {1 if bad else 0} failed ({len(bad)} violations)")
    return 1 if bad else 0


def plant(root):
    """Plants an upward include and a private-header include in a copy of the library, and in
    the unit tests the umbrella, an upward include, a higher part's test helper, a private header,
    an upward include in a helper under tests/reference and a test outside a part's folder; expects
    each named, once."""
    with tempfile.TemporaryDirectory() as tmp:
        for d in ("src", "include", "tools", "tests/unit", "tests/reference"):
            shutil.copytree(os.path.join(root, d), os.path.join(tmp, d),
                            ignore=shutil.ignore_patterns("*.o", "build*"))
        planted = {
            "src/core/tensor.cpp": '#include "loom/train/model.h"',
            "src/nn/linear.cpp": '#include "store/db.h"',
            "tests/unit/ops/dtype_test.cpp": "#include <loom/loom.h>",
            "tests/unit/core/file_test.cpp": "#include <loom/ops/creation.h>",
            "tests/unit/graph/layers_test.cpp": '#include "unit/train/train_test_util.h"',
            "tests/unit/store/store_runs_test.cpp": '#include "flow/task_schema.h"',
            "tests/reference/op_cases.h": "#include <loom/graph/graph.h>",
            "tests/unit/stray_test.cpp": "#include <gtest/gtest.h>",
        }
        for rel, line in planted.items():
            with open(os.path.join(tmp, rel), "a") as f:
                f.write(f"\n{line}\n")
        bad = violations(tmp)
        # the helper's include is named at the test that reaches it
        want = [w for w in planted if not w.startswith("tests/reference/")] + ["tests/unit/autograd/gradcheck_test.cpp"]
        missed = [w for w in want if not any(b.startswith(w + ":") for b in bad)]
        clean = violations(root)
        ok = not missed and not clean and len(bad) == len(want)
        print("\n".join(bad))
        print(f"layering self-test: {1 if ok else 0} passed, {0 if ok else 1} failed"
              + (f" (not caught: {missed})" if missed else "") + (" (the tree itself fails)" if clean else ""))
        return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--plant":
        sys.exit(plant(sys.argv[2]))
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(check(sys.argv[1]))
