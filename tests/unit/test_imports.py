"""Imports point downwards: the library never reaches the study or the benchmarks, and no
module imports itself back through others, counting imports deferred inside functions.

The modules are parsed with ``ast``, not imported, so a deferred import counts as soon as it
is written, not when a test happens to run it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# Cycles allowed to exist (none now). Each is the set of modules that reach one another; the
# last test fails once a listed cycle is gone, so the list cannot outlive the cycles.
KNOWN_CYCLES: set[frozenset] = set()


def modules(package: str, root: Path = REPO) -> dict[str, Path]:
    """Dotted name -> file of every module of ``package`` (packages by their __init__)."""
    out = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def imported(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """Every module ``name`` imports, anywhere in its body; ``from a import b`` counts as
    ``a.b`` when that is a module, else as ``a``. Relative imports are resolved."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + [base]).strip(".")
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                out.add(sub if sub in known else base)
    return out


def graph(packages: tuple[str, ...], root: Path = REPO) -> dict[str, set[str]]:
    """Module -> the modules of ``packages`` it imports (a submodule stands for itself only)."""
    known = {}
    for p in packages:
        known.update(modules(p, root))
    edges = {}
    for name, path in known.items():
        targets = set()
        for t in imported(name, path, known):
            while t not in known and "." in t:  # an attribute or a name: its module
                t = t.rsplit(".", 1)[0]
            if t in known and t != name:
                targets.add(t)
        edges[name] = targets
    return edges


def cycles(edges: dict[str, set[str]]) -> set[frozenset[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), set()
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.add(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.add(frozenset(comp))
    return found


def test_walker_sees_deferred_and_relative_imports(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from . import b\n")
    (pkg / "a.py").write_text("def f():\n    from pkg.sub import b\n")
    (pkg / "sub" / "b.py").write_text("from ..a import f\nimport heuristics.bench\n")
    edges = graph(("pkg",), tmp_path)
    assert edges["pkg.a"] == {"pkg.sub.b"} and edges["pkg.sub.b"] == {"pkg.a"}
    assert cycles(edges) == {frozenset({"pkg.a", "pkg.sub.b"})}
    known = modules("pkg", tmp_path)
    assert "heuristics.bench" in imported("pkg.sub.b", known["pkg.sub.b"], known)


@pytest.mark.parametrize(
    "package, forbidden",
    [("psvm", ("heuristics", "benchmarks")), ("heuristics", ("benchmarks",))],
)
def test_imports_point_downwards(package, forbidden):
    """psvm is the library: it never needs the study or the benchmarks. heuristics ships in
    the wheel, benchmarks/ does not."""
    known = modules(package)
    bad = sorted(
        f"{name} imports {t}"
        for name, path in known.items()
        for t in imported(name, path, known)
        if t.split(".")[0] in forbidden
    )
    assert not bad, bad


def test_no_new_import_cycles():
    found = cycles(graph(("psvm", "heuristics")))
    new = [sorted(c) for c in found - KNOWN_CYCLES]
    assert not new, f"import cycles (deferred imports count): {new}"


def test_known_cycles_still_exist():
    gone = [sorted(c) for c in KNOWN_CYCLES - cycles(graph(("psvm", "heuristics")))]
    assert not gone, f"fixed or changed, remove from KNOWN_CYCLES: {gone}"
