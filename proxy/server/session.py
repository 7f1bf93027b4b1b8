"""One analyst's session on one client connection: its place in the protocol (one Phase,
with explicit transitions), the simple query protocol, the relay connection, and what
both protocols share (a failed transaction, ReadyForQuery, the engine's answers)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from enum import Enum
from typing import assert_never

from accounting import Analyst
from rewriter.analysis.classify import Statement
from rewriter.errors import Refusal
from rewriter.plan import (
    ColumnProbe,
    Composite,
    EmptyStatement,
    Plan,
    PrivateAggregate,
    Relay,
    SetDpSetting,
    ShowDpSetting,
)
from rewriter.sqlstate import SqlState

from ..engine.dispatch import Engine
from ..engine.errors import AlreadyReported, StatementError
from ..engine.outcome import Answer, Outcome, Reply
from ..ops import SessionOps
from ..pgwire import wire
from ..pgwire.backend import BackendConnection, BackendError, Parameters
from ..pgwire.client_stream import ClientReader
from ..pgwire.codes import Frontend, TransactionStatus
from ..pgwire.outbox import Outbox
from ..pgwire.running import Running
from .prepared import PreparedStatements
from .relay import Exchange, RelayLane

# Puts the backend's open transaction into the failed state after a refusal, so the
# transaction behaves as PostgreSQL's would after any error.
_FAIL_TRANSACTION = b"DO $$BEGIN RAISE EXCEPTION 'dpgate: statement failed'; END$$"


class Phase(Enum):
    """Where a session is in the protocol. Only Session changes it, along _NEXT."""

    IDLE = "idle"  # waits for its client between statements: the transport may relay
    RELAYING = "relaying"  # statements the transport relayed are in flight, nothing else
    BUSY = "busy"  # the session's task handles a message from its client
    BATCH = "batch"  # waits for its client inside an extended-protocol batch (till Sync)
    CLOSED = "closed"

    # Looked up in _NEXT at each transition, two per relayed statement: by identity (an
    # Enum's own hash is a Python call).
    __hash__ = object.__hash__


_NEXT = {
    Phase.IDLE: {Phase.RELAYING, Phase.BUSY, Phase.CLOSED},
    Phase.RELAYING: {Phase.IDLE, Phase.CLOSED},
    Phase.BUSY: {Phase.IDLE, Phase.BATCH, Phase.CLOSED},
    Phase.BATCH: {Phase.BUSY, Phase.CLOSED},
    Phase.CLOSED: set(),
}


class Session:
    """A client's session. `outbox` queues messages for the client; `reconnect` opens a
    new relay connection with the session's startup settings. Relayed statements go
    through the relay routine (relay.py), from this task or from the client's transport
    callback (fast_relay.py)."""

    def __init__(self, analyst: Analyst, engine: Engine, relay: BackendConnection,
                 reconnect: Callable[[], Awaitable[BackendConnection]],
                 reader: ClientReader, writer: asyncio.StreamWriter, outbox: Outbox,
                 prepared: PreparedStatements, running: Running,
                 ops: SessionOps | None = None):
        self.analyst = analyst
        self.engine = engine
        self.reconnect = reconnect
        self.reader = reader
        self.send = outbox.send
        self.prepared = prepared
        self.running = running
        # Where statement decisions are reported (metrics, audit log, console).
        self.ops = ops or SessionOps()
        self.phase = Phase.IDLE
        self._relayed: asyncio.Future[None] | None = None  # woken when RELAYING ends
        self.task = asyncio.current_task()
        assert reader.protocol is not None
        self.lane = RelayLane(self, reader.protocol, writer, outbox)
        self.relay = relay
        self.lane.attach(relay)

    # The protocol phase.

    def _enter(self, phase: Phase) -> None:
        if phase not in _NEXT[self.phase]:
            raise RuntimeError(f"a session cannot go from {self.phase.value} to "
                               f"{phase.value}")
        self.phase = phase

    async def begin(self) -> None:
        """The task has a message to handle: once what the transport relayed before it
        is answered (answers keep their order)."""
        while self.phase is Phase.RELAYING:
            self._relayed = asyncio.get_running_loop().create_future()
            await self._relayed
        self._enter(Phase.BUSY)

    def end(self, batch_open: bool) -> None:
        """The task handled its message and waits for the next."""
        self._enter(Phase.BATCH if batch_open else Phase.IDLE)

    def close(self) -> None:
        if self.phase is not Phase.CLOSED:
            self._enter(Phase.CLOSED)
        self.lane.close()
        self.relay.close()

    def may_relay(self) -> bool:
        """Whether the client's transport may relay what it received now: the task waits
        for the client at a message boundary, outside a batch, on a live connection."""
        return (self.phase is Phase.IDLE or self.phase is Phase.RELAYING) and \
            self.reader.at_rest() and not self.lane.unfinished and self.relay.alive

    def relay_from_transport(self, message: bytes, exchange: Exchange) -> None:
        """Relay a whole Query or batch the client sent, from its transport callback."""
        if self.phase is Phase.IDLE:
            self._enter(Phase.RELAYING)
        self.lane.open(message, exchange)

    def relayed_all(self) -> None:
        """Every relayed statement is answered (relay.py): the task may act again."""
        if self.phase is not Phase.RELAYING:
            return
        self._enter(Phase.IDLE)
        reader = self.reader
        if reader.idle_timeout:
            reader.touch(self.relay.status != TransactionStatus.IDLE)
        if self._relayed is not None and not self._relayed.done():
            self._relayed.set_result(None)
        if reader.stopping and reader.waiting and self.task is not None:
            self.task.cancel()  # the proxy is stopping: end the session now it is idle

    def ready_for_query(self) -> bytes:
        """Every ReadyForQuery the client gets (but those relayed as PostgreSQL sent
        them, after `client_ready`)."""
        self.client_ready()
        return wire.ready_for_query(self.relay.status)

    def client_ready(self) -> None:
        """The client gets ReadyForQuery: outside a transaction, no portal outlives it (a
        transaction ended, COMMIT…)."""
        if self.relay.status == TransactionStatus.IDLE and self.prepared.portals:
            self.prepared.portals.clear()

    # The simple query protocol.

    async def simple_query(self, sql: str) -> None:
        """Answer one Query message, ending with ReadyForQuery."""
        try:
            statements = await self.engine.plan(sql)
        except Refusal as refusal:
            statements = [Statement(sql, 0, refusal)]
        except StatementError as error:
            self.ops.refused(sql, error.sqlstate)
            self.send(error.to_response())
            await self.fail_open_transaction()
            statements = []
        for statement in statements:
            try:
                await self._run(statement)
            except StatementError as error:
                self.send(error.to_response())
                await self.fail_open_transaction()
                break
        self.send(self.ready_for_query())

    async def fail_open_transaction(self) -> None:
        """After an error of the proxy's own, fail the backend's open transaction too."""
        if self.relay.status == TransactionStatus.IN_TRANSACTION:
            await self.lane.exchange(wire.message(Frontend.QUERY, _FAIL_TRANSACTION + b"\0"),
                                     Exchange(None, "", quiet=True))

    async def _run(self, statement: Statement) -> None:
        plan = statement.plan
        match plan:
            case Refusal():
                with self.ops.statement(plan, statement.text):
                    raise await self.engine.refused(statement.text, plan, statement.offset)
            case Relay():  # reported by the relay routine
                await self._relay(plan, statement.text)
            case (PrivateAggregate() | Composite() | SetDpSetting() | ShowDpSetting()
                  | EmptyStatement() | ColumnProbe()):
                with self.ops.statement(plan, statement.text):
                    self.refuse_if_aborted(plan)
                    match await self.engine.answer(statement):
                        case Answer() as answer:
                            self._send_answer(answer)
                        case Reply() as reply:
                            self.send(reply.message)
            case _:
                assert_never(plan)

    async def execute(self, text: str, plan: Plan, parameters: Parameters | None = None,
                      offset: int = 0) -> Outcome:
        """A plan dpgate answers itself, from either protocol: refused inside a failed
        transaction, else the engine's answer."""
        self.refuse_if_aborted(plan)
        return await self.engine.execute(text, plan, parameters, offset)

    def refuse_if_aborted(self, plan: Plan) -> None:
        """Inside a failed transaction only relayed statements (ROLLBACK…) may run."""
        if self.relay.status == TransactionStatus.FAILED and not isinstance(plan, Relay):
            raise StatementError(
                SqlState.IN_FAILED_SQL_TRANSACTION,
                "current transaction is aborted, commands ignored until end of "
                "transaction block"
            )

    async def _relay(self, plan: Relay, text: str) -> None:
        try:
            await self.ensure_relay()
        except StatementError as error:
            self.ops.relayed(plan, text, error.sqlstate, 0.0)
            raise
        sqlstate = await self.lane.exchange(
            wire.message(Frontend.QUERY, plan.text.encode() + b"\0"), Exchange(plan, text))
        if sqlstate is not None:  # PostgreSQL's error, passed on already
            raise AlreadyReported(sqlstate)
        if plan.resets_dp:
            self.engine.settings.clear()
        if plan.deallocates_all or plan.deallocates:
            self.prepared.forget(None if plan.deallocates_all else plan.deallocates)

    async def ensure_relay(self) -> None:
        """Reconnect the relay connection if PostgreSQL closed it (a restart, a terminated
        backend) while it was idle, and prepare the session's relayed statements again on
        it (prepared.py), so that the client's prepared statements go on working. Inside
        a transaction that transaction is gone, which the client is told; outside one the
        statement goes on, on the new connection."""
        if self.relay.alive:
            return
        in_transaction = self.relay.status != TransactionStatus.IDLE
        self.relay.close()
        try:
            self.relay = await self.reconnect()
            refused = await self.prepared.prepare_again(self.relay)
        except (OSError, asyncio.IncompleteReadError, BackendError) as error:
            self.relay.status = TransactionStatus.IDLE
            code = getattr(error, "sqlstate", SqlState.CONNECTION_FAILURE)
            raise StatementError(code, "dpgate cannot reach its database at the moment",
                                 hint="Ask again in a moment.") from None
        self.lane.attach(self.relay)
        lost = f"; prepared statements {', '.join(refused)} could not be prepared " \
            "again" if refused else ""
        self.send(wire.notice_response("dpgate: the connection to the database was renewed; "
                                       f"settings made with SET are reset{lost}"))
        if in_transaction:
            raise StatementError(SqlState.CONNECTION_FAILURE,
                                 "the connection to the database was lost "
                                 "and the open transaction with it")

    def _send_answer(self, answer: Answer) -> None:
        self.send(wire.row_description(answer.columns))
        for row in answer.text_rows():
            self.send(row)
        self.send(wire.command_complete(answer.tag))
        if answer.notice:
            self.send(wire.notice_response(answer.notice))
