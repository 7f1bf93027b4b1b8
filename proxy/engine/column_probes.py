"""Column probes (rewriter/analysis/probes.py): a statement dpgate refuses, asked with
LIMIT 0 or 1 as BI tools ask for a query's columns, answered with its columns and no row.
The columns are PostgreSQL's Describe of the statement as written, on the relay role's
pool: Parse and Describe read the catalog only, so nothing runs and no row is read, and
that role could not read a private row even if something did."""

from __future__ import annotations

from rewriter.plan import ColumnProbe

from ..pgwire.backend import BackendError, BackendPool, Described
from .errors import client_error
from .outcome import Answer


async def describe_probe(pool: BackendPool, text: str, types: tuple[int, ...] = (),
                         offset: int = 0) -> Described:
    """PostgreSQL's parameter types and result columns of the statement; its own error
    (a misspelt column) where it has one, which cannot depend on the rows either."""
    async with pool.connection() as backend:
        try:
            return await backend.describe(text, types)
        except BackendError as error:
            raise client_error(error, offset) from None


async def probe_answer(pool: BackendPool, text: str, plan: ColumnProbe,
                       types: tuple[int, ...] = (), offset: int = 0) -> Answer:
    """The statement's columns, no row, and a NOTICE saying why (psql shows it; a BI tool
    only needs the columns)."""
    described = await describe_probe(pool, text, types, offset)
    return Answer(described.columns, [], "SELECT 0", probe_notice(plan))


def probe_notice(plan: ColumnProbe) -> str:
    return (f"dpgate: only the statement's columns, no row, as asked with LIMIT "
            f"{plan.limit} (the way BI tools learn a query's columns): as a question it is "
            f"refused: {plan.refused}; nothing is charged")
