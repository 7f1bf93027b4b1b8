"""The extended query protocol (Parse, Bind, Describe, Execute, Close, Sync, Flush).

Relayed statements (catalog, public tables, session commands) live on the relay backend
under the client's own names: their messages are forwarded as they come and their
answers read only when the proxy needs them (before it answers a message itself, or at
Sync), by the relay routine (relay.py), so a pipelined client costs one round trip per
Sync. A batch of relayed Bind/Describe/Execute and its Sync may come from the client's
transport callback instead (`relay_batch`, fast_relay.py): the same steps, the same
routine. Private aggregates and dp.* settings live here: analysed once per Parse,
described without running anything, charged once per Execute. After an error every
message up to Sync is skipped, as PostgreSQL does.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import assert_never

from rewriter.errors import Refusal
from rewriter.plan import (
    ColumnProbe,
    Composite,
    EmptyStatement,
    PrivateAggregate,
    Relay,
    SetDpSetting,
    ShowDpSetting,
)
from rewriter.sqlstate import SqlState

from ..engine.errors import StatementError
from ..engine.outcome import Reply
from ..pgwire import wire
from ..pgwire.codes import Frontend, Target
from .prepared import Portal, Prepared, own_portal
from .relay import Exchange, Undo
from .session import Session

# Forwarded messages whose answers may wait unread; past this, they are read at once.
MAX_PENDING = 256
_BIND, _DESCRIBE, _EXECUTE = (ord(kind) for kind in (
    Frontend.BIND, Frontend.DESCRIBE, Frontend.EXECUTE))


class ExtendedProtocol:
    """One session's prepared statements and portals, and its place in the message flow."""

    def __init__(self, session: Session):
        self.session = session
        # The session's registry: it forgets them when DEALLOCATE or DISCARD ran.
        self.statements = session.prepared.statements
        self.portals = session.prepared.portals
        self.forwarded = False  # something went to the backend since the last Sync
        self.skipping = False  # an error happened: skip until Sync
        self.own_error = False  # the proxy (not the backend) raised it
        self._handlers: dict[bytes, Callable[[bytes], Awaitable[None]]] = {
                          Frontend.PARSE: self._parse_reported, Frontend.BIND: self._bind,
                          Frontend.DESCRIBE: self._describe,
                          Frontend.EXECUTE: self._execute_reported,
                          Frontend.CLOSE: self._close, Frontend.FLUSH: self._flush}

    async def handle(self, kind: bytes, payload: bytes) -> None:
        """One extended-protocol message; after an error, everything up to Sync is skipped."""
        if kind == Frontend.SYNC:
            await self.sync()
            return
        if self.skipping:
            return
        try:
            await self._handlers[kind](payload)
            if self.pending >= MAX_PENDING:  # a client that never syncs: read as we go
                await self.settle()
        except _Skipped:
            pass
        except StatementError as error:
            await self.settle()  # forwarded answers come first; their error would stand
            if not self.skipping:
                self.session.send(error.to_response())
                self.skipping = self.own_error = True

    @property
    def pending(self) -> int:
        """Forwarded messages whose answers are unread (relay.py)."""
        return len(self.session.lane.pending)

    @property
    def batch_open(self) -> bool:
        """Whether messages since the last Sync wait for it (forwarded, or skipped)."""
        return self.forwarded or self.skipping or bool(self.pending)

    async def sync(self) -> None:
        """End of a batch: sync the backend if it took part, then ReadyForQuery."""
        session = self.session
        if self.forwarded:
            await session.lane.exchange(wire.SYNC, Exchange(None, ""))
            self.forwarded = False
        if self.own_error:
            await session.fail_open_transaction()
        self.skipping = self.own_error = False
        session.send(session.ready_for_query())

    async def settle(self) -> None:
        """Read the answers of forwarded messages, so the proxy's own come after them."""
        if self.pending and await self.session.lane.exchange(
                wire.FLUSH, Exchange(None, "", until_ready=False)) is not None:
            self.skipping = True

    async def _own_turn(self) -> None:
        """Before the proxy answers a message itself: earlier answers first, and none of
        its own if one of them was an error."""
        await self.settle()
        if self.skipping:
            raise _Skipped()

    async def _forwarding(self) -> None:
        """Before a message is forwarded: the first of a batch renews a relay connection
        PostgreSQL closed (session.py). Only messages that need the backend wait for it,
        so SHOW dp.budget and the other answers of dpgate's own work while it is down.
        Its answer is read later (handle settles when too many are unread)."""
        if not self.forwarded and not self.pending:
            await self.session.ensure_relay()
        self.forwarded = True

    def relay_batch(self, messages: list[tuple[int, bytes]], sent: bytes) -> bool:
        """Bind, Describe and Execute messages (kind, payload), then Sync, that the client
        `sent` in one piece, relayed from its transport (fast_relay.py) as the task would
        relay them, if each names a relayed statement or portal and Executes only portals
        bound here; else False, and nothing was done: the task handles them."""
        bound: dict[str, Prepared] = {}
        steps: list[tuple[int, str]] = []
        for kind, payload in messages:
            if kind == _BIND:
                name, statement = wire.bind_names(payload)
                prepared = self.statements.get(statement)
                if prepared is None or not prepared.relayed or name in bound or (
                        name and name in self.portals):
                    return False
                bound[name] = prepared
            elif kind == _DESCRIBE:
                target, name = wire.read_target(payload)
                found = self.statements.get(name) if target == Target.STATEMENT else \
                    bound.get(name) or self.portals.get(name)  # bound here: relayed
                if found is None or not found.relayed:
                    return False
            elif kind == _EXECUTE:
                name = wire.read_execute(payload)[0]
                if name not in bound:
                    return False
            else:
                return False
            steps.append((kind, name))
        undo: list[Undo] = []
        for kind, name in steps:
            if kind == _BIND:
                undo.append(self._bound(name, bound[name]))
            else:
                if kind == _EXECUTE:
                    self._report(self.portals[name])
                undo.append(None)
        self.session.relay_from_transport(
            sent, Exchange(None, "", client_ready=True, forwarded=undo))
        return True

    def _relay_bind(self, name: str, prepared: Prepared, message: bytes) -> None:
        self.session.lane.forward(message, undo=self._bound(name, prepared))

    def _bound(self, name: str, prepared: Prepared) -> Undo:
        """A relayed Bind's portal, kept: what drops it again if PostgreSQL refuses it."""
        portal = self.portals[name] = Portal(prepared)
        return lambda: _drop(self.portals, name, portal)

    def _relay_execute(self, portal: Portal, message: bytes) -> None:
        self._report(portal)
        self.session.lane.forward(message)

    def _report(self, portal: Portal) -> None:
        """A relayed Execute is reported as a statement decision at its forwarding
        (PostgreSQL's answer is read later, at Sync or Flush)."""
        self.session.ops.relayed(portal.prepared.plan, portal.prepared.text, None, 0.0)

    async def _parse_reported(self, payload: bytes) -> None:
        """Parse, its refusal reported as a statement decision (metrics, audit log)."""
        with self.session.ops.refusals(wire.read_parse(payload).query):
            await self._parse(payload)

    async def _execute_reported(self, payload: bytes) -> None:
        """Execute, reported as a statement decision (a relayed portal's by
        _relay_execute)."""
        name, limit = wire.read_execute(payload)
        portal = self.portals.get(name)
        if portal is None or portal.relayed:  # an unknown portal's error, or relayed
            await self._execute(payload, name, limit)
            return
        with self.session.ops.statement(portal.prepared.plan, portal.prepared.text) as tracker:
            try:
                await self._execute(payload, name, limit)
            except _Skipped:
                tracker.skipped = True  # an earlier message failed: this one never ran
                raise

    async def _parse(self, payload: bytes) -> None:
        parse = wire.read_parse(payload)
        if parse.statement and parse.statement in self.statements:
            raise StatementError(SqlState.DUPLICATE_PREPARED_STATEMENT,
                                 f'prepared statement "{parse.statement}" already exists')
        try:
            statements = await self.session.engine.statements(parse.query)
        except Refusal as refusal:  # a syntax error
            raise await self.session.engine.refused(parse.query, refusal,
                                             types=parse.parameter_types) from None
        if len(statements) > 1:
            raise StatementError(SqlState.SYNTAX_ERROR,
                                 "cannot insert multiple commands into a prepared statement")
        plan = statements[0].plan
        match plan:
            case Refusal():
                raise await self.session.engine.refused(parse.query, plan,
                                                        types=parse.parameter_types)
            case Relay():
                await self._forwarding()
                prepared = self.statements[parse.statement] = Prepared(
                    parse.query, plan, parse.parameter_types)
                # plan.text: the statement as classified (row counts neutralised, say).
                self.session.lane.forward(
                    wire.parse_message(parse.statement, plan.text, parse.parameter_types),
                    undo=lambda: _drop(self.statements, parse.statement, prepared))
            case (PrivateAggregate() | Composite() | SetDpSetting() | ShowDpSetting()
                  | EmptyStatement() | ColumnProbe()):
                await self._own_turn()
                described = await self.session.engine.describe(parse.query, plan,
                                                               parse.parameter_types)
                self.statements[parse.statement] = Prepared(
                    parse.query, plan, described.parameter_types, described.columns)
                self.session.send(wire.PARSE_COMPLETE)
            case _:
                assert_never(plan)

    async def _bind(self, payload: bytes) -> None:
        name, statement = wire.bind_names(payload)
        prepared = self.session.prepared.statement(statement)
        if name and name in self.portals:
            raise StatementError(SqlState.DUPLICATE_CURSOR, f'portal "{name}" already exists')
        if prepared.relayed:
            await self._forwarding()
            self._relay_bind(name, prepared, wire.message(Frontend.BIND, payload))
            return
        bind = wire.read_bind(payload)
        await self._own_turn()
        self.portals[bind.portal] = own_portal(prepared, bind)
        self.session.send(wire.BIND_COMPLETE)

    async def _describe(self, payload: bytes) -> None:
        kind, name = wire.read_target(payload)
        formats: tuple[int, ...] = ()
        if kind == Target.STATEMENT:
            prepared = self.session.prepared.statement(name)
        else:
            portal = self.session.prepared.portal(name)
            prepared, formats = portal.prepared, portal.formats
        if prepared.relayed:
            await self._forwarding()
            self.session.lane.forward(wire.message(Frontend.DESCRIBE, payload))
            return
        await self._own_turn()
        if kind == Target.STATEMENT:
            self.session.send(wire.parameter_description(prepared.parameter_types))
        self.session.send(wire.row_description(prepared.columns, formats)
                          if prepared.columns else wire.NO_DATA)

    async def _execute(self, payload: bytes, name: str, limit: int) -> None:
        portal = self.session.prepared.portal(name)
        if portal.relayed:
            await self._forwarding()
            self._relay_execute(portal, wire.message(Frontend.EXECUTE, payload))
            return
        await self._own_turn()
        session = self.session
        session.refuse_if_aborted(portal.prepared.plan)
        notice = None
        if portal.rows is None:  # else resumed after a row limit
            session.engine.refuse_unencodable(portal.prepared.columns, portal.formats)
            answer = await session.execute(portal.prepared.text, portal.prepared.plan,
                                           portal.parameters)
            if isinstance(answer, Reply):  # nothing kept: a second Execute runs it again
                session.send(answer.message)
                return
            portal.rows = await session.engine.encode(answer, portal.formats)
            notice = answer.notice
        for message in portal.next_rows(limit):
            session.send(message)
        if notice:
            session.send(wire.notice_response(notice))

    async def _close(self, payload: bytes) -> None:
        kind, name = wire.read_target(payload)
        table: dict = self.statements if kind == Target.STATEMENT else self.portals
        closed = table.pop(name, None)
        if closed is not None and closed.relayed:
            await self._forwarding()
            self.session.lane.forward(wire.message(Frontend.CLOSE, payload))
            return
        await self._own_turn()
        self.session.send(wire.CLOSE_COMPLETE)

    async def _flush(self, _: bytes) -> None:
        await self.settle()


class _Skipped(Exception):
    """A forwarded message failed: this one is skipped, as everything up to Sync."""


def _drop(table: dict, name: str, entry: object) -> None:
    if table.get(name) is entry:
        del table[name]

