#!/usr/bin/env python3
"""Extracts every ```cpp block of the given Markdown files into one C++ program (docs/testing.md,
"Docs that compile").

A block is compiled as written. Lines at its top that are `#include`, `using namespace` or a
namespace alias go to file scope; the rest becomes the body of a function of its own, so two
blocks may declare the same names. HTML comments directly above a block (invisible when the
Markdown is rendered) say what the block needs:

    <!-- snippet-context: Graph graph = ...; Tensor x = ...; -->   declarations placed before it
    <!-- snippet: run -->                                          the program also runs it
    <!-- snippet: program -->                                      a whole program with its main
    <!-- snippet: internal -->                                     code of Loom's own (tools/, src/): not
                                                                   built here but in the source tree, by
                                                                   check_internal_snippets.py

Blocks that are not run are still compiled and linked. Usage:
    extract_snippets.py OUT_DIR file.md [file.md ...]
writes OUT_DIR/snippets.cpp (one main that runs the `run` blocks in order, each in a fresh
folder) and OUT_DIR/program_<n>.cpp for `program` blocks, and prints how many it wrote.
"""
import pathlib
import re
import sys

FILE_SCOPE = re.compile(r"^\s*(#include\b|using namespace\b|namespace \w+ = )")
COMMENT = re.compile(r"<!--(.*?)-->", re.S)


def blocks(path):
    """Yields (line number, code, directives) for each ```cpp block of a Markdown file."""
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```cpp":
            start = i + 1
            # The comments right above the fence (blank lines between them allowed).
            above = []
            j = i - 1
            while j >= 0 and (lines[j].strip() == "" or lines[j].rstrip().endswith("-->")):
                if lines[j].strip() == "":
                    j -= 1
                    continue
                k = j
                while k >= 0 and "<!--" not in lines[k]:
                    k -= 1
                if k < 0:
                    break
                above.insert(0, "\n".join(lines[k:j + 1]))
                j = k - 1
            end = start
            while end < len(lines) and lines[end].strip() != "```":
                end += 1
            if end == len(lines):
                sys.exit(f"{path}:{i + 1}: a ```cpp block is never closed")
            directives = {"context": [], "run": False, "program": False, "internal": False}
            for c in above:
                for body in COMMENT.findall(c):
                    body = body.strip()
                    if body.startswith("snippet-context:"):
                        directives["context"].append(body[len("snippet-context:"):].strip())
                    elif body.startswith("snippet:"):
                        word = body[len("snippet:"):].strip()
                        if word not in ("run", "program", "internal"):
                            sys.exit(f"{path}:{i + 1}: unknown snippet directive '{word}' (valid: run, program, internal)")
                        directives[word] = True
            yield start, "\n".join(lines[start:end]), directives
            i = end + 1
        else:
            i += 1


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: extract_snippets.py OUT_DIR file.md [file.md ...]")
    out = pathlib.Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    heads, functions, runs, programs = [], [], [], 0
    for name in sys.argv[2:]:
        path = pathlib.Path(name)
        for line, code, d in blocks(path):
            where = f"{path.name}:{line}"
            if d["internal"]:  # built against the source tree (check_internal_snippets.py)
                continue
            if d["program"]:
                programs += 1
                (out / f"program_{programs}.cpp").write_text(f'#line {line + 1} "{path}"\n{code}\n', encoding="utf-8")
                continue
            body = code.split("\n")
            n = 0
            while n < len(body) and (FILE_SCOPE.match(body[n]) or body[n].strip() == ""):
                if body[n].strip():
                    heads.append(body[n].strip())
                n += 1
            fn = f"snippet_{len(functions) + 1}"
            context = "\n".join(f"  {c}" for c in d["context"])
            functions.append(f'// {where}\n[[maybe_unused]] void {fn}() {{\n{context}\n#line {line + n + 1} "{path}"\n'
                             + "\n".join(body[n:]) + "\n}\n")
            if d["run"]:
                runs.append((fn, where))
    unique_heads = list(dict.fromkeys(["#include <loom/loom.h>", "#include <cstdio>", "#include <iostream>",
                                       "using namespace loom;"] + heads))
    includes = [h for h in unique_heads if h.startswith("#")]
    others = [h for h in unique_heads if not h.startswith("#")]
    calls = "\n".join(f'  run("{where}", {fn});' for fn, where in runs)
    src = "\n".join(includes) + "\n#include <cstdlib>\n#include <exception>\n#include <filesystem>\n#include <string>\n\n" + "\n".join(others) + "\n\n"
    src += "\n".join(functions)
    src += f"""
// Runs each block marked `run` in a fresh folder, so files it writes do not meet another's.
static void run(const char* where, void (*fn)()) {{
  const auto dir = std::filesystem::temp_directory_path() / ("loom_snippet_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto back = std::filesystem::current_path();
  std::filesystem::current_path(dir);
  std::printf("running %s\\n", where);
  std::fflush(stdout);
  try {{
    fn();
  }} catch (const std::exception& e) {{
    std::fprintf(stderr, "%s threw: %s\\n", where, e.what());
    std::exit(1);
  }}
  std::filesystem::current_path(back);
  std::filesystem::remove_all(dir);
}}

int main() {{
{calls}
  std::printf("%d blocks compiled, {len(runs)} run\\n", {len(functions)});
  return 0;
}}
"""
    src = src.replace("#include <filesystem>", "#include <filesystem>\n#include <unistd.h>", 1)
    (out / "snippets.cpp").write_text(src, encoding="utf-8")
    print(f"{len(functions)} blocks into snippets.cpp ({len(runs)} to run), {programs} whole programs")


if __name__ == "__main__":
    main()
