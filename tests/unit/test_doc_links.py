"""Every relative link of the repository's Markdown files reaches a file, and a `#section` of a
Markdown file one of its headings (as GitHub makes anchors of them)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~)")


def markdown_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "*.md"], cwd=REPO, capture_output=True, text=True, check=False
    ).stdout.split()
    return [REPO / name for name in listed if (REPO / name).is_file()]


def prose_lines(path: Path) -> list[str]:
    """The file's lines outside fenced code blocks."""
    lines, fenced = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line.strip()):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def anchors(path: Path) -> set[str]:
    """GitHub's anchors of the file's headings: lower case, punctuation dropped, spaces to
    hyphens, a repeated heading numbered (-1, -2, ...)."""
    found: set[str] = set()
    for line in prose_lines(path):
        if not line.startswith("#"):
            continue
        title = line.lstrip("#").strip().lower()
        title = re.sub(r"[^\w\- ]", "", title).replace(" ", "-")
        anchor, number = title, 0
        while anchor in found:
            number += 1
            anchor = f"{title}-{number}"
        found.add(anchor)
    return found


def broken_links(path: Path) -> list[str]:
    broken = []
    for line in prose_lines(path):
        line = re.sub(r"`[^`]*`", "", line)  # code spans are not links
        for target in LINK.findall(line):
            if re.match(r"^[a-z]+:", target) or target.startswith("<"):
                continue  # https:, mailto:, ...
            name, _, section = target.partition("#")
            linked = (path.parent / name).resolve() if name else path
            if not linked.exists():
                broken.append(f"{target} (no such file)")
            elif section and linked.suffix == ".md" and section not in anchors(linked):
                broken.append(f"{target} (no such section)")
    return broken


@pytest.mark.parametrize("path", markdown_files(), ids=lambda path: str(path.relative_to(REPO)))
def test_every_relative_link_reaches_its_file_and_section(path):
    assert broken_links(path) == []


def test_the_readme_stays_a_product_page():
    """The README is what a newcomer reads first: at most 220 lines; the rest lives in docs/."""
    assert len((REPO / "README.md").read_text(encoding="utf-8").splitlines()) <= 220


@pytest.mark.parametrize("target", ["HOUR_TABLE", "BUDGET_DOCS", "DEMO_RESULTS"])
def test_the_demo_reports_links_into_the_repository_reach_their_sections(target):
    from bertlab.apps.demo import report as demo_report

    name, _, section = getattr(demo_report, target).partition("#")
    assert (REPO / name).is_file()
    assert not section or section in anchors(REPO / name)


# A link to a heading of a lab notebook: `lab/NAME.md#...`, relative or from the root.
LAB_HEADING = re.compile(r"(?:^|[(/\"'\s])lab/[\w.-]+\.md#")


def user_docs() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def product_and_test_sources() -> list[Path]:
    return sorted([*(REPO / "bertlab").rglob("*.py"), *(REPO / "tests").rglob("*.py")])


def test_no_user_doc_links_a_heading_of_a_lab_notebook():
    """Lab notebooks are dated rounds that move and get rewritten; a user doc states the result
    itself and at most names the notebook that measured it, never one of its headings."""
    linked = [
        f"{path.relative_to(REPO)}: {target}"
        for path in user_docs()
        for line in prose_lines(path)
        for target in LINK.findall(line)
        if "lab/" in target and "#" in target
    ]
    assert linked == []


def test_no_product_code_report_or_test_links_a_heading_of_a_lab_notebook():
    """The demo's report and every other text the package writes, and the tests that pin them,
    point into the user docs, not at a lab notebook's headings."""
    linked = [
        f"{path.relative_to(REPO)}:{number}"
        for path in product_and_test_sources()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if LAB_HEADING.search(line)
    ]
    assert linked == []


# A mention of a lab notebook in the package: the word, or a path into lab/.
LAB_NOTEBOOK = re.compile(r"notebook|(?:^|[(/\"'`\s])lab/", re.IGNORECASE)


def test_no_product_code_cites_a_lab_notebook():
    """A comment, docstring or model card of the package states the measured fact itself, with
    its seeds and spread; the lab's notebooks are dated rounds that move and get rewritten."""
    package = REPO / "bertlab"
    cited = [
        f"{path.relative_to(REPO)}:{number}"
        for path in sorted([*package.rglob("*.py"), *package.rglob("*.md")])
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if LAB_NOTEBOOK.search(line)
    ]
    assert cited == []
