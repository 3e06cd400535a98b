#!/usr/bin/env python3
"""Checks the relative links of README.md and docs/*.md (docs/testing.md, "Docs that compile"):
every linked file exists, and every #fragment names a heading of the linked Markdown file, with
the anchors GitHub derives (lowercase, punctuation dropped, spaces to hyphens, -1, -2, ... for
repeats). Links into code blocks and to other sites are not checked.

Usage: check_links.py SOURCE_DIR   (exit 1 and one line per broken link when there are any)
"""
import pathlib
import re
import sys

HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def prose_lines(path):
    """(line number, line) outside fenced code blocks."""
    fenced = False
    for number, line in enumerate(path.read_text(encoding="utf-8").split("\n"), 1):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            yield number, line


def anchors(path):
    found, seen = set(), {}
    for _, line in prose_lines(path):
        m = HEADING.match(line)
        if not m:
            continue
        slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower().replace("`", "").replace("*", ""))
        slug = slug.replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        found.add(slug if n == 0 else f"{slug}-{n}")
    return found


def main():
    root = pathlib.Path(sys.argv[1])
    pages = [root / "README.md", *sorted((root / "docs").glob("**/*.md"))]
    cache, broken, checked = {}, [], 0
    for page in pages:
        for number, line in prose_lines(page):
            for m in LINK.finditer(line):
                target = m.group(1)
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                    continue  # https:, mailto:, ...
                path, _, fragment = target.partition("#")
                dest = (page.parent / path).resolve() if path else page.resolve()
                checked += 1
                if not dest.exists():
                    broken.append(f"{page.relative_to(root)}:{number}: {target}: no such file")
                elif fragment and dest.suffix == ".md":
                    if dest not in cache:
                        cache[dest] = anchors(dest)
                    if fragment not in cache[dest]:
                        broken.append(f"{page.relative_to(root)}:{number}: {target}: no heading with that anchor")
    print("\n".join(broken) if broken else f"{checked} relative links in {len(pages)} pages: all resolve")
    sys.exit(1 if broken else 0)


if __name__ == "__main__":
    main()
