#!/usr/bin/env python3
"""Loom's libraries export what include/loom marks LOOM_API and nothing else (CMakeLists.txt:
-fvisibility=hidden). Reads each library's dynamic symbol table (nm -D) and fails on:
  - a symbol of a private namespace (the CPU kernels loom::cpu, anonymous namespaces) or
    of a library Loom uses privately (oneDNN, OpenBLAS, SQLite, zstd, ...) being exported;
  - a library exporting no symbol of its own public namespace (e.g. the preset was lost);
  - more exported symbols than LIMIT per library (the count today, with headroom).

  check_exports.py BUILD_DIR        check libloom.so, libloom_store.so and libloom_dist.so
  check_exports.py --self-test      feed planted symbol lists and check each is caught
"""
import subprocess
import sys

PRIVATE = ("loom::cpu::", "(anonymous namespace)", "dnnl::", "dnnl_", "cblas_", "sqlite3_",
           "ZSTD_", "PQ", "SHA256", "EVP_", "MPI_")
LIBS = {  # library -> (a namespace it must export, most exported symbols expected)
    "libloom.so": ("loom::Tensor::", 4000),
    "libloom_store.so": ("loom::store::", 1500),
    "libloom_dist.so": ("loom::dist::", 300),
}


def problems(lib, symbols):
    must, limit = LIBS[lib]
    found = [f"{lib} exports private symbol: {s}" for s in symbols if any(p in s for p in PRIVATE)]
    if not any(must in s for s in symbols):
        found.append(f"{lib} exports nothing of {must} (is -fvisibility=hidden hiding the API too?)")
    if len(symbols) > limit:
        found.append(f"{lib} exports {len(symbols)} symbols, more than {limit}: is something "
                     "private exported (a class marked LOOM_API that should not be)?")
    return found


def exported(path):
    out = subprocess.run(["nm", "-D", "-C", "--defined-only", path], check=True,
                         capture_output=True, text=True).stdout
    return [line.split(" ", 2)[2] for line in out.splitlines() if line.count(" ") >= 2]


def self_test():
    good = ["loom::Tensor::shape() const", "loom::add(loom::Tensor const&, loom::Tensor const&)"]
    cases = {
        "private kernel": good + ["loom::cpu::add_f32(float const*, float const*, float*, long)"],
        "anonymous namespace": good + ["(anonymous namespace)::helper()"],
        "a dependency": good + ["dnnl_stream_create"],
        "nothing public": ["loom::cpu::x()"],
        "too many": good * 3000,
    }
    ok = not problems("libloom.so", good)
    for what, syms in cases.items():
        if not problems("libloom.so", syms):
            print(f"self-test: planted {what} was not caught")
            ok = False
    print("self-test", "ok" if ok else "FAILED")
    return 0 if ok else 1


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    build = argv[1]
    found = []
    for lib in LIBS:
        syms = exported(f"{build}/{lib}")
        print(f"{lib}: {len(syms)} exported symbols")
        found += problems(lib, syms)
    for p in found[:50]:
        print(p)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
