"""The extended query protocol (Parse, Bind, Describe, Execute, Close, Sync, Flush).

Relayed statements (catalog, public tables, session commands) live on the relay backend
under the client's own names: their messages are forwarded as they come and their
answers read only when the proxy needs them (before it answers a message itself, or at
Sync), so a pipelined client costs one round trip per Sync. Private aggregates and dp.*
settings live here: analysed once per Parse, described without running anything, charged
once per Execute. After an error every message up to Sync is skipped, as PostgreSQL does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rewriter.errors import SYNTAX_ERROR, Refusal
from rewriter.plan import (
    EmptyStatement,
    Plan,
    PrivateAggregate,
    Relay,
    SetDpSetting,
    ShowDpSetting,
)

from ..pgwire import wire
from ..pgwire.backend import Parameters
from .session import Session, StatementError

PROTOCOL_VIOLATION = "08P01"
DUPLICATE_STATEMENT = "42P05"
DUPLICATE_CURSOR = "42P03"
UNDEFINED_STATEMENT = "26000"
UNDEFINED_CURSOR = "34000"
# Forwarded messages whose answers may wait unread; past this, they are read at once.
MAX_PENDING = 256
# The backend message that completes each forwarded client message.
COMPLETES = {b"P": b"1", b"B": b"2", b"C": b"3", b"D": b"Tn", b"E": b"CIs"}


@dataclass
class Prepared:
    """A parsed statement. Relayed ones exist on the backend; the others only here."""

    text: str
    plan: Plan
    parameter_types: tuple[int, ...] = ()
    columns: tuple[tuple[str, int], ...] = ()  # result columns; none: NoData

    @property
    def relayed(self) -> bool:
        return isinstance(self.plan, Relay)


@dataclass
class Portal:
    """A bound statement; a private one keeps its encoded answer to resume after a limit."""

    prepared: Prepared
    parameters: Parameters | None = None
    formats: tuple[int, ...] = ()  # result format of each column
    rows: list[bytes] | None = None
    sent: int = 0

    @property
    def relayed(self) -> bool:
        return self.prepared.relayed


class ExtendedProtocol:
    """One session's prepared statements and portals, and its place in the message flow."""

    def __init__(self, session: Session):
        self.session = session
        self.statements: dict[str, Prepared] = {}
        self.portals: dict[str, Portal] = {}
        # Forwarded messages whose completion is unread, each with what undoes its entry
        # here if the backend refuses it (or skips it after refusing an earlier one).
        self.pending: list[tuple[bytes, Callable[[], None]]] = []
        self.forwarded = False  # something went to the backend since the last Sync
        self.skipping = False  # an error happened: skip until Sync
        self.own_error = False  # the proxy (not the backend) raised it
        session.forget_prepared = self.forget
        self._handlers = {b"P": self._parse, b"B": self._bind, b"D": self._describe,
                          b"E": self._execute, b"C": self._close, b"H": self._flush}

    async def handle(self, kind: bytes, payload: bytes) -> None:
        if kind == b"S":
            await self.sync()
            return
        if self.skipping:
            return
        try:
            if not self.forwarded and not self.pending:  # between batches: a fresh relay
                await self.session.ensure_relay()
            await self._handlers[kind](payload)
        except _Skipped:
            pass
        except StatementError as error:
            await self.settle()  # forwarded answers come first; their error would stand
            if not self.skipping:
                self.session.send(error.response)
                self.skipping = self.own_error = True

    async def sync(self) -> None:
        """End of a batch: sync the backend if it took part, then ReadyForQuery."""
        relay = self.session.relay
        if self.forwarded:
            relay.send(wire.SYNC)
            await self._read_relay(until=b"Z")
            self.pending.clear()
            self.forwarded = False
        if self.own_error:
            await self.session.fail_open_transaction()
        if relay.status == b"I":  # the transaction ended, and every portal with it
            self.portals.clear()
        self.skipping = self.own_error = False
        self.session.send(wire.ready_for_query(relay.status))

    async def settle(self) -> None:
        """Read the answers of forwarded messages, so the proxy's own come after them."""
        if self.pending:
            self.session.relay.send(wire.FLUSH)
            await self._read_relay(until=b"")

    async def _own_turn(self) -> None:
        """Before the proxy answers a message itself: earlier answers first, and none of
        its own if one of them was an error."""
        await self.settle()
        if self.skipping:
            raise _Skipped()

    async def _read_relay(self, until: bytes) -> None:
        """Pass the backend's answers to the client until every pending message has
        completed (until=b"") or until a message of kind `until`."""
        session = self.session
        relay = session.relay
        session.running = relay
        try:
            await relay.flush()
            while until or self.pending:
                kind, payload = await relay.read()
                if kind == b"Z":
                    return
                session.send(wire.message(kind, payload))
                await session.relieve()
                if kind == b"E":
                    for _, undo in self.pending:
                        undo()
                    self.pending.clear()
                    self.skipping = True
                elif self.pending and kind in COMPLETES[self.pending[0][0]]:
                    self.pending.pop(0)
        finally:
            session.running = None

    async def _forward(self, message: bytes, undo: Callable[[], None] = lambda: None
                       ) -> None:
        self.session.relay.send(message)
        self.pending.append((message[:1], undo))
        self.forwarded = True
        if len(self.pending) >= MAX_PENDING:  # a client that never syncs: read as we go
            await self.settle()

    def forget(self, statement: str | None) -> None:
        """DEALLOCATE or DISCARD ran: drop one statement (None: all, and every portal)."""
        if statement is None:
            self.statements.clear()
            self.portals.clear()
        else:
            self.statements.pop(statement, None)

    async def _parse(self, payload: bytes) -> None:
        parse = wire.read_parse(payload)
        if parse.statement and parse.statement in self.statements:
            raise StatementError(DUPLICATE_STATEMENT,
                                 f'prepared statement "{parse.statement}" already exists')
        try:
            statements = await self.session.statements(parse.query)
        except Refusal as refusal:  # a syntax error
            raise await self.session.refused(parse.query, refusal,
                                             types=parse.parameter_types) from None
        if len(statements) > 1:
            raise StatementError(SYNTAX_ERROR,
                                 "cannot insert multiple commands into a prepared statement")
        plan = statements[0].plan
        if isinstance(plan, Refusal):
            raise await self.session.refused(parse.query, plan, types=parse.parameter_types)
        if isinstance(plan, Relay):
            prepared = self.statements[parse.statement] = Prepared(parse.query, plan)
            # plan.text: the statement as classified (row counts neutralised, say).
            await self._forward(
                wire.parse_message(parse.statement, plan.text, parse.parameter_types),
                undo=lambda: _drop(self.statements, parse.statement, prepared))
            return
        await self._own_turn()
        self.statements[parse.statement] = await self._prepare(parse.query, plan,
                                                               parse.parameter_types)
        self.session.send(wire.PARSE_COMPLETE)

    async def _prepare(self, text: str, plan: Plan, types: tuple[int, ...]) -> Prepared:
        if isinstance(plan, PrivateAggregate):
            shape = await self.session.describe_private(text, plan, types)
            return Prepared(text, plan, tuple(shape.parameters), tuple(shape.columns))
        if isinstance(plan, ShowDpSetting):
            return Prepared(text, plan, columns=tuple(self.session.show_columns(plan)))
        return Prepared(text, plan)

    async def _bind(self, payload: bytes) -> None:
        bind = wire.read_bind(payload)
        prepared = self._statement(bind.statement)
        if bind.portal and bind.portal in self.portals:
            raise StatementError(DUPLICATE_CURSOR, f'portal "{bind.portal}" already exists')
        if prepared.relayed:
            portal = self.portals[bind.portal] = Portal(prepared)
            await self._forward(wire.message(b"B", payload),
                                undo=lambda: _drop(self.portals, bind.portal, portal))
            return
        await self._own_turn()
        expected = len(prepared.parameter_types)
        if len(bind.values) != expected:
            raise StatementError(PROTOCOL_VIOLATION,
                                 f"bind message supplies {len(bind.values)} parameters, but "
                                 f'prepared statement "{bind.statement}" requires {expected}')
        parameters = Parameters(prepared.parameter_types,
                                _formats(bind.parameter_formats, expected, "parameter"),
                                bind.values)
        formats = _formats(bind.result_formats, len(prepared.columns), "result")
        self.portals[bind.portal] = Portal(prepared, parameters, formats)
        self.session.send(wire.BIND_COMPLETE)

    async def _describe(self, payload: bytes) -> None:
        kind, name = wire.read_target(payload)
        if kind == b"S":
            prepared, formats = self._statement(name), ()
        else:
            portal = self._portal(name)
            prepared, formats = portal.prepared, portal.formats
        if prepared.relayed:
            await self._forward(wire.message(b"D", payload))
            return
        await self._own_turn()
        if kind == b"S":
            self.session.send(wire.parameter_description(prepared.parameter_types))
        self.session.send(wire.row_description(prepared.columns, formats)
                          if prepared.columns else wire.NO_DATA)

    async def _execute(self, payload: bytes) -> None:
        name, limit = wire.read_execute(payload)
        portal = self._portal(name)
        if portal.relayed:
            await self._forward(wire.message(b"E", payload))
            return
        await self._own_turn()
        session, plan = self.session, portal.prepared.plan
        session.refuse_if_aborted(plan)
        if isinstance(plan, EmptyStatement):
            session.send(wire.empty_query_response())
        elif isinstance(plan, SetDpSetting):
            session.set_dp(plan)
        elif portal.rows is None:
            if isinstance(plan, PrivateAggregate):
                answer = await session.private_answer(portal.prepared.text, plan,
                                                      portal.parameters)
            else:
                assert isinstance(plan, ShowDpSetting)
                answer = await session.show(plan)
            portal.rows = await session.encode(answer, portal.formats)
            self._send_rows(portal, limit)
            if answer.notice:
                session.send(wire.notice_response(answer.notice))
        else:
            self._send_rows(portal, limit)

    def _send_rows(self, portal: Portal, limit: int) -> None:
        rows = portal.rows or []
        end = len(rows) if not limit else min(len(rows), portal.sent + limit)
        for row in rows[portal.sent:end]:
            self.session.send(row)
        count, portal.sent = end - portal.sent, end
        if limit and end < len(rows):
            self.session.send(wire.PORTAL_SUSPENDED)
        else:
            show = isinstance(portal.prepared.plan, ShowDpSetting)
            self.session.send(wire.command_complete("SHOW" if show else f"SELECT {count}"))

    async def _close(self, payload: bytes) -> None:
        kind, name = wire.read_target(payload)
        table: dict = self.statements if kind == b"S" else self.portals
        closed = table.pop(name, None)
        if closed is not None and closed.relayed:
            await self._forward(wire.message(b"C", payload))
            return
        await self._own_turn()
        self.session.send(wire.CLOSE_COMPLETE)

    async def _flush(self, _: bytes) -> None:
        await self.settle()

    def _statement(self, name: str) -> Prepared:
        prepared = self.statements.get(name)
        if prepared is None:
            raise StatementError(UNDEFINED_STATEMENT,
                                 f'prepared statement "{name}" does not exist')
        return prepared

    def _portal(self, name: str) -> Portal:
        portal = self.portals.get(name)
        if portal is None:
            raise StatementError(UNDEFINED_CURSOR, f'portal "{name}" does not exist')
        return portal


class _Skipped(Exception):
    """A forwarded message failed: this one is skipped, as everything up to Sync."""


def _drop(table: dict, name: str, entry: object) -> None:
    if table.get(name) is entry:
        del table[name]


def _formats(codes: tuple[int, ...], count: int, what: str) -> tuple[int, ...]:
    """Bind's format codes expanded to one per value: none is text, one applies to all."""
    if any(code not in (0, 1) for code in codes):
        raise StatementError(PROTOCOL_VIOLATION, f"unsupported format code in {what} formats")
    if not codes:
        return (0,) * count
    if len(codes) == 1:
        return codes * count
    if len(codes) != count:
        raise StatementError(PROTOCOL_VIOLATION,
                             f"bind message has {len(codes)} {what} formats but {count} "
                             f"{what}s")
    return codes

