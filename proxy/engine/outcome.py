"""What the engine gives the protocol layer for a statement it answers itself."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Answer:
    """Rows the proxy itself answers with (text format), their tag and a NOTICE."""

    columns: list[tuple[str, int]]
    rows: list[list[str | None]]
    tag: str
    notice: str | None = None


@dataclass(frozen=True)
class Reply:
    """A statement answered by one message and no rows (SET's CommandComplete, the
    EmptyQueryResponse of an empty statement)."""

    message: bytes


Outcome = Answer | Reply
