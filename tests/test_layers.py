"""The package's one dependency rule, over its whole import graph (imports inside functions count: they are
a dependency too, only a deferred one). Each module belongs to a layer; a module may import its own layer and
the layers the rule lists for it, nothing else; there are no cycles and no private names imported across
modules. The same table is the table of contents of ``multicta_kernels/__init__.py``.

    python tests/test_layers.py        # the graph: one line per module, its floor (import level) and imports
"""
import ast
import re
import sys
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "multicta_kernels"

# The chapters in book order: a chapter may import the chapters before it.
CHAPTERS = ("foundations", "primer", "softmax", "barrier_model", "barriers", "multicast", "two_cta", "clc_matmul", "hopper_matmul", "wide_tiles")

# layer: the layers it may import (besides its own). Read top to bottom: a layer only ever imports layers above it
# in this table, so the table is also the order in which the package is built.
RULE = {
    "core": (),
    "lens": ("core",),
    "gluon": ("core", "lens"),
    "results": ("core",),
    "measure": ("core", "lens", "gluon", "results"),
    "chapters": ("core", "lens", "gluon", "results", "measure"),
    "catalog": ("core", "lens", "gluon", "chapters"),
    "benchmarks": ("core", "lens", "gluon", "results", "measure", "chapters"),
    "protocols": ("core", "lens", "gluon", "chapters", "catalog"),
    "show": ("core", "lens", "gluon", "results", "measure", "chapters", "catalog", "protocols"),
    "cli": ("core", "lens", "gluon", "results", "measure", "chapters", "catalog", "benchmarks", "protocols", "show"),
}


def module_names():
    """Every module of the package by dotted name relative to it ("core.hardware", "lens" for lens/__init__.py)."""
    out = {}
    for p in sorted(PKG.rglob("*.py")):
        rel = p.relative_to(PKG).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def layer(mod: str) -> str:
    head = mod.split(".")[0]
    if head in CHAPTERS:
        return "chapters"
    return head if head else "package"


def graph():
    """{module: {imported module: [names imported from it]}} inside the package."""
    mods = module_names()
    edges = {m: {} for m in mods}
    for m, path in mods.items():
        is_pkg = path.name == "__init__.py"
        here = m.split(".") if m else []
        base_parts = here if is_pkg else here[:-1]         # the package a relative import starts from
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets = []
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    start = base_parts[:len(base_parts) - (node.level - 1)] if node.level > 1 else base_parts
                    if node.level - 1 > len(base_parts):
                        continue
                    target = ".".join(start + (node.module.split(".") if node.module else []))
                elif node.module and (node.module == "multicta_kernels" or node.module.startswith("multicta_kernels.")):
                    target = node.module[len("multicta_kernels") + 1:]
                else:
                    continue
                for a in node.names:
                    sub = f"{target}.{a.name}" if target else a.name
                    if sub in mods:                          # `from .. import lens`: the module itself
                        targets.append((sub, None))
                    elif target in mods:
                        targets.append((target, a.name))
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.startswith("multicta_kernels."):
                        t = a.name[len("multicta_kernels") + 1:]
                        if t in mods:
                            targets.append((t, None))
            for t, name in targets:
                if t != m:
                    edges[m].setdefault(t, [])
                    if name:
                        edges[m][t].append(name)
    return edges


def allowed(src: str, dst: str) -> bool:
    a, b = layer(src), layer(dst)
    if a == "package" or b == "package":
        return a == "package"                      # the package's __init__ may import; nothing imports it
    if a == b == "chapters":
        return CHAPTERS.index(dst.split(".")[0]) <= CHAPTERS.index(src.split(".")[0])
    return a == b or b in RULE[a]


def cycles(edges):
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
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
    for v in edges:
        if v not in index:
            visit(v)
    return out


def floors(edges):
    memo = {}

    def floor(m):
        if m not in memo:
            memo[m] = 1 + max((floor(d) for d in edges[m]), default=0)
        return memo[m]
    return {m: floor(m) for m in edges}


def test_every_module_belongs_to_a_layer():
    unknown = [m for m in module_names() if layer(m) not in RULE and layer(m) != "package" and m != "catalog"]
    assert unknown == [], f"modules outside every layer: {unknown}"
    assert {layer(m) for m in module_names()} == set(RULE) | {"package"}


def test_no_import_against_the_rule():
    bad = [f"{src} ({layer(src)}) imports {dst} ({layer(dst)})" for src, deps in graph().items() for dst in deps
           if not allowed(src, dst)]
    assert bad == [], "\n".join(bad)


def test_no_cycles_and_no_private_imports():
    edges = graph()
    assert cycles(edges) == []
    private = [f"{m} imports {n} from {t}" for m, deps in edges.items() for t, names in deps.items() for n in names
               if n.startswith("_") and not n.startswith("__")]
    assert private == []


def test_the_rule_is_the_table_of_contents():
    """``multicta_kernels/__init__.py`` shows the same rule: a line per layer, "LAYER  may import: A, B, ..."."""
    doc = ast.get_docstring(ast.parse((PKG / "__init__.py").read_text()))
    table = {m.group(1): tuple(x.strip() for x in m.group(2).split(",") if x.strip() and x.strip() != "-")
             for m in re.finditer(r"^``(\w+)/?``\s+may import:\s*(.*)$", doc, re.M)}
    assert table == RULE


def layer_floors(edges):
    """The floors of the layers themselves: a layer stands one above the highest layer it imports."""
    deps = {}
    for src, ds in edges.items():
        for d in ds:
            if layer(src) != layer(d):
                deps.setdefault(layer(src), set()).add(layer(d))
    memo = {}

    def floor(x):
        if x not in memo:
            memo[x] = 1 + max((floor(d) for d in deps.get(x, ())), default=0)
        return memo[x]
    return {x: floor(x) for x in {layer(m) for m in edges}}


def test_fewer_floors_than_before():
    """Before the layers, 24 modules in one folder stood on 11 floors, the chapters from floor 6 (primer) to 10
    (two_cta): a chapter stood high because of what its helpers imported (a kernel imported timeline.scope,
    and timeline imported bench). Now no chapter is above floor 7 of its files' graph, and the package no
    taller than before; the layers themselves stand on fewer floors than the modules did."""
    edges = graph()
    f = floors(edges)
    assert max(f[c] for c in CHAPTERS) <= 7, {c: f[c] for c in CHAPTERS}
    assert max(f.values()) <= 11
    lf = layer_floors(edges)
    assert lf["core"] == 1 and max(lf.values()) <= 9, lf


def report():
    edges = graph()
    f = floors(edges)
    print(f"multicta_kernels: {len(edges)} modules, {sum(len(d) for d in edges.values())} imports inside the package, "
          f"{max(f.values())} floors")
    for m in sorted(edges, key=lambda m: (-f[m], m)):
        lines = len(module_names()[m].read_text().splitlines())
        print(f"  floor {f[m]:>2}  {m or '(package)':<26} {layer(m):<10} {lines:>5} lines  imports: "
              f"{', '.join(sorted(edges[m])) or '-'}")
    bad = [(s, d) for s, deps in edges.items() for d in deps if not allowed(s, d)]
    lf = layer_floors(edges)
    print("layers: " + ", ".join(f"{x} {n}" for x, n in sorted(lf.items(), key=lambda kv: (kv[1], kv[0]))))
    print(f"{len(cycles(edges))} cycle(s), {len(bad)} import(s) against the rule")


if __name__ == "__main__":
    sys.exit(report())
