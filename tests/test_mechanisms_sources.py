"""The predictable source stays out of the proxy; the secure one is what serving uses."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from mechanisms.random_source import RandomSource
from mechanisms.seeded_source import SeededRandomSource

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent
# The only module outside mechanisms/ and tests/ allowed to import the seeded source:
# `dpgate experiment --seed`, which says on its output that it is seeded.
ALLOWED = {ROOT / "proxy" / "admin" / "cli_experiment.py"}


def _imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


@pytest.mark.parametrize("package", ["proxy", "rewriter", "accounting"])
def test_serving_code_never_imports_the_seeded_source(package: str) -> None:
    offenders = [
        path.relative_to(ROOT) for path in sorted((ROOT / package).rglob("*.py"))
        if path not in ALLOWED
        and any("seeded_source" in name for name in _imported_modules(path))
    ]
    assert offenders == []


def test_mechanisms_modules_do_not_use_the_seeded_source_either() -> None:
    for path in sorted((ROOT / "mechanisms").glob("*.py")):
        if path.name == "seeded_source.py":
            continue
        assert not any("seeded_source" in name for name in _imported_modules(path)), path


def test_seeded_source_is_deterministic_and_validates() -> None:
    a, b = SeededRandomSource(42), SeededRandomSource(42)
    assert isinstance(a, RandomSource)
    assert [a.randbelow(1000) for _ in range(50)] == [b.randbelow(1000) for _ in range(50)]
    assert all(0 <= a.randbelow(7) < 7 for _ in range(500))
    with pytest.raises(ValueError):
        a.randbelow(0)
