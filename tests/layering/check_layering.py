#!/usr/bin/env python3
"""The architecture as a test (docs/architecture.md, "Parts and their order").

Every file of a part (src/<part>/, include/loom/<part>/, tools/<part>/) may include the public
headers of its own part and of the parts below it (loom/<part>/...), its own part's private
headers (src/<part>/...) and the internal interfaces that a lower part declares for the parts
above it (INTERFACES below). Anything else fails: an include of a higher part, or of another
part's private header.

  check_layering.py ROOT            check the tree at ROOT; exit 1 and list every violation
  check_layering.py --plant ROOT    check that planted violations in a copy of ROOT are caught
"""
import os
import re
import shutil
import sys
import tempfile

# docs/architecture.md's order, bottom to top (tools: the `loom` command line)
ORDER = ["core", "ops", "autograd", "nn", "graph", "zoo", "data", "io", "train", "store", "flow", "dist", "tools"]
RANK = {p: i for i, p in enumerate(ORDER)}

# Private headers a lower part offers to the parts above it, each a declared seam (not
# installed, not for users): the JSON and UTF-8 helpers every reader and writer shares, the
# backend table (the one door to kernels, through which train's optimizers reach theirs), the
# fused kernels the plan compiler emits, the layer kinds' JSON options and registration that
# graph's serialisation and modules read.
INTERFACES = {
    "core/json_util.h", "core/utf8.h",
    "ops/backend.h", "ops/internal.h", "ops/conv_fused.h", "ops/fused_elementwise.h",
    "nn/options_json.h", "nn/register_kinds.h",
}

# Crossings still to remove; each still present is tolerated, each gone must leave this list
# (so it only shrinks).
PENDING = set()  # none left: flow uses the store's public seam, sync batch norm the public op API

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
    return found


def check(root):
    bad = violations(root)
    for b in bad:
        print(b)
    print(f"layering: {0 if bad else 1} passed, {1 if bad else 0} failed ({len(bad)} violations)")
    return 1 if bad else 0


def plant(root):
    """Plants an upward include and a private-header include in a copy and expects both named."""
    with tempfile.TemporaryDirectory() as tmp:
        for d in ("src", "include", "tools"):
            shutil.copytree(os.path.join(root, d), os.path.join(tmp, d),
                            ignore=shutil.ignore_patterns("*.o", "build*"))
        with open(os.path.join(tmp, "src/core/tensor.cpp"), "a") as f:
            f.write('\n#include "loom/train/model.h"\n')
        with open(os.path.join(tmp, "src/nn/linear.cpp"), "a") as f:
            f.write('\n#include "store/db.h"\n')
        bad = violations(tmp)
        want = ["src/core/tensor.cpp", "src/nn/linear.cpp"]
        missed = [w for w in want if not any(b.startswith(w + ":") for b in bad)]
        clean = violations(root)
        ok = not missed and not clean and len(bad) == 2
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
