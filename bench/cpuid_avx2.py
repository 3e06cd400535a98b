"""Runs a Python package's native code as on a CPU without AVX-512 (benchmarks only).

The avx2 level of bench/isa_levels.sh caps every library that has a switch (LOOM_SIMD,
ONEDNN_MAX_CPU_ISA, OPENBLAS_CORETYPE, ATEN_CPU_CAPABILITY). ONNX Runtime's MLAS has none: it
reads CPUID and takes its AVX-512 kernels wherever the CPU has them. patch_package() and
install_trap() give such a package an AVX2 CPU to look at:

1. it copies the installed package into a folder of the caller's (a temporary one);
2. in every shared library of the copy, each CPUID instruction that objdump's disassembly finds
   (0F A2) is overwritten with INT3 + NOP (CC 90), checking the two bytes first;
3. it builds bench/cpuid_avx2_trap.c (`cc -shared`), whose SIGTRAP handler executes the real
   CPUID for the trapped registers and clears the AVX-512 feature bits, and installs it;
4. it puts the copy first on sys.path, so that the next `import` loads the patched libraries.

The caller must check trapped_count() > 0 after the package has initialised: it counts the
CPUID instructions the handler answered, and 0 means the package never asked (the figures
would then be native ones). Only the dispatch is changed; the hardware (caches, clock) stays
the machine's, as with the other libraries' switches.
"""
from __future__ import annotations

import ctypes
import importlib.util
import os
import re
import shutil
import subprocess
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _sections(path: str) -> list[tuple[int, int, int]]:
    """(virtual address, size, file offset) of each section objdump -h lists."""
    out = subprocess.run(["objdump", "-h", path], check=True, capture_output=True, text=True).stdout
    found = []
    for line in out.splitlines():
        # Idx Name Size VMA LMA File-off Algn
        f = line.split()
        if len(f) >= 7 and f[0].isdigit():
            found.append((int(f[3], 16), int(f[2], 16), int(f[5], 16)))
    return found


def _patch_cpuid(path: str) -> int:
    """Overwrites every CPUID instruction of the shared library at path; returns how many."""
    dis = subprocess.run(["objdump", "-d", "--no-show-raw-insn", path], check=True,
                         capture_output=True, text=True).stdout
    addresses = [int(m.group(1), 16) for m in re.finditer(r"^\s*([0-9a-f]+):\s+cpuid\s*$", dis, re.M)]
    if not addresses:
        return 0
    sections = _sections(path)
    with open(path, "r+b") as f:
        for address in addresses:
            offset = next((off + address - vma for vma, size, off in sections if vma <= address < vma + size),
                          None)
            if offset is None:
                raise RuntimeError(f"cpuid_avx2: no section holds the CPUID at {address:#x} in {path}")
            f.seek(offset)
            if f.read(2) != b"\x0f\xa2":
                raise RuntimeError(f"cpuid_avx2: the bytes at {address:#x} in {path} are not CPUID")
            f.seek(offset)
            f.write(b"\xcc\x90")
    return len(addresses)


def patch_package(package: str, folder: str) -> str:
    """Copies `package` into folder and patches the copy's CPUID instructions (steps 1 and 2);
    returns the folder to put first on sys.path. Needs no import of the package."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"cpuid_avx2: package {package} not found")
    root = os.path.join(folder, "cpuid-avx2-packages")
    copy = os.path.join(root, package)
    shutil.copytree(list(spec.submodule_search_locations)[0], copy)
    patched = 0
    for dirpath, _, files in os.walk(copy):
        for name in files:
            if ".so" in name:
                patched += _patch_cpuid(os.path.join(dirpath, name))
    if patched == 0:
        raise RuntimeError(f"cpuid_avx2: no CPUID instruction found in {package}'s libraries")
    return root


def install_trap(root: str, folder: str) -> ctypes.CDLL:
    """Builds and installs the SIGTRAP handler and puts root (from patch_package) first on
    sys.path (steps 3 and 4); call before importing the package. Returns the trap library:
    call its trapped_count() once the package has initialised."""
    trap = os.path.join(folder, f"cpuid_avx2_trap_{os.getpid()}.so")
    subprocess.run([os.environ.get("CC", "cc"), "-O2", "-shared", "-fPIC", "-o", trap,
                    os.path.join(_HERE, "cpuid_avx2_trap.c")], check=True)
    lib = ctypes.CDLL(trap)
    lib.trapped_count.restype = ctypes.c_long
    if lib.install() != 0:
        raise RuntimeError("cpuid_avx2: could not install the SIGTRAP handler")
    sys.path.insert(0, root)
    return lib
