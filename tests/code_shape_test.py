#!/usr/bin/env python3
"""The shape the code keeps (issue 34's targets), checked so that it stays.

- No source file outside tests/ is longer than 600 lines.
- No function outside tests/ is longer than 60 lines, tables excepted (TABLES below:
  a function that is one list of entries).

The files are the tree's: what `git ls-files` lists (or, outside a git checkout, every
file under the root but build directories), so a new folder is checked the day it comes.

Functions are found by their braces after comments and string literals are blanked: a
`{` that follows a parameter list (not `if`, `for`, `while`, `switch`, `catch`) opens a
function or a lambda; a lambda inside a function counts as part of it.

  code_shape_test.py SOURCE_DIR
"""
import pathlib
import re
import subprocess
import sys

MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 60
# Functions that are tables (name as reported, file relative to the root).
TABLES = {
    ("liblnet/src/dlc/command_table.cpp", "table"),
    ("selftest/src/lst_table.cpp", "table"),
}
EXCLUDED_TOP = {"tests", "build"}
SUFFIXES = {".c", ".h", ".cpp", ".hpp"}
NOT_FUNCTIONS = {"if", "for", "while", "switch", "catch", "return", "sizeof", "decltype", "alignof",
                 "static_assert", "defined"}
QUALIFIERS = re.compile(
    r"\)\s*(const\s*)?(noexcept\s*)?(override\s*)?(final\s*)?(mutable\s*)?(->\s*[\w:<>,\s\*&]+)?\s*"
    r"(LNET_[A-Z_]+(\([^()]*\))?\s*)*$")


def blank(src):
    """The source with comments and string/char literals emptied (newlines kept)."""
    out, i, n = [], 0, len(src)
    while i < n:
        if src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
            continue
        if src.startswith("/*", i):
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
            continue
        raw = re.match(r'R"([^(\s]*)\(', src[i:i + 40])
        if raw and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")):
            end = ")" + raw.group(1) + '"'
            j = src.find(end, i)
            j = n if j < 0 else j + len(end)
            out.append('""' + re.sub(r"[^\n]", "", src[i:j]))
            i = j
            continue
        c = src[i]
        if c in "\"'" and not (c == "'" and i > 0 and src[i - 1].isalnum()):  # 1'000 is a digit separator
            j = i + 1
            while j < n and src[j] != c and src[j] != "\n":
                j += 2 if src[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def functions(text):
    """(first line, lines, name) of every function or lambda body, outermost first."""
    s = blank(text)
    found = []
    for m in re.finditer(r"\{", s):
        i = m.start()
        q = QUALIFIERS.search(s[max(0, i - 300):i])
        if not q:
            continue
        close = i - (min(i, 300) - q.start())
        depth, j = 0, close
        while j >= 0:
            if s[j] == ")":
                depth += 1
            elif s[j] == "(":
                depth -= 1
                if depth == 0:
                    break
            j -= 1
        name = re.search(r"([\w~:]+)\s*$", s[:max(j, 0)])
        name = name.group(1) if name else ""
        if not name or name in NOT_FUNCTIONS:
            continue
        depth, e = 0, i
        while e < len(s):
            if s[e] == "{":
                depth += 1
            elif s[e] == "}":
                depth -= 1
                if depth == 0:
                    break
            e += 1
        first, last = s.count("\n", 0, i) + 1, s.count("\n", 0, e) + 1
        found.append((first, last - first + 1, name))
    outer = []
    for f in sorted(found):
        if outer and outer[-1][0] <= f[0] < outer[-1][0] + outer[-1][1]:
            continue  # a lambda or local class inside a function
        outer.append(f)
    return outer


def source_files(root):
    """The tree's C and C++ files outside tests/, relative to the root."""
    try:
        out = subprocess.run(["git", "-C", str(root), "ls-files"], capture_output=True, text=True, check=True).stdout
        paths = [pathlib.PurePosixPath(p) for p in out.splitlines()]
    except (OSError, subprocess.CalledProcessError):
        paths = [pathlib.PurePosixPath(p.relative_to(root).as_posix()) for p in root.rglob("*") if p.is_file()]
    return sorted(p for p in paths
                  if p.suffix in SUFFIXES and p.parts[0] not in EXCLUDED_TOP and "build" not in p.parts)


def main():
    root = pathlib.Path(sys.argv[1]).resolve()
    failures = []
    for rel_path in source_files(root):
        rel = rel_path.as_posix()
        path = root / rel
        if not path.exists():
            continue  # deleted, not yet committed
        text = path.read_text(errors="replace")
        nlines = text.count("\n")
        if nlines > MAX_FILE_LINES:
            failures.append(f"{rel}: {nlines} lines (at most {MAX_FILE_LINES}): split it along a seam")
        for first, length, name in functions(text):
            if length > MAX_FUNCTION_LINES and (rel, name) not in TABLES:
                failures.append(f"{rel}:{first}: {name} is {length} lines (at most {MAX_FUNCTION_LINES})")
    for f in failures:
        print(f"code shape: {f}")
    if failures:
        return 1
    print("code shape: no file over %d lines, no function over %d lines (tables excepted)" %
          (MAX_FILE_LINES, MAX_FUNCTION_LINES))
    return 0


if __name__ == "__main__":
    sys.exit(main())
