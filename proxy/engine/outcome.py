"""What the engine gives the protocol layer for a statement it answers itself."""

from __future__ import annotations

from dataclasses import dataclass

from ..pgwire import wire


@dataclass(frozen=True)
class Answer:
    """Rows the proxy itself answers with (text format), their tag and a NOTICE."""

    columns: list[tuple[str, int]]
    rows: list[list[str | None]]
    tag: str
    notice: str | None = None
    # The rows as text-format DataRow messages, when the engine encoded them on a worker
    # thread (a long answer: encoding 10,000 rows would hold the event loop for ~30 ms).
    data_rows: list[bytes] | None = None

    def text_rows(self) -> list[bytes]:
        """The DataRow messages of the rows in text format."""
        if self.data_rows is not None:
            return self.data_rows
        return text_data_rows(self.rows)


def text_data_rows(rows: list[list[str | None]]) -> list[bytes]:
    """DataRow messages of text values."""
    return [wire.data_row(row) for row in rows]


@dataclass(frozen=True)
class Reply:
    """A statement answered by one message and no rows (SET's CommandComplete, the
    EmptyQueryResponse of an empty statement)."""

    message: bytes


Outcome = Answer | Reply
