"""The one relay routine: what a session sends PostgreSQL on its relay connection, and
PostgreSQL's answers passed to the client as they come, in the relay connection's
transport callback.

Whoever relays opens an Exchange: the session's task (a relayed statement of a Query, an
extended-protocol batch's Flush or Sync, the statement that fails an open transaction)
or the client's transport callback (fast_relay.py, a whole Query or batch relayed as the
client sent it). The answers are handled here in one way for all of them: passed on as
they came, ParameterStatus and the transaction status of ReadyForQuery kept, forwarded
extended messages undone on an error when PostgreSQL refused or skipped them, the
exchange reported to proxy/ops and its waiter woken. A connection lost under an
exchange fails it as PostgreSQL's own error would (08006, then ReadyForQuery outside a
transaction).

While a client is slow to read, PostgreSQL's answers are not read either.
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from rewriter.plan import Relay

from ..ops import SessionOps
from ..pgwire import wire
from ..pgwire.backend import MAX_BACKEND_MESSAGE, BackendConnection
from ..pgwire.codes import Backend, ErrorField, TransactionStatus
from ..pgwire.errors import relay_lost
from ..pgwire.hooked import HookedStreamProtocol
from ..pgwire.outbox import Outbox
from ..pgwire.running import Running

# What completes a forwarded extended-protocol message: each of these answers exactly
# one, in the order they were sent (Parse, Bind, Close; Describe: RowDescription or
# NoData; Execute: CommandComplete, EmptyQueryResponse or PortalSuspended), and PostgreSQL
# skips every message after an error up to Sync. So counting them tells which forwarded
# messages an error undoes, without matching each answer to its message.
COMPLETIONS = frozenset(ord(kind) for kind in (
    Backend.PARSE_COMPLETE, Backend.BIND_COMPLETE, Backend.CLOSE_COMPLETE,
    Backend.ROW_DESCRIPTION, Backend.NO_DATA, Backend.COMMAND_COMPLETE,
    Backend.EMPTY_QUERY_RESPONSE, Backend.PORTAL_SUSPENDED))
_READY, _ERROR, _SETTING = (ord(kind) for kind in (
    Backend.READY_FOR_QUERY, Backend.ERROR_RESPONSE, Backend.PARAMETER_STATUS))
_LENGTH = struct.Struct("!i")

# What undoes a forwarded message's entry in the session (a prepared statement, a
# portal) if PostgreSQL refuses or skips it; None for a message that created nothing.
Undo = Callable[[], None] | None


@dataclass(slots=True, eq=False)
class Exchange:
    """Messages sent to PostgreSQL whose answers are awaited. It ends at ReadyForQuery
    (`until_ready`), or once every forwarded message it carries is completed (a Flush)."""

    plan: Relay | None  # a relayed statement of a Query, reported at its end
    text: str
    until_ready: bool = True
    client_ready: bool = False  # PostgreSQL's ReadyForQuery goes to the client
    quiet: bool = False  # nothing is passed on (the session's own statement)
    # The extended-protocol messages whose answers it reads, each with its undo, and how
    # many of them PostgreSQL completed so far.
    forwarded: Sequence[Undo] = ()
    completed: int = 0
    started: float = 0.0
    sqlstate: str | None = None  # of PostgreSQL's first ErrorResponse
    done: asyncio.Future[str | None] | None = None  # the session's task waits on it


class Owner(Protocol):
    """The session, as the relay routine sees it (session.py)."""

    running: Running
    ops: SessionOps

    def client_ready(self) -> None: ...

    def relayed_all(self) -> None: ...


class RelayLane:
    """A session's relay connection as the relay routine sees it."""

    def __init__(self, session: Owner, client: HookedStreamProtocol,
                 writer: asyncio.StreamWriter, outbox: Outbox):
        self.session = session
        # The client's, written to directly (asyncio's StreamWriter only passes it on).
        self.transport = writer.transport
        self.outbox = outbox
        # Forwarded extended-protocol messages whose answers no exchange reads yet (the
        # next one takes them), each with its undo.
        self.pending: list[Undo] = []
        self.in_flight: deque[Exchange] = deque()
        self.unfinished = bytearray()  # the start of PostgreSQL's next message
        self.relay: BackendConnection | None = None
        self.closed = False  # PostgreSQL closed `relay`
        self._paused = False
        self.client = client
        client.on_pause_writing = self._client_full
        client.on_resume_writing = self._client_caught_up
        client.on_closed = self._client_gone

    def attach(self, relay: BackendConnection) -> None:
        """Take the answers of a (new) relay connection in its transport callback."""
        self.detach()
        assert relay.protocol is not None
        relay.protocol.hook = self.from_backend
        relay.protocol.on_closed = self._lost
        self.relay, self.closed = relay, False
        self.unfinished.clear()

    def detach(self) -> None:
        if self.relay is not None and self.relay.protocol is not None:
            self.relay.protocol.hook = self.relay.protocol.on_closed = None
        self.relay = None

    def close(self) -> None:
        self.detach()
        self.client.on_pause_writing = self.client.on_resume_writing = None
        self.client.on_closed = None

    def forward(self, message: bytes, undo: Undo = None) -> None:
        """Queue an extended-protocol message for PostgreSQL; its answer is read by the
        next exchange (a Flush or a Sync)."""
        assert self.relay is not None
        self.relay.send(message)
        self.pending.append(undo)

    def open(self, message: bytes, exchange: Exchange) -> None:
        """Send what was queued and `message`, and await their answers in `exchange`
        (which carries the forwarded messages queued before it)."""
        relay = self.relay
        assert relay is not None
        if exchange.plan is not None:
            exchange.started = time.perf_counter()
        if self.pending:
            # Queued before it, so answered first; a batch's own list stays after them.
            exchange.forwarded, self.pending = [*self.pending, *exchange.forwarded], []
        if not self.in_flight:
            self.session.running.set(relay)
        self.in_flight.append(exchange)
        if self.outbox.parts:
            self.outbox.write()  # the session's earlier messages first
        if self.closed or relay.writer.transport.is_closing():
            self._lost()
            return
        relay.push(message)
        self._adopt(relay)

    async def exchange(self, message: bytes, exchange: Exchange) -> str | None:
        """`open`, from the session's task: the SQLSTATE of PostgreSQL's first error, if
        any, once every answer is in."""
        exchange.done = asyncio.get_running_loop().create_future()
        self.open(message, exchange)
        return await exchange.done

    def _adopt(self, relay: BackendConnection) -> None:
        """Answers the stream received while no exchange was open come first."""
        while (raw := wire.buffered_message(relay.reader, MAX_BACKEND_MESSAGE)) is not None:
            self.from_backend(raw)

    def from_backend(self, data: bytes) -> bytes:
        """The bytes that arrived from the relay connection: the answers of open
        exchanges go to the client; what follows the last of them is returned."""
        if not self.in_flight:
            return data
        if self.unfinished:
            self.unfinished += data
            data, self.unfinished = bytes(self.unfinished), bytearray()
        relay = self.relay
        assert relay is not None
        at = start = 0  # `start`: the first byte neither passed on nor dropped
        out: list[bytes] = []  # what is passed on, when something between is dropped
        size, in_flight = len(data), self.in_flight
        while in_flight:
            if size - at < 5:
                break
            end = at + 1 + _LENGTH.unpack_from(data, at + 1)[0]
            if end > size:  # the rest of the message has not arrived
                break
            head = in_flight[0]
            kind = data[at]
            if head.quiet:
                start = end
            if kind in COMPLETIONS:
                head.completed += 1
            elif kind == _READY:
                relay.status = data[at + 5:at + 6]
                if head.client_ready:
                    self.session.client_ready()  # PostgreSQL's ReadyForQuery is passed on
                else:
                    if start < at:  # quiet: start is past it (compiled, a reversed slice raises)
                        out.append(data[start:at])
                    start = end
                at = end
                self._finish(in_flight.popleft())
                continue
            elif kind == _ERROR:
                if head.sqlstate is None:
                    head.sqlstate = wire.parse_error_fields(
                        data[at + 5:end]).get(ErrorField.SQLSTATE, "")
                for undo in head.forwarded[head.completed:]:  # refused or skipped
                    if undo is not None:
                        undo()
                head.completed = len(head.forwarded)
            elif kind == _SETTING:
                relay.reported(data, at)
            at = end
            if not head.until_ready and head.completed == len(head.forwarded):
                self._finish(in_flight.popleft())
        if out:
            out.append(data[start:at])
            self._write(b"".join(out))
        else:
            self._write(data[start:at])
        if self.in_flight:
            self.unfinished += data[at:]
            return b""
        return data[at:]

    def _write(self, data: bytes) -> None:
        if data and not self.transport.is_closing():
            self.transport.write(data)

    def _finish(self, done: Exchange) -> None:
        if done.plan is not None:
            self.session.ops.relayed(done.plan, done.text, done.sqlstate,
                                     time.perf_counter() - done.started)
        if done.done is not None and not done.done.done():
            done.done.set_result(done.sqlstate)
        if not self.in_flight:
            self.session.running.set(None)
            if self._paused:
                self._client_caught_up()
            self.session.relayed_all()

    def _lost(self) -> None:
        """PostgreSQL closed the relay connection: every open exchange fails as with
        PostgreSQL's own error (08006), outside a transaction; the session reconnects
        for the next statement."""
        self.closed = True
        self.unfinished.clear()
        lost = relay_lost().to_response()
        ready = wire.ready_for_query(TransactionStatus.IDLE)
        while self.in_flight:
            head = self.in_flight[0]
            self.from_backend((lost if head.sqlstate is None else b"") +
                              (ready if head.until_ready else b""))
            if self.in_flight and self.in_flight[0] is head:  # a Flush that had failed
                self._finish(self.in_flight.popleft())

    # A client slow to read: stop reading its answers from PostgreSQL meanwhile.

    def _client_full(self) -> None:
        if self.in_flight and self.relay is not None and not self._paused:
            self.relay.writer.transport.pause_reading()  # type: ignore[attr-defined]
            self._paused = True

    def _client_gone(self) -> None:
        """The client's connection is lost while its answers are held back: nobody will
        read them, so the relay connection is closed, and its backend ends as PostgreSQL's
        own does when its client leaves (it stayed blocked writing to dpgate for good).
        The exchanges fail as for any lost relay connection, which wakes the session's
        task to its end. A client that only shut its side for writing still reads."""
        if self._paused and self.relay is not None and self.transport.is_closing():
            self.relay.close()

    def _client_caught_up(self) -> None:
        if self._paused and self.relay is not None:
            self._paused = False
            self.relay.writer.transport.resume_reading()  # type: ignore[attr-defined]
