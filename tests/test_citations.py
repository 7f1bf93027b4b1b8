"""Docs, product code and tests cite papers, not files outside the repository (the project's
SPEC.md and numbered seed documents are not shipped)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent
# "SPEC.md", "SPEC §7", "(SPEC", "seed 000", "Seed 001's", "the seed's example"
MISSING_SOURCE = re.compile(r"SPEC\.md|SPEC §|\(SPEC\b|(?i:\bseeds? 00\d|\bthe seed's)")


def _shipped() -> list[Path]:
    files = [ROOT / "README.md", ROOT / "dpgate.toml", *sorted((ROOT / "docs").rglob("*.md"))]
    for package in ("proxy", "rewriter", "accounting", "mechanisms", "tests", "bench"):
        files += sorted((ROOT / package).rglob("*.py")) + sorted((ROOT / package).rglob("*.toml"))
    files += sorted((ROOT / "tests" / "golden").rglob("*.sql"))  # their titles explain
    # This file quotes the patterns; tests/clients holds node_modules when installed.
    return [path for path in files if path != Path(__file__).resolve()
            and "node_modules" not in path.parts]


def test_nothing_shipped_cites_a_file_that_is_not_in_the_repository() -> None:
    citations = [f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
                 for path in _shipped()
                 for number, line in enumerate(path.read_text().splitlines(), 1)
                 if MISSING_SOURCE.search(line)]
    assert citations == []


def test_the_pattern_finds_what_it_is_meant_to() -> None:
    for text in ("see SPEC.md §1", "(SPEC §7)", "seed 000, Theorem 3", "Seed 001's α",
                 "the seed's example"):
        assert MISSING_SOURCE.search(text), text
    for text in ("--seed 3", "SEEDED with 3", "seeded_source.py", "a spec of the column"):
        assert not MISSING_SOURCE.search(text), text


# Where docs point into the repository: relative links, and `paths` under its folders.
LINK = re.compile(r"\]\(([^)\s]+)\)")
CODE_PATH = re.compile(r"`((?:proxy|rewriter|accounting|mechanisms|tests|bench|docs|examples|"
                       r"deploy|\.ci)/[^`\s*<>{}…|$]*)`")


def test_every_repository_path_the_docs_cite_exists() -> None:
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")),
            *sorted((ROOT / "bench").glob("*.md")), *sorted((ROOT / "examples").rglob("*.md"))]
    missing = []
    for path in docs:
        text = path.read_text()
        for link in LINK.findall(text):
            target = link.split("#", 1)[0]
            if target and not target.startswith(("http:", "https:", "mailto:")) \
                    and not (path.parent / target).exists():
                missing.append(f"{path.relative_to(ROOT)}: ({link})")
        for cited in CODE_PATH.findall(text):
            if not (ROOT / cited.split(":", 1)[0].rstrip(".,")).exists():
                missing.append(f"{path.relative_to(ROOT)}: `{cited}`")
    assert missing == []


def test_the_citation_patterns_find_what_they_are_meant_to() -> None:
    assert LINK.findall("see [the unit](docs/privacy-unit.md#tau).") == [
        "docs/privacy-unit.md#tau"]
    assert CODE_PATH.findall("in `proxy/demo/demo_policy.toml` and `tests/*.py`") == [
        "proxy/demo/demo_policy.toml"]
