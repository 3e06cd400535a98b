#!/usr/bin/env python3
"""Loom's libraries export what include/loom marks LOOM_API and nothing else (CMakeLists.txt:
-fvisibility=hidden). Reads each library's dynamic symbol table (nm -D) and fails on:
  - a symbol of a private namespace (the CPU kernels loom::cpu, anonymous namespaces) or
    of a library Loom uses privately (oneDNN, OpenBLAS, SQLite, zstd, ...) being exported;
  - a library exporting no symbol of its own public namespace (e.g. the preset was lost);
  - more exported symbols than LIMIT per library (the count today, with headroom);
  - a public exception class (include/loom: one deriving from loom::Error) whose type info its
    library keeps hidden: it must be marked LOOM_API, so that a program's catch and typeid see
    the library's one type, not a copy of its own that matches only by name.

A private declaration that Loom's other libraries or its white-box tests reach is marked
LOOM_INTERNAL in its src/ header; its symbols are allowed (read from the headers here).

  check_exports.py BUILD_DIR        check libloom.so, libloom_store.so, libloom_dist.so and libloom_serve.so
  check_exports.py --self-test      feed planted symbol lists and check each is caught
"""
import os
import re
import subprocess
import sys

PRIVATE = ("loom::cpu::", "(anonymous namespace)", "dnnl::", "dnnl_", "cblas_", "sqlite3_",
           "ZSTD_", "PQ", "SHA256", "EVP_", "MPI_", "httplib::", "boost::")
LIBS = {  # library -> (a namespace it must export, most exported symbols expected)
    "libloom.so": ("loom::Tensor::", 2000),
    # (about 40 of them the type info and vtables of the exception classes it throws, its own
    # and core's, exported so that a program catches the library's types)
    "libloom_store.so": ("loom::store::", 450),
    "libloom_dist.so": ("loom::dist::", 100),
    "libloom_serve.so": ("loom::serve::", 100),
}


def internal_names(root):
    """Names declared LOOM_INTERNAL under src/: classes and functions."""
    names = set()
    cls = re.compile(r"(?:class|struct)\s+LOOM_INTERNAL\s+(\w+)")
    fn = re.compile(r"LOOM_INTERNAL\s+[^(]*?(\w+)\s*\(")
    ns = re.compile(r"namespace\s+(\w+)\s*\{\s*LOOM_INTERNAL")
    for dirpath, _, files in os.walk(os.path.join(root, "src")):
        for f in files:
            if f.endswith(".h"):
                for line in open(os.path.join(dirpath, f), encoding="utf-8"):
                    if "#define" in line or "LOOM_INTERNAL" not in line:
                        continue
                    m = cls.search(line) or fn.search(line)
                    if m:
                        n = ns.search(line)  # `namespace avx2 { LOOM_INTERNAL ... get(); }`
                        names.add(f"{n.group(1)}::{m.group(1)}" if n else m.group(1))
    return names


def allowed(symbol, internal):
    head = symbol.split("(")[0]
    return any(re.search(rf"(^|::|\s){re.escape(n)}(::|$)", head) for n in internal)


def problems(lib, symbols, internal=frozenset()):
    must, limit = LIBS[lib]
    found = [f"{lib} exports private symbol: {s}" for s in symbols
             if any(p in s for p in PRIVATE) and not allowed(s, internal)]
    if not any(must in s for s in symbols):
        found.append(f"{lib} exports nothing of {must} (is -fvisibility=hidden hiding the API too?)")
    if len(symbols) > limit:
        found.append(f"{lib} exports {len(symbols)} symbols, more than {limit}: is something "
                     "private exported (a class marked LOOM_API that should not be)?")
    return found


# Where a public exception class of each namespace is thrown from.
EXCEPTION_LIBS = {"loom::store": "libloom_store.so", "loom::flow": "libloom_store.so", "loom::dist": "libloom_dist.so",
                  "loom::serve": "libloom_serve.so", "loom::ui": "libloom_serve.so"}


def exception_classes(root):
    """The public exception classes, qualified ("loom::store::NotFoundError"): the classes of
    include/loom deriving from loom::Error, directly or through another of them."""
    decl = re.compile(r"^\s*class\s+(?:LOOM_API\s+)?(\w+)\s*(?:final\s*)?:\s*public\s+([\w:]+)")
    namespace = re.compile(r"^namespace\s+([\w:]+)\s*\{")
    declared = []  # (qualified name, base's last name), in the headers' order
    for dirpath, _, files in sorted(os.walk(os.path.join(root, "include", "loom"))):
        for f in sorted(files):
            if not f.endswith(".h"):
                continue
            ns = "loom"
            for line in open(os.path.join(dirpath, f), encoding="utf-8"):
                if m := namespace.match(line):
                    ns = m.group(1)
                elif m := decl.match(line):
                    declared.append((f"{ns}::{m.group(1)}", m.group(2).split("::")[-1]))
    found, bases = ["loom::Error"], {"Error"}
    while True:  # (a base may be declared in a header read later)
        more = [c for c, base in declared if base in bases and c not in found]
        if not more:
            return found
        found += more
        bases |= {c.split("::")[-1] for c in more}


def exception_problems(symbols_of, classes):
    """A public exception class whose library does not export its type info. `symbols_of`:
    library -> its exported symbols (a library not built is skipped)."""
    found = []
    for c in classes:
        lib = EXCEPTION_LIBS.get(c.rsplit("::", 1)[0], "libloom.so")
        if lib in symbols_of and f"typeinfo for {c}" not in symbols_of[lib]:
            found.append(f"{lib} keeps the type info of {c} hidden: mark the class LOOM_API")
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
    internal = {"conv2d_winograd_plans", "PreparedCache"}
    ok = not problems("libloom.so", good + ["loom::cpu::conv2d_winograd_plans()",
                                            "loom::cpu::onednn::PreparedCache::clear()"], internal)
    if not problems("libloom.so", good + ["loom::cpu::conv2d_winograd_plans_other()"], internal):
        print("self-test: a private symbol named like an internal one was not caught")
        ok = False
    for what, syms in cases.items():
        if not problems("libloom.so", syms):
            print(f"self-test: planted {what} was not caught")
            ok = False
    classes = ["loom::ShapeError", "loom::store::NotFoundError"]
    libs = {"libloom.so": good + ["typeinfo for loom::ShapeError"], "libloom_store.so": ["typeinfo for loom::store::NotFoundError"]}
    if exception_problems(libs, classes) or not exception_problems({**libs, "libloom_store.so": []}, classes):
        print("self-test: a hidden exception type info was not caught (or a visible one was)")
        ok = False
    print("self-test", "ok" if ok else "FAILED")
    return 0 if ok else 1


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    build = argv[1]
    internal = internal_names(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    print(f"{len(internal)} names declared LOOM_INTERNAL: {', '.join(sorted(internal))}")
    found, symbols_of = [], {}
    for lib in LIBS:
        syms = exported(f"{build}/{lib}")
        symbols_of[lib] = set(syms)
        print(f"{lib}: {len(syms)} exported symbols")
        found += problems(lib, syms, internal)
    classes = exception_classes(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    print(f"{len(classes)} public exception classes")
    found += exception_problems(symbols_of, classes)
    for p in found[:50]:
        print(p)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
