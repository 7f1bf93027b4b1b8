"""Every error dpgate sends a client, as one type with one `to_response`.

A `ClientError` carries a SQLSTATE, a message, and optionally a hint and a position in the
client's query string. A `StatementError` ends one statement (the rest of the query
string is skipped, the session goes on); a `FatalError` refuses or ends the connection and
is sent as FATAL. The admin console's errors are statement errors too.
"""

from __future__ import annotations

from rewriter.sqlstate import SqlState

from . import wire
from .codes import Severity


class ClientError(Exception):
    """An error for the client, sent as one ErrorResponse."""

    severity = Severity.ERROR

    def __init__(self, sqlstate: str, message: str, hint: str | None = None,
                 position: int | None = None):
        super().__init__(message)
        self.sqlstate = sqlstate  # also what proxy/ops reports of the statement
        self.message, self.hint, self.position = message, hint, position

    def to_response(self) -> bytes:
        return wire.error_response(self.sqlstate, self.message, self.hint, self.position,
                                   self.severity)


class StatementError(ClientError):
    """An error to report for one statement; the rest of the query string is skipped."""


class FatalError(ClientError):
    """The connection is refused or ended with this error, sent as FATAL."""

    severity = Severity.FATAL


def relay_lost() -> StatementError:
    """The relay connection went away while a statement ran; the session reconnects for
    the next one."""
    return StatementError(SqlState.CONNECTION_FAILURE, "the connection to the database was "
                          "lost while the statement ran", hint="Ask again: dpgate "
                          "reconnects. Settings made with SET are reset.")
