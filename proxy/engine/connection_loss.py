"""When the database connection of a private statement fails before anything is charged.

PostgreSQL restarts, terminates backends (57P01), refuses connections while it starts up
or shuts down (57P03), or its socket goes away (08006). Before the charge none of this
depends on private rows, so the statement is tried once more on a fresh connection and,
if that fails too, answered with PostgreSQL's SQLSTATE for this one statement: the session
stays open. After the charge a failure is the generic 22000 of session.py, charged.
"""

from __future__ import annotations

import asyncio

from rewriter.sqlstate import SqlState

from ..pgwire import wire
from ..pgwire.backend import BackendError
from ..pgwire.errors import ClientError

CONNECTION_FAILURE = SqlState.CONNECTION_FAILURE
# PostgreSQL's class of codes for a connection it ended or cannot serve yet (57P01 admin
# shutdown, 57P03 cannot connect now, …), and the connection exception class.
_LOST_CLASSES = ("57P", "08")


def connection_loss(error: BaseException) -> str | None:
    """The SQLSTATE to report if `error` means the database connection failed, else None.
    PostgreSQL's error comes as a BackendError, or as a ClientError made of one (a
    Describe's)."""
    if isinstance(error, (BackendError, ClientError)):
        state = error.sqlstate
        return state if state.startswith(_LOST_CLASSES) else None
    if isinstance(error, (OSError, EOFError, asyncio.IncompleteReadError,
                          wire.ProtocolError)):
        return CONNECTION_FAILURE
    return None
