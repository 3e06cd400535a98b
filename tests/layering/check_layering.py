#!/usr/bin/env python3
"""The architecture as a test (docs/architecture.md, "Parts and their order").

Every file of a part (src/<part>/, include/loom/<part>/, tools/<part>/) may include the public
headers of its own part and of the parts below it (loom/<part>/...), its own part's private
headers (src/<part>/...) and the internal interfaces that a lower part declares for the parts
above it (INTERFACES below). Anything else fails: an include of a higher part, or of another
part's private header. A relative include ("../store/db.h") is read as the header it reaches. The
command line (tools/) is a program over the public API: it includes no private header at all.
Public headers mark what they export LOOM_API, private ones LOOM_INTERNAL (docs/architecture.md,
"Libraries"); either in the other's place fails. And the libraries link in the same order: a
library's target_link_libraries (CMakeLists.txt, tools/*/CMakeLists.txt) names no library of a
higher part.

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
# graph's serialisation and modules read, the convolution layers' padding rule the ONNX exporter
# writes pads by, and the HTTP server the model server and the
# dashboard share.
INTERFACES = {
    "core/json_util.h", "core/utf8.h",
    "ops/backend.h", "ops/internal.h", "ops/conv_fused.h", "ops/fused_elementwise.h",
    "nn/options_json.h", "nn/register_kinds.h", "nn/conv_padding.h",
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

# Each library target (and its alias) and the parts it is built from, lowest to highest.
LIBRARIES = {
    "loom": ("core", "train"), "loom::loom": ("core", "train"),
    "loom_store": ("store", "flow"), "loom::store": ("store", "flow"),
    "loom_serve": ("serve", "ui"), "loom::serve": ("serve", "ui"),
    "loom_dist": ("dist", "dist"), "loom::dist": ("dist", "dist"),
    "loom_cli": ("tools", "tools"),
}
LINK = re.compile(r"target_link_libraries\(\s*([\w:]+)([^)]*)\)")


def resolve(root, path, h):
    """An include as the include path reads it: a relative one ("../store/db.h") as the header
    it reaches (store/db.h, loom/train/model.h), from the including file's folder or, failing
    that, from src/ and include/."""
    if not (h.startswith(".") or "/../" in h or "/./" in h):
        return h
    for base in (os.path.dirname(path), os.path.join(root, "src"), os.path.join(root, "include")):
        target = os.path.normpath(os.path.join(base, h))
        if os.path.exists(target):
            break
    rel = os.path.relpath(target, root)
    for prefix in ("src/", "include/"):
        if rel.startswith(prefix):
            return rel[len(prefix):]
    return rel


def mark_violations(root):
    """LOOM_API in a private header (src/) or LOOM_INTERNAL in a public one (include/loom/)."""
    found = []
    for base, wrong, right in (("src", "LOOM_API", "LOOM_INTERNAL"), ("include/loom", "LOOM_INTERNAL", "LOOM_API")):
        for dirpath, _, files in os.walk(os.path.join(root, base)):
            for f in sorted(files):
                if not f.endswith(".h") or f == "api.h":
                    continue
                path = os.path.join(dirpath, f)
                with open(path, errors="replace") as fh:
                    for n, line in enumerate(fh, 1):
                        if re.search(rf"\b{wrong}\b", line):
                            found.append(f"{os.path.relpath(path, root)}:{n}: {wrong} in a "
                                         f"{'private' if base == 'src' else 'public'} header (mark it {right})")
    return found


def link_violations(root):
    """A library target linking one of a higher part (CMake's own link lists)."""
    found = []
    files = [os.path.join(root, "CMakeLists.txt")]
    for dirpath, _, names in os.walk(os.path.join(root, "tools")):
        files += [os.path.join(dirpath, n) for n in names if n == "CMakeLists.txt"]
    for path in files:
        if not os.path.exists(path):
            continue
        text = re.sub(r"#[^\n]*", "", open(path, errors="replace").read())
        for m in LINK.finditer(text):
            target = m.group(1)
            if target not in LIBRARIES:
                continue
            for dep in m.group(2).split():
                if dep in LIBRARIES and RANK[LIBRARIES[dep][1]] >= RANK[LIBRARIES[target][0]] and \
                        LIBRARIES[dep] != LIBRARIES[target]:
                    line = text.count("\n", 0, m.start()) + 1
                    (lo, hi), (dep_lo, dep_hi) = LIBRARIES[target], LIBRARIES[dep]
                    found.append(f"{os.path.relpath(path, root)}:{line}: {target} ({lo} to {hi}) links {dep} "
                                 f"({dep_lo} to {dep_hi}): a library links only the libraries of parts below its own")
    return found


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
                        h = resolve(root, path, m.group(1))
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
                        elif part == "tools":
                            found.append(f"{rel}:{n}: includes {h}, a private header of {q}: the command line uses the public API")
                        elif h in INTERFACES and RANK[q] < RANK[part]:
                            pass
                        elif h in INTERFACES:
                            found.append(f"{rel}:{n}: includes {h}, an interface of {q}, which is above {part}")
                        else:
                            found.append(f"{rel}:{n}: includes {h}, a private header of {q}")
    for rel, h in sorted(PENDING - pending_seen):
        found.append(f"{rel} no longer includes {h}: remove it from PENDING in {os.path.basename(__file__)}")
    return found + test_violations(root) + mark_violations(root) + link_violations(root)


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
            h = resolve(root, path, h)
            if h.startswith("tests/"):  # a relative path to a helper
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
        shutil.copy(os.path.join(root, "CMakeLists.txt"), os.path.join(tmp, "CMakeLists.txt"))
        planted = {
            "src/core/tensor.cpp": '#include "loom/train/model.h"',
            "src/nn/linear.cpp": '#include "store/db.h"',
            "src/ops/creation.cpp": '#include "../store/db.h"',
            "src/graph/graph.cpp": '#include "../../include/loom/train/model.h"',
            "tools/cli/runs.cpp": '#include "core/utf8.h"',
            "src/store/db.h": "LOOM_API void planted();",
            "include/loom/nn/layer.h": "LOOM_INTERNAL void planted();",
            "CMakeLists.txt": "target_link_libraries(loom PRIVATE loom::store)",
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
