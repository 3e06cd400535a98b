#!/usr/bin/env python3
"""Lists the C++ functions over 80 lines and files over 600 lines (issue 50: drivers over named
phases; no function over ~80 lines, no file over ~600) of the library, the Python module's
bindings and the command-line tool.

  scripts/long_functions.py [ROOT] [--function-lines N] [--file-lines N] [--check]
  scripts/long_functions.py --self-test   check the heuristic on its traps (ctest long_functions_self_test)
  scripts/long_functions.py --plant [ROOT]  check that --check fails on a function and a file
                                            planted over the limits in a copy of ROOT's checked
                                            folders (ctest long_functions_catches_planted)

ROOT defaults to the repository this script is in; the folders checked (PARTS) are ROOT/src and
ROOT/include (the library), ROOT/python/src (the Python module's bindings) and ROOT/tools (the
command-line tool); a folder ROOT lacks is skipped.
Prints one line per finding, longest first, and exits 0 (a report). With --check (ctest
long_functions) it exits 1 when there is any finding, each named on stderr: the size rule as a
test.

How a function is found, and what that misses (a heuristic, not a C++ parser):
- Comments, string and character literals (raw strings R"d(...)d" included, digit separators
  1'000 not mistaken for a character) and preprocessor lines are blanked first, so a brace in
  them counts for nothing. A macro that expands to braces is not seen.
- Namespaces, extern "C" blocks and class/struct/union/enum bodies are looked through; any
  other block at their level is a function if the text since the previous `;`, `{` or `}` ends
  in a parameter list (`)` then qualifiers such as const, noexcept, override, or a trailing
  return type), or in a constructor's member-initializer list (`) : a_(x), b_{y}`, whose
  braces are read as initializers). Lambdas and local classes inside a function count as part
  of it, as the issue counts them.
- Any other top-level block (a table's initializer, a namespace-scope lambda's enclosing
  braces) is reported as "block" when over the limit: a long table is the same problem.
- A function's length runs from the line its declaration starts on to its closing brace, blank
  and comment lines included. A function-try-block (`f() try {`) is read as a block.
"""
import os
import re
import shutil
import sys
import tempfile

FUNCTION_LINES = 80
FILE_LINES = 600
EXTENSIONS = (".cpp", ".h", ".hpp", ".cc", ".inl")
# The folders held to the rule: the library, the Python module's bindings and the command-line
# tool (tests/, bench/ and examples/ are not checked).
PARTS = ("src", "include", "python/src", "tools")


def blank(text):
    """Return text with comments, literals and preprocessor lines replaced by spaces (newlines
    kept, so line numbers stay)."""
    out = []
    i, n = 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if line_start and c == "#":
            # a preprocessor line, with its backslash continuations
            j = i
            while j < n and text[j] != "\n":
                j += 2 if text[j] == "\\" and j + 1 < n else 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
            continue
        if c == "\n":
            line_start = True
            out.append(c)
            i += 1
            continue
        if not c.isspace():
            line_start = False
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
            continue
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
            continue
        m = re.match(r'(?:u8|[uUL])?R"([^()\\\s]{0,16})\(', text[i:i + 24])
        if m and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            close = ")" + m.group(1) + '"'
            j = text.find(close, i + m.end())
            j = n if j < 0 else j + len(close)
            out.append('""' + re.sub(r"[^\n]", " ", text[i + 2:j]))
            i = j
            continue
        if c == "'":
            # a digit separator (1'000'000) when the token it sits in starts with a digit
            k = i
            while k > 0 and (text[k - 1].isalnum() or text[k - 1] in "_'"):
                k -= 1
            if k < i and text[k].isdigit():
                out.append(c)
                i += 1
                continue
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + re.sub(r"[^\n]", " ", text[i + 1:j - 1]) + (c if j - 1 > i else ""))
            i = j
            continue
        out.append(c)
        i += 1
    return "".join(out)


_SIGNATURE_END = re.compile(
    r"\)\s*(?:(?:const|volatile|noexcept(?:\s*\([^()]*\))?|override|final|mutable|&&|&|"
    r"\[\[[^\]]*\]\]|requires\b[^{]*)\s*)*(?:->[^;{}]*)?$")
_INIT_LIST = re.compile(r"\)\s*(?:noexcept\s*)?:(?!:)")
_SCOPE = re.compile(r'^(?:template\s*<.*>\s*)?(?:inline\s+)?(?:namespace\b|extern\s*"[^"]*"|'
                    r"(?:class|struct|union|enum)\b)", re.S)
_ACCESS = re.compile(r"\b(?:public|private|protected)\s*:(?!:)")


def function_name(header):
    """The name a function's header declares: the identifier (with its qualifiers) before the
    parameter list's opening parenthesis."""
    depth = 0
    init = _INIT_LIST.search(header)
    end = init.start() if init else header.rfind(")")
    for k in range(end, -1, -1):
        if header[k] == ")":
            depth += 1
        elif header[k] == "(":
            depth -= 1
            if depth == 0:
                before = header[:k].rstrip()
                m = re.search(r"((?:[\w~]+\s*(?:<[^<>;]*>)?\s*::\s*)*(?:operator\s*(?:\(\)|[^\w\s(]+|\s\w+)|~?\w+|\[[^\]]*\]))\s*$", before)
                return re.sub(r"\s+", "", m.group(1)) if m else before[-40:].strip()
    return header.strip()[-40:]


def top_blocks(code):
    """Yield (kind, name, first line, last line) for each block at namespace or class level."""
    stack = []  # per open brace: "scope", "init" (a member initializer), or (kind, name, line)
    header_start = 0
    i, n = 0, len(code)
    line_of = []
    line = 1
    for ch in code:
        line_of.append(line)
        if ch == "\n":
            line += 1
    in_scope = lambda: all(s in ("scope", "init") for s in stack)
    while i < n:
        c = code[i]
        if c == ";" and in_scope():
            header_start = i + 1
        elif c == "{":
            if in_scope():
                header = _ACCESS.sub(lambda m: " " * len(m.group(0)), code[header_start:i])
                stripped = header.strip()
                if _INIT_LIST.search(header) and re.search(r"[\w>]\s*$", stripped):
                    stack.append("init")
                elif _SCOPE.match(stripped):
                    stack.append("scope")
                    header_start = i + 1
                else:
                    kind = "function" if _SIGNATURE_END.search(stripped) or _INIT_LIST.search(header) else "block"
                    first = header_start + (len(header) - len(header.lstrip()))
                    name = function_name(stripped) if kind == "function" else re.sub(r"\s+", " ", stripped)[-50:]
                    stack.append((kind, name, line_of[min(first, n - 1)]))
            else:
                stack.append("inner")
        elif c == "}":
            top = stack.pop() if stack else "scope"
            if isinstance(top, tuple):
                if in_scope():
                    yield top[0], top[1], top[2], line_of[i]
                    header_start = i + 1
            elif top == "scope":
                header_start = i + 1
        i += 1


def scan(root, function_lines=FUNCTION_LINES, file_lines=FILE_LINES):
    findings = []
    for part in PARTS:
        for dirpath, _, files in os.walk(os.path.join(root, part)):
            for f in sorted(files):
                if not f.endswith(EXTENSIONS):
                    continue
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, root)
                with open(path, encoding="utf-8", errors="replace") as fh:
                    text = fh.read()
                lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
                if lines > file_lines:
                    findings.append((lines, f"{rel}: file, {lines} lines"))
                for kind, name, first, last in top_blocks(blank(text)):
                    length = last - first + 1
                    if length > function_lines:
                        findings.append((length, f"{rel}:{first}: {kind} {name}, {length} lines"))
    findings.sort(key=lambda x: (-x[0], x[1]))
    return [f for _, f in findings]


# The heuristic's cases, each a trap a plain brace count falls into (--self-test).
SELF_TEST = r'''
namespace a {
extern "C" {
int f(int x) { return x; }
}
struct S : B {
 public:
  S(int a) : a_{a}, b_(2) {
    auto l = [](int) { return 1'000; };
  }
  int operator()(int) const noexcept { return '}'; }
  auto g() -> std::vector<int> { const char* s = R"x( } { )x"; }
  // }
  int a_;
};
template <class T>
T h(T t) requires true {
#define X {
  return t;
}
const int table[] = {1, 2, 3};
}
'''
SELF_TEST_WANT = [("function", "f", 4, 4), ("function", "S", 8, 10), ("function", "operator()", 11, 11),
                  ("function", "g", 12, 12), ("function", "h", 16, 20), ("block", "const int table[] =", 21, 21)]


def self_test():
    got = list(top_blocks(blank(SELF_TEST)))
    if got != SELF_TEST_WANT:
        print(f"long_functions self-test: got {got}, want {SELF_TEST_WANT}", file=sys.stderr)
        return 1
    return 0


def check_findings(findings, function_lines=FUNCTION_LINES, file_lines=FILE_LINES):
    """The size rule as a test: 1, naming each finding on stderr, when there is any."""
    if not findings:
        return 0
    print(f"long_functions: {len(findings)} over the size rule (no function over {function_lines} lines, "
          f"no file over {file_lines}; docs/architecture.md#sizes): split each into named steps",
          file=sys.stderr)
    for line in findings:
        print(f"  {line}", file=sys.stderr)
    return 1


def planted_function(name, body_lines):
    return f"int {name}(int x) {{\n" + "".join(f"  x += {k};\n" for k in range(body_lines)) + "  return x;\n}\n"


def plant_test(root):
    """Copies ROOT's checked folders to a temporary folder, plants a function one line over the
    limit (in a new source file of each folder but include/, and at the end of an existing
    header) and a file one line over, and expects --check to fail naming each planted one
    (beside whatever the tree itself has)."""
    with tempfile.TemporaryDirectory(prefix="long_functions_plant_") as tmp:
        for part in PARTS:
            if os.path.isdir(os.path.join(root, part)):
                shutil.copytree(os.path.join(root, part), os.path.join(tmp, part))
        want = set()
        # the function: its signature line, FUNCTION_LINES - 2 statements, return, brace: limit + 1
        for part in PARTS:
            if part == "include":
                continue
            name = "planted_long_" + re.sub(r"\W", "_", part)
            os.makedirs(os.path.join(tmp, part, "planted"), exist_ok=True)
            with open(os.path.join(tmp, part, "planted", "long_function.cpp"), "w") as f:
                f.write(planted_function(name, FUNCTION_LINES - 2))
            want.add(f"{part}/planted/long_function.cpp:1: function {name}, {FUNCTION_LINES + 1} lines")
        headers = sorted(os.path.join(d, n) for d, _, ns in os.walk(os.path.join(tmp, "include")) for n in ns
                         if n.endswith(".h"))
        with open(headers[0], encoding="utf-8") as f:
            header_text = f.read()
        header_lines = header_text.count("\n")
        with open(headers[0], "a", encoding="utf-8") as f:
            f.write(planted_function("planted_in_header", FUNCTION_LINES - 2))
        header_rel = os.path.relpath(headers[0], tmp)
        # the file: FILE_LINES + 1 short functions of one line each, none long
        with open(os.path.join(tmp, "src", "planted", "long_file.cpp"), "w") as f:
            f.write("".join(f"int planted_{k}() {{ return {k}; }}\n" for k in range(FILE_LINES + 1)))
        want |= {f"{header_rel}:{header_lines + 1}: function planted_in_header, {FUNCTION_LINES + 1} lines",
                 f"src/planted/long_file.cpp: file, {FILE_LINES + 1} lines"}
        findings = scan(tmp)
        status = check_findings(findings)
    if not want <= set(findings) or status != 1:
        print(f"long_functions --plant: --check exited {status} and missed {sorted(want - set(findings))}, want exit 1 "
              f"naming {sorted(want)}", file=sys.stderr)
        return 1
    print(f"long_functions --plant: --check failed as it should, naming {len(want)} planted findings")
    return 0


def main(argv):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    function_lines, file_lines = FUNCTION_LINES, FILE_LINES
    check = plant = False
    args = list(argv)
    while args:
        a = args.pop(0)
        if a == "--function-lines":
            function_lines = int(args.pop(0))
        elif a == "--file-lines":
            file_lines = int(args.pop(0))
        elif a == "--self-test":
            return self_test()
        elif a == "--check":
            check = True
        elif a == "--plant":
            plant = True
        elif a.startswith("-"):
            print(__doc__.split("\n\n")[1], file=sys.stderr)
            return 2
        else:
            root = a
    if plant:
        return plant_test(root)
    findings = scan(root, function_lines, file_lines)
    if check:
        return check_findings(findings, function_lines, file_lines)
    for line in findings:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
