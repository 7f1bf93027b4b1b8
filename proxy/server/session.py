"""One analyst's session on one client connection: the simple query protocol, the relay
connection, and what both protocols share (a failed transaction, the engine's answers)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from accounting import Analyst
from rewriter.analysis.classify import Statement
from rewriter.errors import Refusal
from rewriter.plan import Plan, Relay
from rewriter.sqlstate import SqlState

from ..engine.dispatch import Engine
from ..engine.errors import AlreadyReported, StatementError
from ..engine.literals import LiftedStatement, LiftFailed
from ..engine.outcome import Answer, Outcome
from ..ops import SessionOps
from ..pgwire import wire
from ..pgwire.backend import BackendConnection, BackendError, Parameters
from ..pgwire.codes import ErrorField, Frontend, TransactionStatus
from ..pgwire.errors import relay_lost
from ..pgwire.running import Running
from .prepared import PreparedStatements

# Puts the backend's open transaction into the failed state after a refusal, so the
# transaction behaves as PostgreSQL's would after any error.
_FAIL_TRANSACTION = b"DO $$BEGIN RAISE EXCEPTION 'dpgate: statement failed'; END$$"


class Session:
    """A client's session. `send` queues a message for the client; `relieve` gives what to
    await while the client is slow to read what was queued, if anything (streams long
    answers); `reconnect` opens a
    new relay connection with the session's startup settings."""

    def __init__(self, analyst: Analyst, engine: Engine, relay: BackendConnection,
                 reconnect: Callable[[], Awaitable[BackendConnection]],
                 send: Callable[[bytes], None], relieve: Callable[[], Awaitable[None] | None],
                 prepared: PreparedStatements, running: Running,
                 ops: SessionOps | None = None):
        self.analyst = analyst
        self.engine = engine
        self.relay = relay
        self.reconnect = reconnect
        self.send = send
        self.relieve = relieve
        self.prepared = prepared
        self.running = running
        # Where statement decisions are reported (metrics, audit log, console).
        self.ops = ops or SessionOps()

    async def simple_query(self, sql: str) -> None:
        """Answer one Query message, ending with ReadyForQuery."""
        try:
            statements = self.engine.cached(sql) or await self.engine.lifted(sql) or \
                await self.engine.statements(sql)
        except Refusal as refusal:
            statements = [Statement(sql, 0, refusal)]
        except StatementError as error:
            self.ops.refused(sql, error.sqlstate)
            self.send(error.to_response())
            await self.fail_open_transaction()
            statements = []
        for statement in statements:
            try:
                with self.ops.statement(statement.plan, statement.text):
                    await self._run(statement)
            except StatementError as error:
                self.send(error.to_response())
                await self.fail_open_transaction()
                break
        self.send(wire.ready_for_query(self.relay.status))

    async def fail_open_transaction(self) -> None:
        """After an error of the proxy's own, fail the backend's open transaction too."""
        if self.relay.status == TransactionStatus.IN_TRANSACTION:
            await self.relay.relay(wire.message(Frontend.QUERY, _FAIL_TRANSACTION + b"\0"),
                                   lambda _: None)

    async def _run(self, statement: Statement) -> None:
        plan = statement.plan
        if isinstance(plan, Refusal):
            raise await self.engine.refused(statement.text, plan, statement.offset)
        if isinstance(plan, Relay):
            await self._relay(plan)
            return
        if isinstance(statement, LiftedStatement):
            try:
                outcome = await self.execute(statement.text, plan, statement.parameters)
            except LiftFailed:  # answered as written instead, with its own error
                for original in await self.engine.statements(statement.parameters.original):
                    await self._run(original)
                return
        else:
            outcome = await self.execute(statement.text, plan, offset=statement.offset)
        if isinstance(outcome, Answer):
            self._send_answer(outcome)
        else:
            self.send(outcome.message)

    async def execute(self, text: str, plan: Plan, parameters: Parameters | None = None,
                      offset: int = 0) -> Outcome:
        """A plan dpgate answers itself, from either protocol: refused inside a failed
        transaction, else the engine's answer."""
        self.refuse_if_aborted(plan)
        return await self.engine.execute(text, plan, parameters, offset)

    def forward(self, data: bytes) -> Awaitable[None] | None:
        """Pass a backend message on to the client: what to await before the next, if the
        client must catch up first."""
        self.send(data)
        return self.relieve()

    def refuse_if_aborted(self, plan: Plan) -> None:
        """Inside a failed transaction only relayed statements (ROLLBACK…) may run."""
        if self.relay.status == TransactionStatus.FAILED and not isinstance(plan, Relay):
            raise StatementError(
                SqlState.IN_FAILED_SQL_TRANSACTION,
                "current transaction is aborted, commands ignored until end of "
                "transaction block"
            )

    async def _relay(self, plan: Relay) -> None:
        if not self.relay.alive:
            await self.ensure_relay()
        try:
            with self.running.on(self.relay):
                error = await self.relay.relay(
                    wire.message(Frontend.QUERY, plan.text.encode() + b"\0"), self.forward
                )
        except (OSError, asyncio.IncompleteReadError):
            self.relay.status = TransactionStatus.IDLE
            raise relay_lost() from None
        if self.relay.status == TransactionStatus.IDLE:
            self.prepared.portals.clear()  # a transaction ended (COMMIT…), its portals too
        if error is not None:  # PostgreSQL's SQLSTATE, for proxy/ops
            raise AlreadyReported(error.get(ErrorField.SQLSTATE, ""))
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
