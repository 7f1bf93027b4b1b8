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
