#!/usr/bin/env python3
"""Checks bench/cpuid_avx2.py, which runs ONNX Runtime at the avx2 level of bench/isa_levels.sh
(docs/benchmarks.md, "ResNet-18 inference: how to run"), on a package of its own: a shared
library whose functions execute CPUID is put in a throwaway package, patched and loaded. The
patched copy must report CPUID leaf 7 without the AVX-512 bits, pass every other register and
leaf through unchanged, and have each answer counted; the original must be left as it was.

Usage: check_cpuid_avx2.py SOURCE_DIR
"""
import ctypes
import os
import subprocess
import sys
import tempfile

LIBRARY = r"""
#include <cpuid.h>
unsigned leaf(unsigned eax, unsigned ecx, int reg) {
  unsigned r[4];
  __cpuid_count(eax, ecx, r[0], r[1], r[2], r[3]);
  return r[reg];
}
"""
EAX, EBX, ECX, EDX = range(4)
AVX512_LEAF7_EBX = (1 << 16) | (1 << 17) | (1 << 21) | (1 << 26) | (1 << 27) | (1 << 28) | (1 << 30) | (1 << 31)
AVX512_LEAF7_ECX = (1 << 1) | (1 << 6) | (1 << 11) | (1 << 12) | (1 << 14)
AVX512_LEAF7_EDX = (1 << 2) | (1 << 3) | (1 << 8) | (1 << 23)


def main():
    sys.path.insert(0, os.path.join(sys.argv[1], "bench"))
    import cpuid_avx2

    with tempfile.TemporaryDirectory(prefix="loom-cpuid-") as folder:
        package = os.path.join(folder, "site", "cpuid_probe")
        os.makedirs(package)
        open(os.path.join(package, "__init__.py"), "w").close()
        source = os.path.join(folder, "probe.c")
        with open(source, "w") as f:
            f.write(LIBRARY)
        original = os.path.join(package, "probe.so")
        subprocess.run(["cc", "-O1", "-shared", "-fPIC", "-o", original, source], check=True)
        before = open(original, "rb").read()
        sys.path.insert(0, os.path.join(folder, "site"))

        root = cpuid_avx2.patch_package("cpuid_probe", folder)
        assert open(original, "rb").read() == before, "the installed package was modified"
        patched = os.path.join(root, "cpuid_probe", "probe.so")
        assert open(patched, "rb").read() != before, "nothing was patched"
        trap = cpuid_avx2.install_trap(root, folder)

        real = ctypes.CDLL(original)
        masked = ctypes.CDLL(patched)
        for lib in (real, masked):
            lib.leaf.restype = ctypes.c_uint
            lib.leaf.argtypes = [ctypes.c_uint, ctypes.c_uint, ctypes.c_int]
        max_leaf = real.leaf(0, 0, EAX)
        asked = 0
        for eax, ecx in [(0, 0), (1, 0), (7, 0), (7, 1), (0x80000001, 0)]:
            if eax <= 0xFFFF and eax > max_leaf:
                continue
            for reg in (EAX, EBX, ECX, EDX):
                want = real.leaf(eax, ecx, reg)
                if (eax, ecx, reg) == (7, 0, EBX):
                    want &= ~AVX512_LEAF7_EBX
                elif (eax, ecx, reg) == (7, 0, ECX):
                    want &= ~AVX512_LEAF7_ECX
                elif (eax, ecx, reg) == (7, 0, EDX):
                    want &= ~AVX512_LEAF7_EDX
                elif (eax, ecx, reg) == (7, 1, EAX):
                    want &= ~(1 << 5)
                got = masked.leaf(eax, ecx, reg)
                asked += 1
                assert got == want, f"CPUID({eax:#x}, {ecx}) register {reg}: {got:#x}, expected {want:#x}"
        assert trap.trapped_count() == asked, f"{trap.trapped_count()} answers counted for {asked} calls"
        print(f"cpuid_avx2: {asked} CPUID calls through the patched copy answered as on a CPU without AVX-512 "
              f"(this CPU's leaf 7 EBX {real.leaf(7, 0, EBX):#x} -> {masked.leaf(7, 0, EBX):#x})")


if __name__ == "__main__":
    main()
