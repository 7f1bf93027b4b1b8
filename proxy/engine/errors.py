"""What went wrong in the engine, as the client's error.

A statement's error is a `StatementError` (proxy/pgwire/errors.py, where every error a
client sees is defined): the rest of the query string is skipped and the protocol layer
sends its `to_response()`. dpgate's refusals (`Refusal`) and PostgreSQL's errors
(`BackendError`) become one through `client_error`, so positions are treated alike.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

from accounting import BudgetExceeded, LedgerUnavailable
from rewriter.errors import Refusal
from rewriter.sqlstate import SqlState

from ..pgwire.backend import BackendError
from ..pgwire.codes import ErrorField
from ..pgwire.errors import StatementError

__all__ = ["AlreadyReported", "StatementError", "budget_exhausted", "client_error",
           "ledger_call"]
log = logging.getLogger("dpgate.session")
T = TypeVar("T")


class AlreadyReported(StatementError):
    """The backend's own ErrorResponse was relayed already: nothing more to send."""

    def __init__(self, sqlstate: str = "") -> None:
        # PostgreSQL's SQLSTATE, read from the relayed ErrorResponse
        super().__init__(sqlstate, "relayed error")

    def to_response(self) -> bytes:
        return b""


def client_error(error: Refusal | BackendError, offset: int | None = None) -> StatementError:
    """The client's error for a refusal of dpgate's or an error of PostgreSQL's.

    A refusal's position is already counted in the client's query string. A backend
    error's position is shifted by `offset`, where the statement starts in that string;
    with `offset=None` the backend ran SQL the client never wrote (the rewritten query),
    so its position would point nowhere and is dropped.
    """
    if isinstance(error, Refusal):
        return StatementError(error.sqlstate, error.message, error.hint, error.position)
    position = error.fields.get(ErrorField.POSITION)
    shifted = int(position) + offset if offset is not None and position and \
        position.isdigit() else None
    return StatementError(error.sqlstate, error.fields.get(ErrorField.MESSAGE, "error"),
                          error.fields.get(ErrorField.HINT), shifted)


def budget_exhausted(exceeded: BudgetExceeded) -> StatementError:
    return StatementError(SqlState.BUDGET_EXHAUSTED, str(exceeded),
                          hint="Ask the data owner for more budget, or lower dp.epsilon.")


class WorkerPool(Protocol):
    """Workers.ledger_read or Workers.ledger_write: runs `function` on a thread."""

    def __call__(self, function: Callable[..., T], *args: object) -> Awaitable[T]: ...


async def ledger_call(pool: WorkerPool, call: Callable[..., T], *args: object) -> T:
    """A ledger call on its worker pool; a storage failure is this statement's error
    (nothing is released without its charge), never the end of the session."""
    try:
        return await pool(call, *args)
    except LedgerUnavailable as error:
        log.error("privacy ledger unreachable: %s", error)
        raise StatementError(
            SqlState.CONNECTION_FAILURE, "dpgate cannot reach its privacy ledger; nothing "
            "was released", hint="Ask again in a moment.") from None
    except sqlite3.Error as error:
        log.error("privacy ledger failure: %s", error)
        full = "full" in str(error).lower()
        raise StatementError(
            SqlState.DISK_FULL if full else SqlState.IO_ERROR,
            "the privacy ledger " + ("is out of disk space" if full else
                                     "could not be read or written") +
            "; nothing was released", hint="Tell the data owner.") from None
