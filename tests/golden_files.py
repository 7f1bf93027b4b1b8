"""Golden files of the rewriter: statement → rewritten SQL and sensitivities.

A golden file (tests/golden/*/*.sql) holds cases separated by `-- ----` lines: a `-- title`
line, the analyst's statement, `-- expect:`, then what the rewriter makes of it as the
directory's test writes it (tests/test_unit_golden.py, tests/test_row_golden.py,
tests/test_rewritten_golden.py). Run
the tests with DPGATE_UPDATE_GOLDEN=1 to rewrite every expectation after an intended
change, and review the diff like code.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

SEPARATOR = "-- ----"
EXPECT = "-- expect:"
# What a directory's test makes of one case: (title, statement) -> expectation text.
Expectation = Callable[[str, str], str]


@dataclass(frozen=True)
class Case:
    file: str
    title: str
    statement: str
    expected: str

    @property
    def id(self) -> str:
        return f"{self.file}:{self.title}"


def _blocks(path: Path) -> list[tuple[str, str, str]]:
    """(head, statement, expected) of each case of one file; head keeps the title line."""
    found = []
    for block in path.read_text().split(SEPARATOR + "\n"):
        if not block.strip():
            continue
        head, _, expected = block.partition(EXPECT + "\n")
        lines = head.strip().splitlines()
        found.append((head.strip(), "\n".join(lines[1:]).strip().rstrip(";"),
                      expected.strip()))
    return found


def released_sql(post_sql: str | None, outer_sql: str | None) -> list[str]:
    """The lines of a plan's SQL over released values: `-- post:` and `-- outer:`."""
    return [f"-- {name}: {sql}" for name, sql in (("post", post_sql), ("outer", outer_sql))
            if sql is not None]


def cases(directory: Path) -> list[Case]:
    """Every case of every golden file of `directory`."""
    return [Case(path.name, head.splitlines()[0].removeprefix("-- ").strip(), statement,
                 expected)
            for path in sorted(directory.glob("*.sql"))
            for head, statement, expected in _blocks(path)]


def update_if_asked(directory: Path, expectation: Expectation) -> None:
    """With DPGATE_UPDATE_GOLDEN set, write today's expectations into the files."""
    if not os.environ.get("DPGATE_UPDATE_GOLDEN"):
        return
    for path in sorted(directory.glob("*.sql")):
        written = []
        for head, statement, _ in _blocks(path):
            title = head.splitlines()[0].removeprefix("-- ").strip()
            written.append(f"{head}\n{EXPECT}\n{expectation(title, statement)}\n")
        path.write_text((SEPARATOR + "\n").join(written))
