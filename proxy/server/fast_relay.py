"""Plain relayed traffic relayed from the client's transport callback, without waking the
session's task.

A session reads its client in its own task, and a relayed statement read that way wakes
that task twice (the client's message, then PostgreSQL's answer): with asyncio streams
that is most of what relaying costs (bench/README.md, passthrough). So when the session
may relay now (Session.may_relay: it waits for its client at a message boundary, outside
a batch, on a live relay connection), the whole messages that arrived are looked at here:

- a Query whose text the plan cache holds as one statement relayed as written and with
  no effect on the session's own state (not DISCARD, DEALLOCATE or RESET of dp.*), or
- a batch Bind/Describe/Execute … Sync whose statements and portals are relayed ones
  (ExtendedProtocol.relay_batch)

go through the one relay routine (relay.py) at once, exactly as the task would send
them; anything else, and everything after it, goes to the session's stream as before.
"""

from __future__ import annotations

import struct

from rewriter.plan import Relay

from ..pgwire import wire
from ..pgwire.codes import Frontend
from .extended import ExtendedProtocol
from .relay import Exchange
from .session import Session

_QUERY, _SYNC = ord(Frontend.QUERY), ord(Frontend.SYNC)
_LENGTH = struct.Struct("!i")


class FastRelay:
    """The client transport's callback of one session; `close` unhooks it."""

    def __init__(self, session: Session, extended: ExtendedProtocol, max_message: int):
        self.session = session
        self.extended = extended
        self.max_message = max_message
        self.client = session.reader.protocol
        assert self.client is not None
        self.client.hook = self.from_client

    def close(self) -> None:
        assert self.client is not None
        self.client.hook = None

    def from_client(self, data: bytes) -> bytes:
        """The bytes that arrived from the client: relay the leading statements that
        qualify, and return the rest for the session's stream."""
        if not self.session.may_relay():
            return data
        at = 0
        while at < len(data):
            try:
                end = self._query(data, at) if data[at] == _QUERY else self._batch(data, at)
            except wire.ProtocolError:  # the session's stream reports it, in its turn
                end = None
            if end is None:
                break
            at = end
        return data[at:] if at else data

    def _end(self, data: bytes, at: int) -> int | None:
        """Where the whole message at `at` ends, None if it has not all arrived."""
        if len(data) - at < 5:
            return None
        (length,) = _LENGTH.unpack_from(data, at + 1)
        if length < 4 or length > self.max_message:
            return None  # the session's stream reports the broken message
        end = at + 1 + length
        return end if end <= len(data) else None

    def _query(self, data: bytes, at: int) -> int | None:
        end = self._end(data, at)
        if end is None:
            return None
        sql, _ = wire.cstring(data, at + 5)
        statements = self.session.engine.cached(sql)
        if statements is None or len(statements) != 1:
            return None
        plan = statements[0].plan
        if type(plan) is not Relay or plan.resets_dp or plan.deallocates_all or \
                plan.deallocates:
            return None
        # As the client sent it when that is the statement classified, or the statement
        # and its semicolon (pgbench's); else its text as classified. Only bytes that are
        # ASCII go as sent: cstring decodes with replacement, so two byte strings may read
        # as the text classified, and PostgreSQL (SQL_ASCII) would read them apart.
        message = data[at:end] if (sql == plan.text or (
            sql[-1:] == ";" and sql[:-1] == plan.text)) and data[at + 5:end].isascii() else \
            wire.message(Frontend.QUERY, plan.text.encode() + b"\0")
        self.session.relay_from_transport(
            message, Exchange(plan, statements[0].text, client_ready=True))
        return end

    def _batch(self, data: bytes, at: int) -> int | None:
        """Extended-protocol messages up to a Sync, all arrived, if relay_batch takes
        them."""
        start, messages = at, list[tuple[int, bytes]]()
        while (end := self._end(data, at)) is not None:
            if data[at] == _SYNC:
                return end if self.extended.relay_batch(messages, data[start:end]) else None
            messages.append((data[at], data[at + 5:end]))
            at = end
        return None
