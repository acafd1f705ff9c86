#!/usr/bin/env python3
"""The public API of logbook's library crates, one item per line, checked
in under `public-api/` so that an API change shows in review: CI fails when
the listing it generates differs from the checked-in one.

Each line is a path and its kind: modules' public items, re-exports,
named public struct fields, enum variants and inherent methods (names
only: not signatures, trait impls, tuple fields or glob re-exports). Built from rustdoc's JSON output, which is unstable in
rustdoc: `RUSTC_BOOTSTRAP=1` enables it on the stable toolchain, and the
format version this script reads is checked.

Usage: scripts/public-api.py [--write]   (from anywhere in the repository)
  without --write: compare with public-api/*.txt, print the difference
"""

import difflib
import json
import os
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
CRATES = ["logbook-core", "logbook-datafusion", "logbook-flight", "logbook-ui", "logbook-cluster"]
# The rustdoc JSON format this script reads (rustdoc's `format_version`).
FORMAT = 57


def kind_of(item: dict) -> str:
    inner = item["inner"]
    return next(iter(inner)) if isinstance(inner, dict) else str(inner)


def listing(doc: dict) -> list[str]:
    index = doc["index"]
    lines: set[str] = set()

    def item(i):
        return index.get(str(i))

    def members(path: str, it: dict) -> None:
        kind = kind_of(it)
        body = it["inner"][kind]
        if kind == "struct":
            fields = body.get("kind", {})
            plain = fields.get("plain", {}) if isinstance(fields, dict) else {}
            for f in plain.get("fields", []):
                field = item(f)
                if field and field.get("visibility") == "public":
                    lines.add(f"{path}.{field['name']} (field)")
        if kind == "enum":
            for v in body.get("variants", []):
                variant = item(v)
                if variant:
                    lines.add(f"{path}::{variant['name']} (variant)")
        for i in body.get("impls", []):
            imp = item(i)
            if not imp or imp["inner"]["impl"].get("trait") is not None:
                continue
            for m in imp["inner"]["impl"]["items"]:
                method = item(m)
                if method and method.get("visibility") == "public":
                    lines.add(f"{path}::{method['name']} ({kind_of(method)})")

    def walk(i, prefix: list[str], seen: set) -> None:
        it = item(i)
        if it is None or str(i) in seen:
            return
        seen = seen | {str(i)}
        kind = kind_of(it)
        path = prefix + ([it["name"]] if it.get("name") else [])
        if kind == "module":
            lines.add(f"{'::'.join(path)} (module)")
            for c in it["inner"]["module"]["items"]:
                child = item(c)
                if child is not None and child.get("visibility") == "public":
                    walk(c, path, seen)
            return
        if kind == "use":
            use = it["inner"]["use"]
            target = item(use["id"]) if use.get("id") is not None else None
            if use.get("is_glob"):
                return
            name = "::".join(prefix + [use["name"]])
            if target is None:
                lines.add(f"{name} (re-export of {use['source']})")
                return
            lines.add(f"{name} ({kind_of(target)}, re-export)")
            if kind_of(target) in ("struct", "enum"):
                members(name, target)
            return
        lines.add(f"{'::'.join(path)} ({kind})")
        if kind in ("struct", "enum"):
            members("::".join(path), it)

    walk(doc["root"], [], set())
    return sorted(lines)


def generate(crate: str) -> list[str]:
    # A target directory of its own: with RUSTC_BOOTSTRAP set, cargo
    # rebuilds what it builds, and sharing the main one would make the next
    # plain build check DataFusion again.
    target = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "public-api")
    env = dict(os.environ, RUSTC_BOOTSTRAP="1", CARGO_TARGET_DIR=target)
    subprocess.run(
        ["cargo", "rustdoc", "-q", "-p", crate, "--lib", "--locked", "--",
         "-Z", "unstable-options", "--output-format", "json"],
        cwd=ROOT, env=env, check=True,
    )
    with open(os.path.join(target, "doc", crate.replace("-", "_") + ".json"), encoding="utf-8") as f:
        doc = json.load(f)
    if doc.get("format_version") != FORMAT:
        sys.exit(
            f"public-api: rustdoc wrote JSON format {doc.get('format_version')}, this script reads "
            f"{FORMAT}: check what changed in rustdoc's format, update FORMAT and the script"
        )
    return [f"{line}\n" for line in listing(doc)]


def main() -> int:
    write = "--write" in sys.argv[1:]
    changed = 0
    for crate in CRATES:
        lines = generate(crate)
        path = os.path.join(ROOT, "public-api", f"{crate}.txt")
        if write:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.writelines(lines)
            print(f"public-api: wrote {os.path.relpath(path, ROOT)} ({len(lines)} items)")
            continue
        try:
            with open(path, encoding="utf-8") as f:
                old = f.readlines()
        except FileNotFoundError:
            old = []
        if old != lines:
            changed = 1
            sys.stdout.writelines(difflib.unified_diff(old, lines, path, "generated"))
    if changed:
        print("public-api: the public API changed; if on purpose, run scripts/public-api.py --write and commit public-api/")
    elif not write:
        print(f"public-api: {', '.join(CRATES)} as listed in public-api/")
    return changed


if __name__ == "__main__":
    sys.exit(main())
