"""The README is a front door (short, the two commands first, no link out of the repository) and docs/ stands behind
it: every relative link of the README, CONTRIBUTING.md and docs/ leads to a file of this repository."""

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", REPO / "CONTRIBUTING.md", REPO / "benchmarks" / "README.md",
         *sorted((REPO / "docs").glob("*.md"))]


def test_the_readme_is_short_and_opens_with_the_two_commands():
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) <= 150
    assert [line.split("#")[0].strip() for line in lines[2:4]] == ["make sweep", "make test"]


def test_docs_has_a_page_for_each_topic():
    for page in ("methodology", "workflows", "environments", "slurm", "architecture", "support", "usage"):
        assert (REPO / "docs" / f"{page}.md").is_file(), page


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(REPO)))
def test_every_link_stays_in_the_repository_and_leads_to_a_file(page):
    for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
        assert not re.match(r"[a-z]+:", target), f"{page.name}: {target} leaves the repository"
        path = (page.parent / target.split("#")[0]).resolve()
        assert path.is_relative_to(REPO) and path.exists(), f"{page.name}: {target}"
