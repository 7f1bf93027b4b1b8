"""One analyst's session: run each statement of a query string the way its plan says."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from accounting import (
    Analyst,
    BudgetExceeded,
    Charged,
    ChargeRequest,
    Ledger,
    Repeated,
    fingerprint,
)
from mechanisms.random_source import RandomSource
from rewriter.classify import Statement, classify
from rewriter.errors import INVALID_PARAMETER_VALUE, UNDEFINED_OBJECT, Refusal
from rewriter.plan import (
    EmptyStatement,
    PrivateAggregate,
    Relay,
    SetDpSetting,
    ShowDpSetting,
)

from . import wire
from .backend import BackendConnection, BackendError, BackendPool
from .config import Config
from .release import release_counts

MECHANISM = "shifted_laplace"
BUDGET_EXHAUSTED = "53400"
DATA_EXCEPTION = "22000"
# Puts the backend's open transaction into the failed state after a refusal, so the
# transaction behaves as PostgreSQL's would after any error.
_FAIL_TRANSACTION = b"DO $$BEGIN RAISE EXCEPTION 'dpgate: statement failed'; END$$"


class StatementError(Exception):
    """An error to report for one statement; the rest of the query string is skipped."""

    def __init__(self, code: str, text: str, hint: str | None = None,
                 position: int | None = None):
        super().__init__(text)
        self.response = wire.error_response(code, text, hint, position)


@dataclass
class Session:
    analyst: Analyst
    config: Config
    ledger: Ledger
    relay: BackendConnection
    pool: BackendPool
    rng: RandomSource
    send: Callable[[bytes], None]
    settings: dict[str, str] = field(default_factory=dict)
    running: BackendConnection | None = None

    @property
    def epsilon(self) -> float:
        return float(self.settings.get("dp.epsilon", self.config.privacy.default_epsilon))

    async def simple_query(self, sql: str) -> None:
        """Answer one Query message, ending with ReadyForQuery."""
        try:
            statements = classify(sql, self.config.policy)
        except Refusal as refusal:
            statements = [Statement(sql, 0, refusal)]
        for statement in statements:
            try:
                await self._run(statement)
            except StatementError as error:
                self.send(error.response)
                await self._fail_open_transaction()
                break
        self.send(wire.ready_for_query(self.relay.status))

    async def _fail_open_transaction(self) -> None:
        if self.relay.status == b"T":
            await self.relay.relay(wire.message(b"Q", _FAIL_TRANSACTION + b"\0"), lambda _: None)

    async def _run(self, statement: Statement) -> None:
        plan = statement.plan
        if isinstance(plan, Refusal):
            raise StatementError(plan.sqlstate, plan.message, plan.hint, plan.position)
        if self.relay.status == b"E" and not isinstance(plan, Relay):
            raise StatementError(
                "25P02", "current transaction is aborted, commands ignored until end of "
                "transaction block"
            )
        if isinstance(plan, EmptyStatement):
            self.send(wire.empty_query_response())
        elif isinstance(plan, Relay):
            await self._relay(plan)
        elif isinstance(plan, SetDpSetting):
            self._set(plan)
        elif isinstance(plan, ShowDpSetting):
            await self._show(plan)
        elif isinstance(plan, PrivateAggregate):
            await self._private_aggregate(statement.text, plan)

    async def _relay(self, plan: Relay) -> None:
        self.running = self.relay
        try:
            ok = await self.relay.relay(
                wire.message(b"Q", plan.text.encode() + b"\0"), self.send
            )
        finally:
            self.running = None
        if not ok:
            raise _AlreadyReported()
        if plan.resets_dp:
            self.settings.clear()

    def _set(self, plan: SetDpSetting) -> None:
        if plan.name != "dp.epsilon":
            raise StatementError(UNDEFINED_OBJECT,
                                 f'unrecognized configuration parameter "{plan.name}"',
                                 hint="dpgate knows dp.epsilon.")
        if plan.value is None:
            self.settings.pop(plan.name, None)
        else:
            try:
                value = float(plan.value)
            except ValueError:
                value = -1.0
            if not 0 < value < float("inf"):
                raise StatementError(INVALID_PARAMETER_VALUE,
                                     f"dp.epsilon must be a positive number, not {plan.value}")
            self.settings[plan.name] = repr(value)
        self.send(wire.command_complete("RESET" if plan.value is None else "SET"))

    async def _show(self, plan: ShowDpSetting) -> None:
        if plan.name == "dp.epsilon":
            self._send_rows([("dp.epsilon", wire.TEXT_OID)], [[repr(self.epsilon)]], "SHOW")
        elif plan.name == "dp.budget":
            budget = await asyncio.to_thread(self.ledger.budget, self.analyst.name)
            columns = [(name, wire.FLOAT8_OID) for name in (
                "epsilon_total", "epsilon_spent", "epsilon_left", "delta_total", "delta_spent")]
            columns.append(("queries", wire.INT8_OID))
            values = [budget.epsilon_total, budget.epsilon_spent, budget.epsilon_left,
                      budget.delta_total, budget.delta_spent, budget.queries]
            self._send_rows(columns, [[repr(v) for v in values]], "SHOW")
        else:
            raise StatementError(UNDEFINED_OBJECT,
                                 f'unrecognized configuration parameter "{plan.name}"',
                                 hint="dpgate knows dp.epsilon and dp.budget.")

    def _send_rows(self, columns: list[tuple[str, int]], rows: list[list[str]], tag: str) -> None:
        self.send(wire.row_description(columns))
        for row in rows:
            self.send(wire.data_row(row))
        self.send(wire.command_complete(tag if tag == "SHOW" else f"{tag} {len(rows)}"))

    async def _private_aggregate(self, text: str, plan: PrivateAggregate) -> None:
        epsilon = self.epsilon
        async with self.pool.connection() as backend:
            # Parse only: schema errors (a misspelt column) surface here, before any charge,
            # and cannot depend on the rows.
            try:
                await backend.check(plan.sql)
            except BackendError as error:
                raise StatementError(error.sqlstate, error.fields.get("M", "error"),
                                     error.fields.get("H")) from None
            request = ChargeRequest(
                analyst=self.analyst.name, statement=text,
                fingerprint=fingerprint(plan.fingerprint_text, epsilon, 0.0, MECHANISM),
                epsilon=epsilon, delta=0.0, mechanism=MECHANISM,
                sensitivity=max(c.sensitivity for c in plan.columns),
            )
            try:
                outcome = await asyncio.to_thread(self.ledger.charge_or_repeat, request)
            except BudgetExceeded as exceeded:
                raise StatementError(BUDGET_EXHAUSTED, str(exceeded),
                                     hint="Ask the data owner for more budget, or lower "
                                     "dp.epsilon.") from None
            if isinstance(outcome, Repeated):
                rows = outcome.rows
                notice = (f"dpgate: repeated question, the stored answer is returned and "
                          f"nothing is charged (epsilon left {outcome.budget.epsilon_left:g} "
                          f"of {outcome.budget.epsilon_total:g})")
            else:
                rows, notice = await self._answer(backend, plan, epsilon, outcome)
        columns = [(column.name, wire.INT8_OID) for column in plan.columns]
        self._send_rows(columns, [[str(v) for v in row] for row in rows], "SELECT")
        self.send(wire.notice_response(notice))

    async def _answer(self, backend: BackendConnection, plan: PrivateAggregate,
                      epsilon: float, charged: Charged) -> tuple[list[list[int]], str]:
        self.running = backend
        try:
            true_rows = await backend.fetch(plan.sql)
        except (BackendError, OSError, asyncio.IncompleteReadError):
            await asyncio.to_thread(self.ledger.record_failure, charged.charge_id, "failed")
            # The failure may depend on the rows, so neither its detail nor a refund.
            raise StatementError(
                DATA_EXCEPTION,
                f"the query failed while reading private data; its charge of epsilon "
                f"{epsilon:g} is kept",
            ) from None
        finally:
            self.running = None
        true_values = [int(v) if v is not None else 0 for v in true_rows[0]]
        release = release_counts(plan, true_values, epsilon, self.analyst.shift,
                                 self.config.privacy, self.rng)
        rows = [release.values]
        await asyncio.to_thread(self.ledger.record_answer, charged.charge_id, rows)
        level = round(self.config.privacy.confidence * 100)
        bounds = ", ".join(
            f"{c.name} ±{b}" for c, b in zip(plan.columns, release.bounds, strict=True))
        budget = charged.budget
        notice = (f"dpgate: charged epsilon {epsilon:g}, epsilon left "
                  f"{budget.epsilon_left:g} of {budget.epsilon_total:g}; "
                  f"{level}% accuracy: {bounds}")
        return rows, notice


class _AlreadyReported(StatementError):
    """The backend's own ErrorResponse was relayed already."""

    def __init__(self) -> None:
        Exception.__init__(self, "relayed error")
        self.response = b""
