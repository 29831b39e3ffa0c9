"""docs/design.md's folder tree lists every module of psvm and heuristics, and no other."""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _tree_modules() -> set[str]:
    text = (REPO / "docs" / "design.md").read_text()
    block = text.split("## The folder tree", 1)[1].split("```text", 1)[1].split("```", 1)[0]
    out, package = set(), None
    for line in block.splitlines():
        if re.match(r"^\S+/\s", line + " "):  # a top-level folder
            package = line.split("/")[0]
        elif line.startswith("  ") and package and line.split()[0].endswith(".py"):
            out.add(f"{package}/{line.split()[0]}")
    return out


def test_design_tree_lists_the_modules():
    code = {
        str(p.relative_to(REPO))
        for package in ("psvm", "heuristics")
        for p in (REPO / package).rglob("*.py")
        if p.name != "__init__.py" or p.read_text().count("\n") > 30  # inits with code count
    }
    listed = _tree_modules()
    assert not code - listed, f"modules missing from docs/design.md's tree: {sorted(code - listed)}"
    missing = [m for m in listed if not (REPO / m).exists()]
    assert not missing, f"the tree lists modules that do not exist: {missing}"
