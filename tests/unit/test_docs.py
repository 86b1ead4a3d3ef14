"""The documentation's links lead somewhere: every relative link of README.md, docs/ and
bench/README.md names a file that exists and, with a #fragment, a heading of that file."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", ROOT / "bench" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors(page: Path) -> set[str]:
    """The fragments GitHub gives the page's headings."""
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    found = set()
    for heading in re.findall(r"^#+\s+(.+)$", text, flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        found.add(slug)
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    broken = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target):
            continue  # another site, or a running jin
        path, _, fragment = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(target)
        elif fragment and linked.suffix == ".md" and fragment not in anchors(linked):
            broken.append(target)
    assert broken == []


def test_readme_stays_short() -> None:
    assert len((ROOT / "README.md").read_text().splitlines()) <= 150
