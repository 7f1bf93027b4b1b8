"""Plain relayed traffic handled in the transports' callbacks, without the session's task.

A session reads its client in its own task, and a relayed statement read that way wakes
that task twice (the client's message, then PostgreSQL's answer): with asyncio streams
that is most of what relaying costs (bench/README.md, passthrough). FastRelay takes a
statement over when, and only when, all of this holds:

- the session waits for its client with nothing in flight: nothing unread from the
  client, nothing queued for it, no extended-protocol batch open, no error being
  skipped, the relay connection alive, the proxy not stopping;
- the bytes that arrived hold whole messages that the session would relay unchanged:
  a Query whose text the plan cache holds as one statement relayed as written and with
  no effect on the session's own state (not DISCARD, DEALLOCATE or RESET of dp.*), or a
  batch Bind/Describe/Execute … Sync whose statements and portals are relayed ones.

Those go to the relay connection at once, and PostgreSQL's answers go to the client as
they come, up to and including their ReadyForQuery, whose status the relay connection
keeps. Anything else, and everything after it, goes to the session's stream as before;
the session waits for the relayed answers to be complete before it acts on it, so
answers keep their order. Decisions are reported to proxy/ops as the session reports
them, portals are kept as the session keeps them, and a CancelRequest reaches the
statement in flight.
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections import deque
from dataclasses import dataclass

from rewriter.plan import Relay
from rewriter.sqlstate import SqlState

from ..pgwire import wire
from ..pgwire.backend import BackendConnection
from ..pgwire.client_stream import ClientReader
from ..pgwire.codes import Backend, ErrorField, Frontend, Target, TransactionStatus
from ..pgwire.errors import relay_lost
from ..pgwire.outbox import Outbox
from .extended import ExtendedProtocol
from .prepared import Portal
from .session import Session

_QUERY, _BIND, _DESCRIBE, _EXECUTE, _SYNC = (ord(kind) for kind in (
    Frontend.QUERY, Frontend.BIND, Frontend.DESCRIBE, Frontend.EXECUTE, Frontend.SYNC))
_READY, _ERROR, _SETTING = (ord(kind) for kind in (
    Backend.READY_FOR_QUERY, Backend.ERROR_RESPONSE, Backend.PARAMETER_STATUS))
_LENGTH = struct.Struct("!i")


@dataclass(slots=True)
class _InFlight:
    """A statement (or an extended batch) relayed, whose ReadyForQuery is awaited."""

    plan: Relay | None  # a Query's, reported at its end; None for a batch
    text: str
    started: float
    portals: tuple[str, ...] = ()  # portals the batch created
    sqlstate: str | None = None  # of PostgreSQL's first ErrorResponse


class FastRelay:
    """One session's fast lane; `close` unhooks it."""

    def __init__(self, session: Session, extended: ExtendedProtocol, reader: ClientReader,
                 writer: asyncio.StreamWriter, outbox: Outbox, max_message: int):
        self.session = session
        self.extended = extended
        self.reader = reader
        self.writer = writer
        self.outbox = outbox
        self.max_message = max_message
        self.in_flight: deque[_InFlight] = deque()
        self.unfinished = bytearray()  # the start of PostgreSQL's next message
        self.hooked: BackendConnection | None = None
        self.task = asyncio.current_task()
        self._drained: asyncio.Future[None] | None = None
        self._paused = False
        assert reader.protocol is not None
        self.client = reader.protocol
        self.client.hook = self.from_client
        self.client.on_pause_writing = self._client_full
        self.client.on_resume_writing = self._client_caught_up

    def close(self) -> None:
        self.client.hook = self.client.on_pause_writing = self.client.on_resume_writing = None
        self._unhook()

    async def drained(self) -> None:
        """Wait until every relayed statement has its answer (before the session acts)."""
        while self.in_flight:
            self._drained = asyncio.get_running_loop().create_future()
            await self._drained

    # The client's side.

    def from_client(self, data: bytes) -> bytes:
        """The bytes that arrived from the client: relay the leading statements that
        qualify, and return the rest for the session's stream."""
        if not self._ready():
            return data
        at = 0
        while at < len(data):
            try:
                end = self._take(data, at)
            except wire.ProtocolError:  # the session's stream reports it, in its turn
                end = None
            if end is None:
                break
            at = end
        if not at:
            return data
        self.reader.relaying = len(self.in_flight)
        self.session.running.set(self.session.relay)
        return data[at:]

    def _ready(self) -> bool:
        reader, extended, relay = self.reader, self.extended, self.session.relay
        if not (reader.waiting and not reader.pending() and not reader.stopping
                and not self.outbox.parts and not extended.pending and not extended.forwarded
                and not extended.skipping and not self.unfinished):
            return False
        if relay is not self.hooked:
            if self.in_flight or not relay.alive or relay.protocol is None:
                return False
            self._unhook()
            relay.protocol.hook = self.from_backend
            relay.protocol.on_closed = self._relay_lost
            self.hooked = relay
        return relay.alive

    def _take(self, data: bytes, at: int) -> int | None:
        """Relay the statement (or batch) at `at` if it qualifies: where it ends."""
        end = self._end(data, at)
        if end is None:
            return None
        if data[at] == _QUERY:
            return self._query(data, at, end)
        return self._batch(data, at)

    def _end(self, data: bytes, at: int) -> int | None:
        """Where the whole message at `at` ends, None if it has not all arrived."""
        if len(data) - at < 5:
            return None
        (length,) = _LENGTH.unpack_from(data, at + 1)
        if length < 4 or length > self.max_message:
            return None  # the session's stream reports the broken message
        end = at + 1 + length
        return end if end <= len(data) else None

    def _query(self, data: bytes, at: int, end: int) -> int | None:
        sql, _ = wire.cstring(data[at + 5:end])
        statements = self.session.engine.cached(sql)
        if statements is None or len(statements) != 1:
            return None
        plan = statements[0].plan
        if type(plan) is not Relay or plan.resets_dp or plan.deallocates_all or \
                plan.deallocates:
            return None
        message = data[at:end] if plan.text == sql else \
            wire.message(Frontend.QUERY, plan.text.encode() + b"\0")
        self.session.relay.writer.write(message)
        self.in_flight.append(_InFlight(plan, statements[0].text, time.perf_counter()))
        return end

    def _batch(self, data: bytes, at: int) -> int | None:
        """Bind, Describe and Execute of relayed statements up to a Sync, all arrived."""
        extended = self.extended
        created: dict[str, Portal] = {}
        executed: list[Portal] = []
        start = at
        while True:
            end = self._end(data, at)
            if end is None:
                return None
            kind, payload = data[at], data[at + 5:end]
            if kind == _SYNC:
                break
            if kind == _BIND:
                name, statement = wire.bind_names(payload)
                prepared = extended.statements.get(statement)
                if prepared is None or not prepared.relayed or name in created or (
                        name and name in extended.portals):
                    return None
                created[name] = Portal(prepared)
            elif kind == _DESCRIBE:
                target, name = wire.read_target(payload)
                found = extended.statements.get(name) if target == Target.STATEMENT else \
                    created.get(name) or extended.portals.get(name)
                if found is None or not found.relayed:
                    return None
            elif kind == _EXECUTE:
                portal = created.get(wire.read_execute(payload)[0])
                if portal is None:  # only portals bound in this batch: no stale entries
                    return None
                executed.append(portal)
            else:
                return None
            at = end
        extended.portals.update(created)
        for portal in executed:  # reported when forwarded, as the session does
            self.session.ops.relayed(portal.prepared.plan, portal.prepared.text, None, 0.0)
        self.session.relay.writer.write(data[start:end])
        self.in_flight.append(_InFlight(None, "", time.perf_counter(), tuple(created)))
        return end

    # PostgreSQL's side.

    def from_backend(self, data: bytes) -> bytes:
        """The bytes that arrived from the relay connection: pass the answers of relayed
        statements to the client; return what follows the last of them."""
        if not self.in_flight:
            return data
        if self.unfinished:
            self.unfinished += data
            data, self.unfinished = bytes(self.unfinished), bytearray()
        relay = self.hooked
        assert relay is not None
        at = 0
        while self.in_flight:
            end = self._end(data, at)
            if end is None:
                break
            kind = data[at]
            if kind == _READY:
                relay.status = data[at + 5:at + 6]
                self._finish(self.in_flight.popleft(), relay.status)
            elif kind == _ERROR and self.in_flight[0].sqlstate is None:
                self.in_flight[0].sqlstate = wire.parse_error_fields(
                    data[at + 5:end]).get(ErrorField.SQLSTATE, "")
            elif kind == _SETTING:
                name, offset = wire.cstring(data, at + 5)
                relay.parameters[name] = wire.cstring(data, offset)[0]
            at = end
        if at:
            self.writer.write(data[:at])
        if self.in_flight:
            self.unfinished += data[at:]
            return b""
        self._idle()
        return data[at:]

    def _finish(self, done: _InFlight, status: bytes) -> None:
        if done.plan is not None:
            self.session.ops.relayed(done.plan, done.text, done.sqlstate,
                                     time.perf_counter() - done.started)
        if status == TransactionStatus.IDLE:
            self.extended.portals.clear()  # the transaction ended, and its portals with it
        elif done.sqlstate is not None:
            for name in done.portals:  # the batch failed: PostgreSQL kept none of them
                self.extended.portals.pop(name, None)

    def _idle(self) -> None:
        """Every relayed statement answered: the session may act again."""
        self.reader.relaying = 0
        self.session.running.set(None)
        self.reader.touch(self.session.relay.status != TransactionStatus.IDLE)
        if self._paused:
            self._client_caught_up()
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
        if self.reader.stopping and self.reader.waiting and self.task is not None:
            self.task.cancel()  # the proxy is stopping: end the session now it is idle

    # A client slow to read: stop reading its answers from PostgreSQL meanwhile.

    def _client_full(self) -> None:
        if self.in_flight and self.hooked is not None and not self._paused:
            self.hooked.writer.transport.pause_reading()  # type: ignore[attr-defined]
            self._paused = True

    def _client_caught_up(self) -> None:
        if self._paused and self.hooked is not None:
            self._paused = False
            self.hooked.writer.transport.resume_reading()  # type: ignore[attr-defined]

    def _relay_lost(self) -> None:
        """PostgreSQL closed the relay connection: what was in flight fails, as the
        session's own relay fails (08006); the session reconnects for the next one."""
        if not self.in_flight:
            return
        relay = self.hooked
        assert relay is not None
        relay.status = TransactionStatus.IDLE
        while self.in_flight:
            done = self.in_flight.popleft()
            done.sqlstate = SqlState.CONNECTION_FAILURE
            self.writer.write(relay_lost().to_response() + wire.ready_for_query(relay.status))
            self._finish(done, relay.status)
        self.unfinished.clear()
        self._idle()

    def _unhook(self) -> None:
        if self.hooked is not None and self.hooked.protocol is not None:
            self.hooked.protocol.hook = self.hooked.protocol.on_closed = None
        self.hooked = None
