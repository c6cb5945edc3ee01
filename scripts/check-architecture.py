#!/usr/bin/env python3
"""Checks the library's import picture: which module files use which others.

Reads every `app/**/*.rs`, resolves the paths it names (`crate::…`, `super::…`, `self::…`
and child modules, through `pub use` re-exports) to the file that defines them, and checks:

- no module under app/web/ or app/sharding/ uses a feature module;
- no import cycle among the files of app/moves/, of app/sharding/, or between app/web/
  and the features (nor among the top-level modules at all).

`--graph` prints every file's dependencies. Exit status 1 when a rule is broken.
Anyone can run it: `python3 scripts/check-architecture.py`.
"""
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "app"
FEATURES = {"bookmarks", "admin", "fairness", "jobs", "search", "moves", "auth"}
INFRA = {"web", "sharding"}


def module_of(path: Path):
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] in ("mod", "lib"):
        parts = parts[:-1]
    return tuple(parts)


def strip(text: str) -> str:
    """Source without comments, string or char literals, or `#[cfg(test)]` modules."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            i = text.find("\n", i)
            i = n if i < 0 else i
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif c == "r" and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")) \
                and re.match(r'r#*"', text[i:i + 8] + " "):
            hashes = re.match(r"r(#*)\"", text[i:]).group(1)
            end = text.find('"' + hashes, i + 2 + len(hashes))
            out.append('""')
            i = n if end < 0 else end + 1 + len(hashes)
        elif c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            out.append('""')
            i += 1
        elif c == "'" and re.match(r"'(\\.[^']*|[^\\'])'", text[i:i + 12]):
            m = re.match(r"'(\\.[^']*|[^\\'])'", text[i:i + 12])
            out.append("' '")
            i += m.end()
        else:
            out.append(c)
            i += 1
    text = "".join(out)
    # Test modules may use anything; they are not part of the import picture.
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]\s*mod\s+\w+\s*\{", text):
        if m.start() < i:
            continue
        out.append(text[i:m.start()])
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        i = j
    out.append(text[i:])
    return "".join(out)


def expand_use(tree: str):
    """`a::{b, c::{d, e}}` -> ['a::b', 'a::c::d', 'a::c::e']."""
    tree = re.sub(r"\s+", "", tree)
    depth, start, items = 0, 0, []
    m = re.match(r"^(.*?)::\{(.*)\}$", tree, re.S)
    if not m:
        return [re.sub(r"as\w+$", "", tree)]
    prefix, inner = m.group(1), m.group(2)
    for i, ch in enumerate(inner):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(inner[start:i])
            start = i + 1
    items.append(inner[start:])
    result = []
    for item in filter(None, items):
        for sub in expand_use(item):
            result.append(prefix if sub == "self" else f"{prefix}::{sub}")
    return result


files = {module_of(p): p for p in ROOT.rglob("*.rs") if "templates" not in p.parts}
sources = {m: strip(p.read_text()) for m, p in files.items()}
children = {m: set(re.findall(r"\bmod\s+(\w+)\s*;", s)) for m, s in sources.items()}

# `pub use child::Name` re-exports: (module, name) -> full path it stands for.
reexports = {}
uses = {}
for mod, src in sources.items():
    paths = []
    for m in re.finditer(r"\buse\s+([^;]+);", src):
        is_pub = src[max(0, m.start() - 12):m.start()].rstrip().endswith(("pub", "pub(crate)"))
        for path in expand_use(m.group(1)):
            path = re.sub(r"as\w+$", "", path).replace(" ", "")
            paths.append(path)
            if is_pub:
                name = path.rsplit("::", 1)[-1]
                if name != "*":
                    reexports[(mod, name)] = path
    body = re.sub(r"\buse\s+[^;]+;", "", src)
    paths += re.findall(r"\b((?:crate|super|self)(?:::\w+)+)", body)
    for child in children.get(mod, ()):
        paths += re.findall(rf"(?<![\w:])({child}(?:::\w+)+)", body)
    uses[mod] = paths


def absolute(mod, path):
    parts = path.split("::")
    base = list(mod)
    if parts[0] == "crate":
        base, parts = [], parts[1:]
    elif parts[0] in ("super", "self"):
        # A file's own module is `mod`; `super` is its parent.
        while parts and parts[0] in ("super", "self"):
            if parts[0] == "super":
                base = base[:-1]
            parts = parts[1:]
    elif parts[0] in children.get(mod, ()):
        pass
    else:
        return None  # an external crate
    return base + parts


def resolve(parts, seen=0):
    """The file that defines what `parts` names, following re-exports."""
    for n in range(len(parts), -1, -1):
        mod = tuple(parts[:n])
        if mod in files:
            if n < len(parts) and (mod, parts[n]) in reexports and seen < 10:
                target = absolute(mod, reexports[(mod, parts[n])])
                if target and tuple(target) != tuple(parts):
                    return resolve(target + parts[n + 1:], seen + 1)
            return mod
    return None


graph = {m: set() for m in files}
for mod, paths in uses.items():
    for path in paths:
        parts = absolute(mod, path)
        if parts is None:
            continue
        target = resolve(parts)
        if target is not None and target != mod:
            graph[mod].add(target)


def name(m):
    return "::".join(m) or "crate"


def sccs(nodes, edges):
    """Tarjan's strongly connected components of size > 1."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in nodes:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


if "--graph" in sys.argv:
    for m in sorted(graph):
        print(f"{name(m)}: {', '.join(sorted(name(t) for t in graph[m]))}")

problems = []
for m, targets in sorted(graph.items()):
    if m and m[0] in INFRA:
        for t in sorted(targets):
            if t and t[0] in FEATURES:
                problems.append(f"{name(m)} (infrastructure) uses the feature module {name(t)}")

for folder in ("moves", "sharding"):
    nodes = {m for m in files if m[:1] == (folder,)}
    for comp in sccs(nodes, graph):
        problems.append(f"import cycle in app/{folder}/: " + " -> ".join(map(name, comp)))

# Top-level modules: a cycle between two of them (web and a feature, say) is a cycle.
top = {}
for m, targets in graph.items():
    for t in targets:
        if m[:1] != t[:1] and m and t:
            top.setdefault(m[:1], set()).add(t[:1])
for comp in sccs({m[:1] for m in files if m}, top):
    problems.append("import cycle between top-level modules: " + " <-> ".join(map(name, comp)))

for p in problems:
    print(p)
print(f"check-architecture: {len(files)} files, {sum(map(len, graph.values()))} imports, "
      f"{len(problems)} problem(s)")
sys.exit(1 if problems else 0)
