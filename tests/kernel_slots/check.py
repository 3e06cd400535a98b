#!/usr/bin/env python3
"""Every kernel slot declared beside its op (src/ops/backend.h, KernelSlot) is filled by name in
the CPU table, and every name the CPU table fills is a declared slot.

A required slot left unfilled fails its op's first call, but a fused fast path asks
`if_filled` and quietly runs its composite when its kernel is missing, or filled under a
misspelt name: the same results, only slower, which no op test sees. This check reads the
names from the sources instead:

    check.py SOURCE_DIR     check the tree
    check.py --self-test    the check on a planted tree: each kind of mismatch is caught
"""
import pathlib
import re
import sys
import tempfile

# `KernelSlot<...> kName{"family.name"}` (the signature may span lines; the name may open the
# next line) and `b.kernels.fill("family.name", &kernel)`.
DECLARED = re.compile(r'KernelSlot<.*?>\s*\w+\s*\{\s*"([\w.]+)"\s*\}', re.S)
FILLED = re.compile(r'\.kernels\.fill\(\s*"([\w.]+)"')


def names(src, pattern, files):
    found = {}
    for f in files:
        for m in pattern.finditer(f.read_text(errors="replace")):
            found.setdefault(m.group(1), []).append(str(f.relative_to(src.parent)))
    return found


def check(root):
    src = pathlib.Path(root) / "src"
    sources = [p for p in src.rglob("*") if p.suffix in (".cpp", ".h")]
    cpu = [p for p in sources if "ops/cpu" in p.as_posix()]
    # backend.h's own comment shows an example declaration; it declares no slot
    declared = names(src, DECLARED, [p for p in sources if p not in cpu and p.name != "backend.h"])
    filled = names(src, FILLED, cpu)
    problems = []
    for name, where in sorted(declared.items()):
        if len(where) > 1:
            problems.append(f"slot '{name}' is declared twice: {', '.join(where)}")
        if name not in filled:
            problems.append(f"slot '{name}' ({where[0]}) is filled by no kernel of the CPU table (src/ops/cpu: b.kernels.fill)")
    for name, where in sorted(filled.items()):
        if name not in declared:
            problems.append(f"{where[0]} fills '{name}', which no op declares (KernelSlot)")
    return problems, len(declared)


def self_test():
    with tempfile.TemporaryDirectory() as d:
        root = pathlib.Path(d)
        (root / "src/ops/cpu").mkdir(parents=True)
        (root / "src/ops/a.cpp").write_text(
            'constinit const KernelSlot<void(const Tensor& x,\n    int n)> kA{"a.a"};\n'
            'constinit const KernelSlot<void()> kB{\n    "a.b"};\n')
        (root / "src/ops/cpu/a.cpp").write_text('  b.kernels.fill("a.a", &a);\n  b.kernels.fill("a.b", &b);\n')
        problems, n = check(root)
        if problems or n != 2:
            return f"a clean tree: {n} slots, {problems}"
        (root / "src/ops/cpu/a.cpp").write_text('  b.kernels.fill("a.a", &a);\n  b.kernels.fill("a.bb", &b);\n')
        problems, _ = check(root)
        if not any("'a.b'" in p and "filled by no kernel" in p for p in problems):
            return f"an unfilled slot passed: {problems}"
        if not any("'a.bb'" in p and "no op declares" in p for p in problems):
            return f"a fill of no slot passed: {problems}"
    return None


def main():
    if sys.argv[1:] == ["--self-test"]:
        failure = self_test()
        if failure:
            print("self-test:", failure)
            return 1
        return 0
    problems, n = check(sys.argv[1])
    for p in problems:
        print(p)
    if not problems:
        print(f"kernel slots: {n} declared beside their ops, each filled by the CPU table")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
