"""Every relative link in the project's markdown reaches a file, and its #anchor a heading
there (GitHub's rule: lower case, punctuation dropped, spaces to hyphens; a repeated heading
gets -1, -2, ...). Renamed headings broke links before without a word."""

import re
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted(
    [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "heuristics").glob("*.md")]
)
LINK = re.compile(r"\]\(([^)\s]+)\)")


def prose(path: Path) -> str:
    """The page without its code blocks (their brackets are code, not links)."""
    return re.sub(r"```.*?```", "", path.read_text(), flags=re.S)


def anchors(path: Path) -> set[str]:
    seen: Counter = Counter()
    out = set()
    for title in re.findall(r"^#+ (.*)$", prose(path), flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")
        out.add(f"{slug}-{seen[slug]}" if seen[slug] else slug)
        seen[slug] += 1
    return out


def test_the_pages_exist():
    assert len(PAGES) > 5 and all(p.exists() for p in PAGES)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_reach_their_file_and_heading(page):
    broken = []
    for link in LINK.findall(prose(page)):
        if re.match(r"[a-z]+:", link):  # http:, https:, mailto:
            continue
        path, _, anchor = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        if not target.exists():
            broken.append(f"{link}: no such file")
        elif anchor and target.suffix == ".md" and anchor not in anchors(target):
            broken.append(f"{link}: no heading #{anchor} in {target.name}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)
