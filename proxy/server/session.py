"""One analyst's session: run each statement of a query string the way its plan says."""

from __future__ import annotations

import asyncio
import logging
import math
import sqlite3
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from accounting import (
    Analyst,
    Budget,
    BudgetExceeded,
    Charged,
    ChargeRequest,
    Ledger,
    Repeated,
    Standing,
    as_written,
    charge_answer,
    charge_failure,
    fingerprint,
    look_up,
)
from mechanisms.random_source import RandomSource
from rewriter.calibrate import MECHANISMS, Calibration
from rewriter.classify import Statement, classify
from rewriter.computed import with_rows
from rewriter.errors import INVALID_PARAMETER_VALUE, UNDEFINED_OBJECT, Refusal
from rewriter.metrics import ColumnKey, MissingMetrics
from rewriter.outer import with_answer
from rewriter.plan import (
    EmptyStatement,
    Plan,
    PrivateAggregate,
    Relay,
    SetDpSetting,
    ShowDpSetting,
)
from rewriter.policy_view import POLICY_COLUMNS, policy_rows

from ..config import Config
from ..engine.knowledge import Knowledge
from ..engine.limits import (
    INLINE_ANALYSIS_SIZE,
    PROGRAM_LIMIT_EXCEEDED,
    STATEMENT_TOO_COMPLEX,
    TooMuchWork,
    check_statement,
)
from ..engine.literals import LiftedStatement, lift, relayed_as_written, usable
from ..engine.plan_cache import PlanCache, calibrate_cached
from ..engine.plan_check import PlanChecker
from ..engine.release import Release, release, result_columns
from ..engine.workers import Workers
from ..pgwire import wire
from ..pgwire.backend import BackendConnection, BackendError, BackendPool, Described, Parameters

log = logging.getLogger("dpgate.session")
T = TypeVar("T")

_MULTIPLE_COMMANDS = "cannot insert multiple commands into a prepared statement"
UNDEFINED_FUNCTION = "42883"
_DPGATE_FUNCTIONS = ("function median(",)
BUDGET_EXHAUSTED = "53400"
DISK_FULL = "53100"
CONNECTION_FAILURE = "08006"
IO_ERROR = "58030"
# Answers with more rows than this are noised on a worker thread.
INLINE_RELEASE_ROWS = 64
DATA_EXCEPTION = "22000"
# SHOW dp.budget
BUDGET_COLUMNS = [(name, wire.FLOAT8_OID) for name in (
    "epsilon_total", "epsilon_spent", "epsilon_left", "delta_total", "delta_spent")
] + [("queries", wire.INT8_OID)]
# SHOW dp.policy
POLICY_ANSWER_COLUMNS = [(name, wire.TEXT_OID) for name in POLICY_COLUMNS]
# Puts the backend's open transaction into the failed state after a refusal, so the
# transaction behaves as PostgreSQL's would after any error.
_FAIL_TRANSACTION = b"DO $$BEGIN RAISE EXCEPTION 'dpgate: statement failed'; END$$"


def _positive(text: str) -> str:
    value = float(text)
    if not 0 < value < math.inf:
        raise ValueError(text)
    return repr(value)


def _probability(text: str) -> str:
    value = float(text)
    if not 0 <= value < 1:
        raise ValueError(text)
    return repr(value)


def _mechanism(text: str) -> str:
    if text.lower() not in MECHANISMS:
        raise ValueError(text)
    return text.lower()


# Session settings: name -> (parser to the stored text, what a valid value is).
DP_SETTINGS: dict[str, tuple[Callable[[str], str], str]] = {
    "dp.epsilon": (_positive, "a positive number"),
    "dp.delta": (_probability, "a number from 0 to 1 (excluded)"),
    "dp.mechanism": (_mechanism, "one of " + ", ".join(MECHANISMS)),
}


async def _nothing() -> None:
    pass


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
    knowledge: Knowledge
    plans: PlanCache
    checker: PlanChecker
    workers: Workers
    # Opens a new relay connection with the session's startup settings.
    reconnect: Callable[[], Awaitable[BackendConnection]]
    settings: dict[str, str] = field(default_factory=dict)
    running: BackendConnection | None = None
    # Told when DEALLOCATE (a name, or None for all) or DISCARD ALL ran on the backend.
    forget_prepared: Callable[[str | None], None] = lambda _: None
    # Waits while the client is slow to read what `send` queued (streams long answers).
    relieve: Callable[[], Awaitable[None]] = _nothing

    @property
    def epsilon(self) -> float:
        return float(self.settings.get("dp.epsilon", self.config.privacy.default_epsilon))

    @property
    def delta(self) -> float:
        return float(self.settings.get("dp.delta", self.config.privacy.default_delta))

    @property
    def mechanism(self) -> str:
        return self.settings.get("dp.mechanism", self.config.privacy.default_mechanism)

    async def simple_query(self, sql: str) -> None:
        """Answer one Query message, ending with ReadyForQuery."""
        try:
            statements = await self._lifted(sql) or await self.statements(sql)
        except Refusal as refusal:
            statements = [Statement(sql, 0, refusal)]
        except StatementError as error:
            self.send(error.response)
            await self.fail_open_transaction()
            statements = []
        for statement in statements:
            try:
                await self._run(statement)
            except StatementError as error:
                self.send(error.response)
                await self.fail_open_transaction()
                break
        self.send(wire.ready_for_query(self.relay.status))

    async def statements(self, sql: str) -> list[Statement]:
        """Plans for a query string, from the cache or the rewriter.

        A join column met for the first time is measured (maxFreq) and the string is
        analysed again, so a metric is never guessed.
        """
        knowledge = self.knowledge
        if not knowledge.catalog_loaded:
            await self._learn()
        for _ in range(2):
            key = (sql, knowledge.metrics.version)
            cached = self.plans.get(key)
            if cached is not None:
                return cached
            try:
                statements = await self._analyse(sql)
            except MissingMetrics as missing:
                await self._learn(missing.columns)
                continue
            self.plans.put(key, statements)
            return statements
        raise StatementError(DATA_EXCEPTION, "dpgate could not measure the join metrics")

    async def _lifted(self, sql: str) -> list[Statement] | None:
        """The plan of the string with its literals lifted as parameters (literals.py),
        shared by every statement of that shape, if it answers with parameters."""
        if self.plans.get((sql, self.knowledge.metrics.version)) is not None:
            return None  # planned as written already (a relayed statement, say)
        lifted = lift(sql) if len(sql) <= INLINE_ANALYSIS_SIZE else None
        if lifted is None:
            return None
        try:
            statements = await self.statements(lifted.text)
        except (Refusal, StatementError):
            return None  # the original text gets its own analysis and its own error
        if relayed_as_written(statements, lifted):
            # Which tables and functions a statement reads does not depend on its WHERE
            # literals: the original text is relayed, unchanged, as its shape would be.
            return [Statement(sql, 0, Relay(sql))]
        if not usable(statements):
            return None
        return [LiftedStatement(lifted.text, 0, statements[0].plan, lifted.parameters, sql)]

    async def _analyse(self, sql: str) -> list[Statement]:
        """classify(), within the limits of limits.py; a long text on a worker thread."""
        server = self.config.server
        try:
            check_statement(sql, server.max_statement_size, server.max_nesting)
            arguments = (sql, self.config.policy, self.knowledge.metrics)
            if len(sql) <= INLINE_ANALYSIS_SIZE:
                return classify(*arguments)
            async with asyncio.timeout(server.analysis_timeout):
                return await self.workers.cpu(classify, *arguments)
        except TooMuchWork as limit:
            raise StatementError(limit.sqlstate, limit.message, limit.hint) from None
        except RecursionError:
            raise StatementError(STATEMENT_TOO_COMPLEX, "statement is too complex for dpgate "
                                 "to analyse", hint="Split it or simplify it.") from None
        except TimeoutError:
            raise StatementError(PROGRAM_LIMIT_EXCEEDED, "dpgate gave up analysing the "
                                 f"statement after {server.analysis_timeout:g} s",
                                 hint="Ask a shorter or simpler statement.") from None

    async def _learn(self, columns: tuple[ColumnKey, ...] = ()) -> None:
        """Load the column names (once per process) and measure maxFreq of `columns`."""
        async with self.pool.connection() as backend:
            try:
                if not self.knowledge.catalog_loaded:
                    await self.knowledge.load_catalog(backend)
                if columns:
                    await self.knowledge.measure(backend, columns)
            except BackendError as error:  # a misspelt join column, say
                raise StatementError(error.sqlstate, error.fields.get("M", "error"),
                                     error.fields.get("H")) from None

    async def fail_open_transaction(self) -> None:
        """After an error of the proxy's own, fail the backend's open transaction too."""
        if self.relay.status == b"T":
            await self.relay.relay(wire.message(b"Q", _FAIL_TRANSACTION + b"\0"), lambda _: None)

    async def _run(self, statement: Statement) -> None:
        plan = statement.plan
        if isinstance(plan, Refusal):
            raise await self.refused(statement.text, plan, statement.offset)
        self.refuse_if_aborted(plan)
        if isinstance(plan, EmptyStatement):
            self.send(wire.empty_query_response())
        elif isinstance(plan, Relay):
            await self._relay(plan)
        elif isinstance(plan, SetDpSetting):
            self.set_dp(plan)
        elif isinstance(plan, ShowDpSetting):
            self._send_answer(await self.show(plan))
        elif isinstance(plan, PrivateAggregate) and isinstance(statement, LiftedStatement):
            try:
                answer = await self.private_answer(statement.text, plan, statement.parameters,
                                                   asked_as=statement.original)
            except _FreeError:  # answered as written instead, with its own error
                for original in await self.statements(statement.original):
                    await self._run(original)
                return
            self._send_answer(answer)
        elif isinstance(plan, PrivateAggregate):
            self._send_answer(await self.private_answer(statement.text, plan,
                                                        offset=statement.offset))

    async def _forward(self, data: bytes) -> None:
        self.send(data)
        await self.relieve()

    def refuse_if_aborted(self, plan: Plan) -> None:
        """Inside a failed transaction only relayed statements (ROLLBACK…) may run."""
        if self.relay.status == b"E" and not isinstance(plan, Relay):
            raise StatementError(
                "25P02", "current transaction is aborted, commands ignored until end of "
                "transaction block"
            )

    async def encode(self, answer: Answer, formats: tuple[int, ...]) -> list[bytes]:
        """DataRow messages of an answer in the client's result formats."""
        if not any(formats):
            return [wire.data_row(row) for row in answer.rows]
        async with self.pool.connection() as backend:
            try:
                return await backend.encode(answer.rows, [oid for _, oid in answer.columns],
                                            list(formats))
            except BackendError as error:
                raise StatementError("XX000", f"dpgate could not encode its answer: {error}"
                                     ) from None

    async def _relay(self, plan: Relay) -> None:
        await self.ensure_relay()
        self.running = self.relay
        try:
            ok = await self.relay.relay(
                wire.message(b"Q", plan.text.encode() + b"\0"), self._forward
            )
        except (OSError, asyncio.IncompleteReadError):
            self.relay.status = b"I"
            raise StatementError(CONNECTION_FAILURE, "the connection to the database was lost "
                                 "while the statement ran", hint="Ask again: dpgate "
                                 "reconnects. Settings made with SET are reset.") from None
        finally:
            self.running = None
        if not ok:
            raise _AlreadyReported()
        if plan.resets_dp:
            self.settings.clear()
        if plan.deallocates_all or plan.deallocates:
            self.forget_prepared(None if plan.deallocates_all else plan.deallocates)

    def set_dp(self, plan: SetDpSetting) -> None:
        """SET or RESET a dp.* setting of this session; sends CommandComplete."""
        if plan.name not in DP_SETTINGS:
            raise StatementError(UNDEFINED_OBJECT,
                                 f'unrecognized configuration parameter "{plan.name}"',
                                 hint=f"dpgate knows {', '.join(DP_SETTINGS)}.")
        if plan.value is None:
            self.settings.pop(plan.name, None)
        else:
            parse, what = DP_SETTINGS[plan.name]
            # SET's value comes as tokens: "- 1" is the number -1.
            written = plan.value.strip("'").replace(" ", "")
            try:
                value = parse(written)
            except ValueError:
                raise StatementError(INVALID_PARAMETER_VALUE,
                                     f"{plan.name} must be {what}{self._range(plan.name)}, "
                                     f"not {written}") from None
            self._check_range(plan.name, value)
            self.settings[plan.name] = value
        self.send(wire.command_complete("RESET" if plan.value is None else "SET"))

    async def ensure_relay(self) -> None:
        """Reconnect the relay connection if PostgreSQL closed it (a restart, a terminated
        backend) while it was idle. Inside a transaction that transaction is gone, which
        the client is told; outside one the statement goes on, on the new connection."""
        if self.relay.alive:
            return
        in_transaction = self.relay.status != b"I"
        self.relay.close()
        try:
            self.relay = await self.reconnect()
        except (OSError, asyncio.IncompleteReadError, BackendError) as error:
            self.relay.status = b"I"
            code = getattr(error, "sqlstate", CONNECTION_FAILURE)
            raise StatementError(code, "dpgate cannot reach its database at the moment",
                                 hint="Ask again in a moment.") from None
        self.forget_prepared(None)
        self.send(wire.notice_response("dpgate: the connection to the database was renewed; "
                                       "settings made with SET are reset"))
        if in_transaction:
            raise StatementError(CONNECTION_FAILURE, "the connection to the database was lost "
                                 "and the open transaction with it")

    async def _ledger(self, pool: Callable[..., Awaitable[T]], call: Callable[..., T],
                      *args: object) -> T:
        """A ledger call on its worker pool; a storage failure is this statement's error
        (nothing is released without its charge), never the end of the session."""
        try:
            return await pool(call, *args)
        except sqlite3.Error as error:
            log.error("privacy ledger failure: %s", error)
            full = "full" in str(error).lower()
            raise StatementError(
                DISK_FULL if full else IO_ERROR,
                "the privacy ledger " + ("is out of disk space" if full else
                                         "could not be read or written") +
                "; nothing was released", hint="Tell the data owner.") from None

    def _range(self, name: str) -> str:
        privacy = self.config.privacy
        if name == "dp.epsilon":
            return f" between {privacy.min_epsilon:g} and {privacy.max_epsilon:g}"
        if name == "dp.delta":
            return f" (0, or between {privacy.min_delta:g} and {privacy.max_delta:g})"
        return ""

    def _check_range(self, name: str, value: str) -> None:
        """ε and δ within the data owner's floor and ceiling (a zero δ stays allowed: it
        refuses every query that needs one)."""
        privacy = self.config.privacy
        ranges = {"dp.epsilon": (privacy.min_epsilon, privacy.max_epsilon, "epsilon"),
                  "dp.delta": (privacy.min_delta, privacy.max_delta, "delta")}
        if name not in ranges or (name == "dp.delta" and float(value) == 0):
            return
        low, high, setting = ranges[name]
        if not low <= float(value) <= high:
            raise StatementError(
                INVALID_PARAMETER_VALUE,
                f"{name} must be between {low:g} and {high:g}, not {float(value):g}",
                hint=f"The data owner sets the range (privacy.min_{setting}, "
                f"privacy.max_{setting}).")

    async def show(self, plan: ShowDpSetting) -> Answer:
        """SHOW dp.epsilon / dp.delta / dp.mechanism / dp.budget / dp.policy."""
        if plan.name in DP_SETTINGS:
            value = {"dp.epsilon": repr(self.epsilon), "dp.delta": repr(self.delta),
                     "dp.mechanism": self.mechanism}[plan.name]
            return Answer([(plan.name, wire.TEXT_OID)], [[value]], "SHOW")
        if plan.name == "dp.budget":
            budget = await self._ledger(self.workers.ledger_read, self.ledger.budget,
                                        self.analyst.name)
            values = [budget.epsilon_total, budget.epsilon_spent, budget.epsilon_left,
                      budget.delta_total, budget.delta_spent, budget.queries]
            return Answer(BUDGET_COLUMNS, [[repr(as_written(v) if isinstance(v, float) else v)
                                            for v in values]], "SHOW")
        if plan.name == "dp.policy":
            if not self.knowledge.catalog_loaded:
                await self._learn()
            rows = policy_rows(self.config.policy, self.knowledge.metrics.columns)
            return Answer(POLICY_ANSWER_COLUMNS, rows, f"SELECT {len(rows)}")
        raise StatementError(UNDEFINED_OBJECT,
                             f'unrecognized configuration parameter "{plan.name}"',
                             hint=f"dpgate knows {', '.join(DP_SETTINGS)}, dp.budget and "
                             "dp.policy.")

    def show_columns(self, plan: ShowDpSetting) -> list[tuple[str, int]]:
        """The columns `show` answers with, for Describe (which must not run anything)."""
        if plan.name == "dp.policy":
            return POLICY_ANSWER_COLUMNS
        return BUDGET_COLUMNS if plan.name == "dp.budget" else [(plan.name, wire.TEXT_OID)]

    def _send_answer(self, answer: Answer) -> None:
        self.send(wire.row_description(answer.columns))
        for row in answer.rows:
            self.send(wire.data_row(row))
        self.send(wire.command_complete(answer.tag))
        if answer.notice:
            self.send(wire.notice_response(answer.notice))

    async def refused(self, text: str, refusal: Refusal, offset: int = 0,
                      types: tuple[int, ...] = ()) -> StatementError:
        """The error for a query dpgate refuses: PostgreSQL's own where PostgreSQL would
        fail too (a misspelt function, a syntax error, a type mismatch), else dpgate's.

        Only Parse and Describe run, which read catalogs, never rows.
        """
        # What dpgate refuses by name (a function, a catalog) stays refused in its words,
        # whatever extensions this PostgreSQL happens to have installed.
        if " is refused" not in refusal.message:
            async with self.pool.connection() as backend:
                try:
                    await backend.describe(text, types)
                except BackendError as error:
                    if not _ours(error):
                        return _backend_error(error, offset)
        return StatementError(refusal.sqlstate, refusal.message, refusal.hint,
                              refusal.position)

    async def describe_private(self, text: str, plan: PrivateAggregate,
                               types: tuple[int, ...] = (), offset: int = 0) -> Shape:
        """Parse the statement and its rewritten SQL on the backend without running them
        (no charge).

        Schema errors (a misspelt column) surface here and cannot depend on the rows.
        """
        async with self.pool.connection() as backend:
            written = await self._as_written(backend, text, plan, types, offset)
            sql = await self._prepare(backend, plan, None, check=False)
            return await self._shape(backend, written, sql, plan, types, None)

    async def _prepare(self, backend: BackendConnection, plan: PrivateAggregate,
                       parameters: Parameters | None, check: bool = True) -> str:
        """The SQL to run, its constants computed and its plan checked, before any charge."""
        try:
            return await self.checker.prepare(backend, plan, parameters, check)
        except Refusal as refusal:
            raise StatementError(refusal.sqlstate, refusal.message, refusal.hint) from None
        except BackendError as error:
            raise StatementError(error.sqlstate, error.fields.get("M", "error"),
                                 error.fields.get("H")) from None

    @staticmethod
    async def _as_written(backend: BackendConnection, text: str, plan: PrivateAggregate,
                          types: tuple[int, ...], offset: int) -> Described | None:
        """PostgreSQL's parse analysis of the statement as written: its own errors come
        before any of dpgate's (the rewritten SQL names tables otherwise)."""
        if not plan.postgres_sql:
            return None
        try:
            return await backend.describe(text, types)
        except BackendError as error:
            raise _backend_error(error, offset) from None

    async def _shape(self, backend: BackendConnection, written: Described | None, sql: str,
                     plan: PrivateAggregate, types: tuple[int, ...],
                     parameters: Parameters | None) -> Shape:
        """The rewritten SQL's key types and the columns of the answer.

        The statement as PostgreSQL reads it (`written`) gives the names and types of the
        columns it would return, which the answer then has. A statement using dpgate's
        own aggregates (median) is not PostgreSQL's, so its columns are dpgate's.
        """
        described = await self._describe(backend, sql, types, parameters)
        key_types = [type_oid for _, type_oid in described.columns[:plan.keys]]
        outer = written
        if plan.outer_sql is not None:  # `written` is the outer query; the answer is inner
            written = await self._as_written(backend, plan.inner_sql, plan, types, 0)
        columns = result_columns(plan, key_types)
        if written is not None and len(written.columns) == len(columns):
            columns = written.columns
        released = (await backend.describe(plan.probe_sql, types)).columns \
            if plan.probe_sql is not None else []
        oids = tuple(t for _, t in released + columns)
        names = self.checker.type_names.get(oids)  # an OID names one type for good
        if names is None:
            names = await _type_names(backend, list(oids))
            self.checker.type_names.put(oids, names)
        return Shape(described.parameters, key_types,
                     outer.columns if plan.outer_sql is not None and outer else columns,
                     [(name, t) for name, (_, t) in zip(names[:len(released)], released,
                                                        strict=True)],
                     columns, names[len(released):])

    @staticmethod
    async def _describe(backend: BackendConnection, sql: str,
                        types: tuple[int, ...], parameters: Parameters | None = None
                        ) -> Described:
        try:
            return await backend.describe(sql, types, parameters)
        except BackendError as error:
            raise StatementError(error.sqlstate, error.fields.get("M", "error"),
                                 error.fields.get("H")) from None

    async def private_answer(self, text: str, plan: PrivateAggregate,
                             parameters: Parameters | None = None, offset: int = 0,
                             asked_as: str | None = None) -> Answer:
        """Run, noise and charge one private aggregate (or return its stored answer).

        `asked_as` is the text the analyst wrote when `text` is its lifted form: an error
        before the charge then raises _FreeError, to be answered from the text as written
        (whose error positions and wording are the analyst's own).
        """
        epsilon, mechanism = self.epsilon, self.mechanism
        bound = _parameters_text(parameters)
        async with self.pool.connection() as backend:
            try:
                calibration, sql, shape = await self._before_charge(
                    backend, text, plan, parameters, offset)
            except StatementError:
                if asked_as is not None:
                    raise _FreeError() from None
                raise
            # Computed constants (current_date…) are part of the question asked.
            asked = bound + (f" -- computed: {sql}" if plan.constants else "")
            request = ChargeRequest(
                analyst=self.analyst.name,
                statement=text + bound if asked_as is None else asked_as,
                fingerprint=fingerprint(plan.fingerprint_text + asked, epsilon,
                                        calibration.delta, mechanism),
                epsilon=calibration.epsilon, delta=calibration.delta, mechanism=mechanism,
                sensitivity=max((p.elastic_sensitivity for p in calibration.parts), default=0),
            )
            # The stored answer or the budget and shift: a read, no fsync. The one commit
            # comes after the query ran (_answer): check, charge and answer together.
            prior = await self._ledger(self.workers.ledger_read, look_up, self.ledger,
                                       self.analyst.name, request.fingerprint)
            if isinstance(prior, Standing):
                if not prior.budget.fits(request.epsilon, request.delta):
                    raise _exhausted(BudgetExceeded(request.epsilon, prior.budget,
                                                    request.delta))
                rows, notice, prior = await self._answer(backend, sql, plan, calibration,
                                                         shape, prior.shift, parameters,
                                                         request)
            if isinstance(prior, Repeated):
                rows = prior.rows
                notice = (f"dpgate: repeated question, the stored answer is returned and "
                          f"nothing is charged (epsilon left {prior.budget.epsilon_left:g} "
                          f"of {prior.budget.epsilon_total:g})")
        return Answer(shape.columns, rows, f"SELECT {len(rows)}", notice)

    async def _before_charge(self, backend: BackendConnection, text: str,
                             plan: PrivateAggregate, parameters: Parameters | None,
                             offset: int) -> tuple[Calibration, str, Shape]:
        """Everything that may fail for free: calibration, PostgreSQL's parse of the
        statement, constants, the plan check and the answer's shape."""
        try:
            calibration = calibrate_cached.get(plan, self.epsilon, self.delta, self.mechanism)
            if calibration is None:
                # The first calibration of a join scans the smooth sensitivity: off the loop.
                calibration = await self.workers.cpu(calibrate_cached, plan, self.epsilon,
                                                     self.delta, self.mechanism)
        except Refusal as refusal:
            raise StatementError(refusal.sqlstate, refusal.message, refusal.hint) from None
        # Bad parameter values fail here, at bind time, before the charge.
        types = parameters.types if parameters else ()
        # The shape of a statement with parameters is the same for all their values
        # (Parse/Describe read catalogs only); the plan check below still binds the
        # client's values, so a bad one fails before the charge.
        remembered = (text, types, plan) if parameters is not None else None
        shape = None if remembered is None else self.checker.shapes.get(remembered)
        written = None if shape is not None else \
            await self._as_written(backend, text, plan, types, offset)
        sql = await self._prepare(backend, plan, parameters)
        if shape is None:
            shape = await self._shape(backend, written, sql, plan, types, parameters)
            if remembered is not None:
                self.checker.shapes.put(remembered, shape)
        return calibration, sql, shape

    async def _answer(self, backend: BackendConnection, sql: str, plan: PrivateAggregate,
                      calibration: Calibration, shape: Shape, shift: float,
                      parameters: Parameters | None, request: ChargeRequest
                      ) -> tuple[list[list[str | None]], str, Charged | Repeated]:
        """Run the rewritten query, noise it, then charge and store the answer in one
        durable commit, before anything is sent. A failure of the query may depend on the
        rows: it is charged too (and reported only once charged)."""
        self.running = backend
        try:
            result = await backend.fetch(sql, parameters)
        except (BackendError, OSError, asyncio.IncompleteReadError) as error:
            log.warning("private query failed and is charged (%s): %.200s",
                        getattr(error, "sqlstate", type(error).__name__), sql)
            await self._charge_failure(request)
            # The failure may depend on the rows, so neither its detail nor a refund.
            raise StatementError(
                DATA_EXCEPTION,
                f"the query failed while reading private data; its charge of epsilon "
                f"{calibration.epsilon:g} is kept",
            ) from None
        finally:
            self.running = None
        for _ in range(3):  # a rotation of the shift meanwhile: noise again with the new one
            rows, answer = await self._released(backend, plan, calibration, shape, shift,
                                                result.rows, parameters, request)
            try:
                outcome = await self._ledger(self.workers.ledger_write, charge_answer,
                                             self.ledger, request, shift, rows)
            except BudgetExceeded as exceeded:
                raise _exhausted(exceeded) from None
            if isinstance(outcome, Repeated):
                return outcome.rows, "", outcome
            if isinstance(outcome, Charged):
                return rows, answer_notice(plan, calibration, answer, outcome.budget,
                                           self.config.privacy.confidence), outcome
            shift = outcome.shift
        raise StatementError(IO_ERROR, "the analyst's secret shift kept changing; nothing "
                             "was released", hint="Ask again.")

    async def _released(self, backend: BackendConnection, plan: PrivateAggregate,
                        calibration: Calibration, shape: Shape, shift: float,
                        true_rows: list, parameters: Parameters | None,
                        request: ChargeRequest) -> tuple[list[list[str | None]], Release]:
        """The noisy answer as the client will see it (post-processing included)."""
        arguments = (plan, calibration, shape.key_types, true_rows, shift,
                     self.config.privacy, self.rng,
                     shape.released if plan.post_sql else shape.answer)
        # Noise for a large histogram, or the exponential mechanism's sampling, takes long.
        large = len(true_rows) > INLINE_RELEASE_ROWS or any(p.choice for p in plan.parts)
        answer = await self.workers.cpu(release, *arguments) if large else release(*arguments)
        rows = answer.rows
        if plan.post_sql is not None:
            sql = with_rows(plan.post_sql, rows, [name for name, _ in shape.released])
            rows = await self._post_processed(backend, sql, parameters, request)
        if plan.outer_sql is not None:
            sql = with_answer(plan.outer_sql, plan.outer_alias, rows, [
                (name, type_name) for (name, _), type_name in
                zip(shape.answer, shape.answer_types, strict=True)])
            rows = await self._post_processed(backend, sql, parameters, request)
        return rows, answer

    async def _charge_failure(self, request: ChargeRequest) -> None:
        """Charge a failed question (one commit). Without the budget for it, the failure
        is not reported: the analyst hears that the budget is exhausted."""
        try:
            await self._ledger(self.workers.ledger_write, charge_failure, self.ledger,
                               request, "failed")
        except BudgetExceeded as exceeded:
            raise _exhausted(exceeded) from None

    async def _post_processed(self, backend: BackendConnection, sql: str,
                              parameters: Parameters | None, request: ChargeRequest
                              ) -> list[list[str | None]]:
        """The statement's expressions over the released values only (post-processing).

        Its failure (a noisy count of 0 as a divisor) depends on released values only, so
        PostgreSQL's own error is reported, once the question is charged: the values
        were drawn.
        """
        try:
            result = await backend.fetch(sql, parameters)
        except BackendError as error:
            await self._charge_failure(request)
            raise _backend_error(error, 0) from None
        return [[None if v is None else v.decode() for v in row] for row in result.rows]


def _exhausted(exceeded: BudgetExceeded) -> StatementError:
    return StatementError(BUDGET_EXHAUSTED, str(exceeded), hint="Ask the data owner for more "
                          "budget, or lower dp.epsilon.")


def answer_notice(plan: PrivateAggregate, calibration: Calibration, answer: Release,
                  budget: Budget, confidence: float) -> str:
    """What the analyst is told after a fresh answer: cost, budget left, accuracy."""
    if not plan.parts:
        return ("dpgate: nothing charged: every key of the declared domain is listed, "
                "whatever the data holds")
    spent = f"charged epsilon {calibration.epsilon:g}"
    if calibration.delta:
        spent += f" and delta {calibration.delta:g}"
    lines = [f"dpgate: {spent}, epsilon left {budget.epsilon_left:g} of "
             f"{budget.epsilon_total:g}"]
    if answer.bounds:
        bounds = ", ".join(f"{name} ±{bound}" for name, bound in answer.bounds.items())
        lines.append(f"{round(confidence * 100)}% accuracy: {bounds}")
    elif not calibration.pure:
        lines.append("noise follows the smooth sensitivity of this join, which depends on "
                     "the data, so no accuracy bound is shown")
    if calibration.threshold is not None:
        lines.append("groups are released only when their noisy count passes a threshold "
                     "(key selection)")
    elif plan.grouping is not None:
        lines.append("every key of the declared domain is listed, empty ones with noise")
    if plan.post_sql is not None or plan.outer_sql is not None:
        lines.append("the statement's expressions were computed from the noisy values")
    elif any(o.hidden for o in plan.outputs):
        lines.append("HAVING and ORDER BY used noisy aggregates")
    return "; ".join(lines)


def _parameters_text(parameters: Parameters | None) -> str:
    """How bound values enter the ledger's statement text and the question's fingerprint."""
    if parameters is None or not parameters.values:
        return ""
    shown = []
    for value, fmt in zip(parameters.values, parameters.formats, strict=True):
        if value is None:
            shown.append("NULL")
        elif fmt == 0:
            shown.append("'" + value.decode("utf-8", "replace").replace("'", "''") + "'")
        else:
            shown.append("'\\x" + value.hex() + "'")
    return " -- parameters: " + ", ".join(shown)


def _ours(error: BackendError) -> bool:
    """Whether dpgate's refusal says more than PostgreSQL's error: a query string of several
    statements cannot be parsed in one go, and dpgate's own aggregates are unknown there."""
    text = error.fields.get("M", "")
    return text == _MULTIPLE_COMMANDS or (
        error.sqlstate == UNDEFINED_FUNCTION and text.startswith(_DPGATE_FUNCTIONS))


def _backend_error(error: BackendError, offset: int) -> StatementError:
    """PostgreSQL's error for one statement, its position counted in the whole string."""
    position = error.fields.get("P")
    return StatementError(error.sqlstate, error.fields.get("M", "error"), error.fields.get("H"),
                          int(position) + offset if position and position.isdigit() else None)


@dataclass(frozen=True)
class Shape:
    """What Describe tells of a private aggregate: its parameter types, the rewritten
    query's key types and the columns the client sees."""

    parameters: list[int]
    key_types: list[int]
    columns: list[tuple[str, int]]  # what the client receives
    # For a plan with post_sql: every output's (PostgreSQL type name, type OID).
    released: list[tuple[str, int]]
    # The aggregate's own answer (an outer query's inner one) and its type names.
    answer: list[tuple[str, int]]
    answer_types: list[str]


async def _type_names(backend: BackendConnection, oids: list[int]) -> list[str]:
    """PostgreSQL's names of types, to cast released values to them."""
    if not oids:
        return []
    names = await backend.fetch("SELECT " + ", ".join(f"format_type({oid}, NULL)"
                                                      for oid in oids))
    return [name.decode() if name else "text" for name in names.rows[0]]


@dataclass(frozen=True)
class Answer:
    """Rows the proxy itself answers with (text format), their tag and a NOTICE."""

    columns: list[tuple[str, int]]
    rows: list[list[str | None]]
    tag: str
    notice: str | None = None


class _FreeError(Exception):
    """A lifted statement failed before its charge: answer the text as written."""


class _AlreadyReported(StatementError):
    """The backend's own ErrorResponse was relayed already."""

    def __init__(self) -> None:
        Exception.__init__(self, "relayed error")
        self.response = b""
