#!/usr/bin/env python3
"""The documents against the tree they describe.

- Every relative Markdown link in README.md and docs/ (and the READMEs of the components)
  names a file or folder that exists.
- README.md's table of what exists: no row says a part is planned, being built or not
  built while the tree has it; every repository path a row names in backticks exists.
- No design document calls itself "being built" while the README calls its part done or
  working (a status line that stayed behind).
- Every source file is named in its folder's README (the nearest README.md up the tree).
- Every driver (a top-level `*lnd/` folder, a folder of `liblnet/src/lnd/`) is in the
  architecture map, docs/design/overview.md.

  docs_test.py SOURCE_DIR
"""
import pathlib
import re
import subprocess
import sys

root = pathlib.Path(sys.argv[1]).resolve()
failures = []


def fail(where, what):
    failures.append(f"{where}: {what}")


def markdown_files():
    yield root / "README.md"
    yield from sorted((root / "docs").rglob("*.md"))
    for d in sorted(root.iterdir()):
        if d.is_dir() and not d.name.startswith(".") and d.name != "build":
            yield from sorted(p for p in d.rglob("README.md") if "build" not in p.relative_to(root).parts[:1])


LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
for md in markdown_files():
    text = md.read_text()
    for n, line in enumerate(text.splitlines(), 1):
        for target in LINK.findall(line):
            if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                continue  # a URL or an anchor in the same page
            path = target.split("#", 1)[0]
            if not (md.parent / path).exists():
                fail(f"{md.relative_to(root)}:{n}", f"link to {target}: no such file")

readme = (root / "README.md").read_text().splitlines()
rows = []
in_table = False
for n, line in enumerate(readme, 1):
    if line.startswith("| part | state |"):
        in_table = True
        continue
    if in_table:
        if not line.startswith("|"):
            break
        if line.startswith("|---"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if len(cells) != 2:
            fail(f"README.md:{n}", "a table row without exactly two cells (part | state)")
            continue
        rows.append((n, cells[0], cells[1]))
if not rows:
    fail("README.md", "no '| part | state |' table")

PATH = re.compile(r"`((?:docs|tests|scripts|bench|examples|liblnet|mpilnd|uplnd|proxy|selftest|lnetd)/[^`\s]*)`")
for n, part, state in rows:
    for word in ("planned", "being built", "not built", "to do"):
        if re.search(rf"\b{word}\b", state, re.I):
            fail(f"README.md:{n}", f"the state of a listed part says '{word}' (list what exists; say what is missing after it)")
    for p in PATH.findall(part + " " + state):
        if not (root / p).exists():
            fail(f"README.md:{n}", f"names {p}, which does not exist")

# Every source file is named in the README of the folder it belongs to (the nearest one
# up that has a README.md): by its name, its stem, or a folder of it below the README's
# ("xfer/"). A file added without a word where a newcomer looks fails here.
SOURCE = (".cpp", ".hpp", ".h", ".c", ".sh", ".py")
tracked = subprocess.run(["git", "-C", str(root), "ls-files"], capture_output=True, text=True).stdout.split()
readme_dirs = {pathlib.PurePosixPath(f).parent for f in tracked if pathlib.PurePosixPath(f).name == "README.md"}
for f in tracked:
    p = pathlib.PurePosixPath(f)
    if p.suffix not in SOURCE:
        continue
    owner = next((d for d in p.parents if d in readme_dirs), None)
    if owner is None or owner == pathlib.PurePosixPath("."):
        continue  # the top level and folders without a README of their own
    text = (root / owner / "README.md").read_text()
    rel = p.relative_to(owner)
    names = [p.name, p.stem + ".", p.stem + "`", p.stem + ","] + [f"{d}/" for d in rel.parents if str(d) != "."]
    if not any(n in text for n in names):
        fail(f"{owner}/README.md", f"does not name {rel} (a row for it, or for its folder)")

# Every driver is on the map: a newcomer reads overview.md first.
overview = (root / "docs" / "design" / "overview.md").read_text()
drivers = sorted({pathlib.PurePosixPath(f).parts[0] + "/" for f in tracked if pathlib.PurePosixPath(f).parts[0].endswith("lnd")})
drivers += sorted({"src/lnd/" + pathlib.PurePosixPath(f).parts[3] for f in tracked
                   if f.startswith("liblnet/src/lnd/") and len(pathlib.PurePosixPath(f).parts) > 4})
for d in drivers:
    if d not in overview:
        fail("docs/design/overview.md", f"does not name the driver {d} (the map and the drivers' table)")

for md in sorted((root / "docs" / "design").glob("*.md")):
    head = "\n".join(md.read_text().splitlines()[:6])
    if re.search(r"Status:\s*\*\*being built\*\*", head):
        name = md.stem
        for n, part, state in rows:
            if f"docs/design/{name}.md" in part and re.match(r"(done|works)", state):
                fail(f"{md.relative_to(root)}", f"says 'being built' while README.md:{n} says '{state.split(';')[0]}'")

for f in failures:
    print("docs_test:", f)
print(f"docs_test: {len(rows)} README rows, {'FAIL' if failures else 'OK'}")
sys.exit(1 if failures else 0)
