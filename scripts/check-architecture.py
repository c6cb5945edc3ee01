#!/usr/bin/env python3
"""Checks the import picture of the service (`app/`), the load generator (`loadgen/src/`) and
the harnesses (`xtask/src/`).

Reads every `.rs` file, resolves the paths it names (`crate::…`, `super::…`, `self::…` and
child modules, through `pub use` re-exports) to the file that defines them, and checks:

- layers, derived from the folders: a top-level module may use only modules of its own
  layer or of a lower one. The lower layers are named below; every other top-level folder
  of `app/` is a feature, so a new feature needs no entry here;
- no import cycle between the top-level modules of a crate;
- no import cycle among the files of any folder, at any depth (a folder's `mod.rs` counts
  as one of its files). A `pub use` re-export is not an edge: whoever uses the name depends
  on the file that defines it.

`--graph` prints every file's dependencies; `--crate NAME=DIR` (repeatable) checks those
source folders instead of the three above (the contract tests use it on small made-up
crates). Exit status 1 when a rule is broken.
Anyone can run it: `python3 scripts/check-architecture.py`.
"""
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CRATES = {
    "app": REPO / "app",
    "loadgen": REPO / "loadgen" / "src",
    "xtask": REPO / "xtask" / "src",
}
_given = [a.split("=", 1) for i, a in enumerate(sys.argv) if i and sys.argv[i - 1] == "--crate"]
if _given:
    CRATES = {name: Path(path) for name, path in _given}

# app/'s layers, lowest first. A module may use its own layer and those below it.
LAYERS = [
    {"telemetry", "pg"},                        # generic process and Postgres plumbing
    {"sharding"},                               # how a key finds its shard
    {"configuration", "tenancy", "migrate"},    # typed settings, who a request acts for
    {"web"},                                    # the HTTP layer
    None,                                       # features: every other top-level folder
    {"startup", "cli"},                         # what assembles and runs the rest
]


def layer_of(top):
    for rank, members in enumerate(LAYERS):
        if members is not None and top in members:
            return rank
    return LAYERS.index(None)


def module_of(root: Path, path: Path):
    rel = path.relative_to(root).with_suffix("")
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




def absolute(mod, path, children):
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


def import_graph(root: Path):
    """Every file of one crate (as a module path) and the files it uses."""
    files = {module_of(root, p): p for p in root.rglob("*.rs")
             if "templates" not in p.parts and p.name != "main.rs"}
    sources = {m: strip(p.read_text()) for m, p in files.items()}
    children = {m: set(re.findall(r"\bmod\s+(\w+)\s*;", s)) for m, s in sources.items()}

    # `pub use child::Name` re-exports: (module, name) -> full path it stands for.
    reexports, uses = {}, {}
    for mod, src in sources.items():
        paths = []
        for m in re.finditer(r"\buse\s+([^;]+);", src):
            is_pub = src[max(0, m.start() - 12):m.start()].rstrip().endswith(("pub", "pub(crate)"))
            for path in expand_use(m.group(1)):
                path = re.sub(r"as\w+$", "", path).replace(" ", "")
                if is_pub:
                    name = path.rsplit("::", 1)[-1]
                    if name != "*":
                        reexports[(mod, name)] = path
                        continue
                paths.append(path)
        body = re.sub(r"\buse\s+[^;]+;", "", src)
        paths += re.findall(r"\b((?:crate|super|self)(?:::\w+)+)", body)
        for child in children.get(mod, ()):
            paths += re.findall(rf"(?<![\w:])({child}(?:::\w+)+)", body)
        uses[mod] = paths

    def resolve(parts, seen=0):
        """The file that defines what `parts` names, following re-exports."""
        for n in range(len(parts), -1, -1):
            mod = tuple(parts[:n])
            if mod in files:
                if n < len(parts) and (mod, parts[n]) in reexports and seen < 10:
                    target = absolute(mod, reexports[(mod, parts[n])], children)
                    if target and tuple(target) != tuple(parts):
                        return resolve(target + parts[n + 1:], seen + 1)
                return mod
        return None

    graph = {m: set() for m in files}
    for mod, paths in uses.items():
        for path in paths:
            parts = absolute(mod, path, children)
            if parts is None:
                continue
            target = resolve(parts)
            if target is not None and target != mod:
                graph[mod].add(target)
    return files, graph


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


def folder_cycles(crate, files, graph):
    """Cycles among the files of each folder, each told once, at the deepest folder that
    holds all of it."""
    folders = {m[:-1] for m in files if m}
    found = []
    for folder in sorted(folders, key=len, reverse=True):
        nodes = {m for m in files if m[:len(folder)] == folder}
        for comp in sccs(nodes, graph):
            if not any(set(comp) <= set(seen) for seen in found):
                found.append(comp)
                where = "/".join((crate,) + folder) if folder else crate
                yield f"import cycle in {where}/: " + " -> ".join(map(name, comp))


problems = []
total_files = total_imports = 0
for crate, root in CRATES.items():
    files, graph = import_graph(root)
    total_files += len(files)
    total_imports += sum(map(len, graph.values()))
    if "--graph" in sys.argv:
        for m in sorted(graph):
            print(f"{crate}: {name(m)}: {', '.join(sorted(name(t) for t in graph[m]))}")

    if crate == "app":
        for m, targets in sorted(graph.items()):
            for t in sorted(targets):
                if m and t and m[0] != t[0] and layer_of(t[0]) > layer_of(m[0]):
                    problems.append(f"{name(m)} (layer {layer_of(m[0])}) uses {name(t)}, "
                                    f"of the higher layer {layer_of(t[0])}")

    top = {}
    for m, targets in graph.items():
        for t in targets:
            if m and t and m[:1] != t[:1]:
                top.setdefault(m[:1], set()).add(t[:1])
    for comp in sccs({m[:1] for m in files if m}, top):
        problems.append(f"import cycle between top-level modules of {crate}: "
                        + " <-> ".join(map(name, comp)))
    problems += folder_cycles(crate, files, graph)

for p in problems:
    print(p)
print(f"check-architecture: {total_files} files, {total_imports} imports, "
      f"{len(problems)} problem(s)")
sys.exit(1 if problems else 0)
