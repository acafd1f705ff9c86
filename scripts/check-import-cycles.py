#!/usr/bin/env python3
"""No import cycles between the files of a crate: each file may use
`crate::` paths only of files that do not lead back to it (a module and
its own submodules excepted). Paths in comments count too, so a doc
comment naming a module is written without `crate::`.

Usage: scripts/check-import-cycles.py   (from anywhere in the repository)
"""

import glob
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def module_of(path: str) -> str:
    name = path[: -len(".rs")]
    return name[: -len("/mod")] if name.endswith("/mod") else name


def segments(path: str) -> list[str]:
    return re.findall(r"[a-z_][a-z_0-9]*", path.split(" as ")[0])


def expand(group: str) -> list[list[str]]:
    """The paths of a use-tree group's contents (`a::X, b::{Y, c::Z}`)."""
    items, depth, start = [], 0, 0
    for i, c in enumerate(group):
        depth += (c == "{") - (c == "}")
        if c == "," and depth == 0:
            items.append(group[start:i])
            start = i + 1
    items.append(group[start:])
    paths = []
    for item in items:
        if "{" in item:
            head, _, rest = item.partition("{")
            paths += [segments(head) + sub for sub in expand(rest[: rest.rfind("}")])]
        elif segments(item):
            paths.append(segments(item))
    return paths


def paths_in(text: str) -> list[tuple[str, list[str]]]:
    """Every `crate::a::b` and `super::a` path in `text`, grouped imports
    (`use crate::{a::X, b::{Y, Z}}`) expanded: (root, segments)."""
    found = []
    for m in re.finditer(r"\b(crate|super(?:::super)*)::", text):
        root, rest = m.group(1), text[m.end():]
        if rest.startswith("{"):
            depth = 0
            for end, c in enumerate(rest):
                depth += (c == "{") - (c == "}")
                if depth == 0:
                    break
            found += [(root, path) for path in expand(rest[1:end])]
        else:
            found.append((root, segments(re.match(r"[a-z_0-9:]*", rest).group(0).replace("::", " "))))
    return found


def cycles(src: str) -> list[list[str]]:
    files = [os.path.relpath(f, src) for f in glob.glob(os.path.join(src, "**", "*.rs"), recursive=True)]
    modules = {module_of(f.replace(os.sep, "/")): f for f in files}
    edges: dict[str, set[str]] = {m: set() for m in modules}
    for module, file in modules.items():
        text = open(os.path.join(src, file), encoding="utf-8").read()
        # `super` is the parent of the module a file is (a `mod.rs` is its
        # directory's module).
        for root, parts in paths_in(text):
            base = [] if root == "crate" else module.split("/")[: -root.count("super")]
            parts = base + parts
            for i in range(len(parts), 0, -1):
                target = "/".join(parts[:i])
                if target in modules:
                    if target != module and not target.startswith(module + "/"):
                        edges[module].add(target)
                    break
    # Tarjan's strongly connected components.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def main() -> int:
    bad = 0
    crates = sorted(glob.glob(os.path.join(ROOT, "crates", "*", "src"))) + [os.path.join(ROOT, "src")]
    for src in crates:
        for component in cycles(src):
            bad = 1
            print(f"{os.path.relpath(src, ROOT)}: import cycle between {', '.join(component)}")
    if not bad:
        print(f"check-import-cycles: no cycles between the files of {len(crates)} crates")
    return bad


if __name__ == "__main__":
    sys.exit(main())
