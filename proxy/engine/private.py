"""Private aggregates: described without running anything, then run, noised and charged.

First, for free, PostgreSQL parses the statement as written (its own errors first),
computes the row-independent constants and checks the rewritten plan. Then the rewritten
SQL runs as dpgate_reader, the rows are released with noise (release.py), expressions over
released values run over those values only, and the budget check, the charge and the
stored answer are one durable commit (accounting/one_commit.py) before anything is sent.

A backend connection is borrowed from the pool only while PostgreSQL works (the checks,
the private query, each post-processing step) and is back in the pool before every ledger
call: a slow fsync, or a wait for the ledger's lock, never keeps other sessions from
PostgreSQL (tests/test_private_connections.py). Post-processing and the probe of its
types borrow from the relay role's pool (`released`): that role cannot read private
tables, and its connections are reset before each use (tests/test_released_values.py).
"""

from __future__ import annotations

import asyncio
import logging
import math
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import cast

from accounting import (
    Analyst,
    AnswerCharge,
    Budget,
    BudgetExceeded,
    Charged,
    ChargeRequest,
    FailureCharge,
    Ledger,
    Repeated,
    Standing,
    charge,
    fingerprint,
    look_up,
    look_up_at_once,
)
from mechanisms.names import Mechanism
from mechanisms.random_source import RandomSource
from rewriter.errors import Refusal
from rewriter.plan import PrivateAggregate
from rewriter.release.computed import with_rows
from rewriter.release.outer import with_answer
from rewriter.release.unit_report import mode_notice
from rewriter.sensitivity.calibrate import Calibration
from rewriter.sqlstate import SqlState

from ..config import Config
from ..pgwire.backend import (
    BackendConnection,
    BackendError,
    BackendPool,
    Described,
    NotExecuted,
    Parameters,
    Row,
)
from ..pgwire.running import Running
from .charge_batches import ChargeBatches
from .connection_loss import connection_loss
from .dp_settings import DpSettings
from .errors import StatementError, client_error, ledger_call
from .fair import FairShares
from .first_rows import split_limit
from .generic_plan import type_names
from .literals import LiftedParameters, LiftFailed
from .outcome import Answer, text_data_rows
from .plan_cache import calibrate_cached
from .plan_check import PlanChecker
from .reader_time import ReaderTime, reader_time
from .recent import RecentAnswer, recent_answer, repeated_answer
from .release import Release, release, result_columns
from .workers import Workers

log = logging.getLogger("dpgate.session")

# Answers with more rows than this are noised and encoded on a worker thread.
INLINE_RELEASE_ROWS = 64
# Told of each charge the ledger made (fingerprint, epsilon, delta, repeated): how the
# operations side (proxy/ops) learns what a statement cost, never what it released.
ChargeReport = Callable[[str, float, float, bool], None]


def _unreported(fingerprint: str, epsilon: float, delta: float, repeated: bool) -> None:
    pass


class PrivateAnswers:
    """One session's private aggregates."""

    def __init__(self, analyst: Analyst, config: Config, ledger: Ledger, pool: BackendPool,
                 rng: RandomSource, checker: PlanChecker, workers: Workers,
                 settings: DpSettings, running: Running,
                 report_charge: ChargeReport | None = None,
                 charges: ChargeBatches | None = None, readers: FairShares | None = None,
                 released: BackendPool | None = None, reader_seconds: ReaderTime | None = None):
        self.analyst = analyst
        self.config = config
        self.ledger = ledger
        self.pool = pool
        # Where SQL over released values and the probes of their types run: the proxy's
        # relay-role pool (server.py); the reader's only in-process setups without one.
        self.released = released or pool
        self.rng = rng
        self.checker = checker
        self.workers = workers
        self.settings = settings
        self.running = running
        self.report_charge = report_charge or _unreported
        # Where charges go to commit: with other sessions' (charge_batches.py).
        self.charges = charges or ChargeBatches(ledger, workers)
        # The analyst's share of the reader connections, shared with the other sessions
        # (fair.py): one analyst's slow statements hold at most
        # backend.private_statements_per_analyst of them.
        self.readers = readers or FairShares(config.backend.pool_size,
                                             config.backend.private_statements_per_analyst)
        # And for how long: every analyst's reader-seconds (reader_time.py), shared too.
        self.reader_seconds = reader_seconds or reader_time(config.backend)
        # Whether the statement under way reached its private query (never retried after:
        # from there a failure may depend on the rows, and is charged).
        self.charging = False
        # The analyst's secret shift as last seen by this session (its login, then each
        # charge): a rotation by the data owner applies to sessions already open.
        self.shift = analyst.shift

    async def describe(self, text: str, plan: PrivateAggregate,
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
        except (Refusal, BackendError) as error:
            raise client_error(error) from None

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
            raise client_error(error, offset) from None

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
        if plan.outer is not None:  # `written` is the outer query; the answer is inner
            written = await self._as_written(backend, plan.outer.inner_sql, plan, types, 0)
        columns = result_columns(plan, key_types)
        if written is not None and len(written.columns) == len(columns):
            columns = written.columns
        released = (await self._probe(plan.computed.probe_sql, types)).columns \
            if plan.computed is not None else []
        oids = tuple(t for _, t in released + columns)
        names = self.checker.type_names.get(oids)  # an OID names one type for good
        if names is None:
            names = await type_names(backend, list(oids))
            self.checker.type_names.put(oids, names)
        return Shape(described.parameters, key_types,
                     outer.columns if plan.outer is not None and outer else columns,
                     [(name, t) for name, (_, t) in zip(names[:len(released)], released,
                                                        strict=True)],
                     columns, names[len(released):])

    async def _probe(self, sql: str, types: tuple[int, ...]) -> Described:
        """The probe of the released outputs' types, described (never run) as the role
        that cannot read private tables."""
        async with self.released.connection() as backend:
            return await self._describe(backend, sql, types)

    @staticmethod
    async def _describe(backend: BackendConnection, sql: str,
                        types: tuple[int, ...], parameters: Parameters | None = None
                        ) -> Described:
        try:
            return await backend.describe(sql, types, parameters)
        except BackendError as error:
            raise client_error(error) from None

    async def answer(self, text: str, plan: PrivateAggregate,
                     parameters: Parameters | None = None, offset: int = 0) -> Answer:
        """Run, noise and charge one private aggregate (or return its stored answer).

        A database connection that fails before the private query runs (PostgreSQL
        restarted, starting up or down) is replaced and the statement tried once more; a
        second failure is this statement's error with PostgreSQL's SQLSTATE, uncharged
        (connection_loss.py). The whole answer is run within the analyst's share of the
        reader connections."""
        async with self.readers.slot(self.analyst.name):
            return await self._answer_twice(text, plan, parameters, offset)

    async def _answer_twice(self, text: str, plan: PrivateAggregate,
                            parameters: Parameters | None, offset: int) -> Answer:
        for attempt in range(2):
            self.charging = False
            try:
                return await self._answer_once(text, plan, parameters, offset)
            except Exception as error:
                state = None if self.charging else connection_loss(error)
                if state is None:
                    raise
                log.warning("database connection failed before the charge (%s)%s", state,
                            "" if attempt else ", retrying")
                if attempt:
                    raise StatementError(state, "dpgate cannot reach its database at the "
                                         "moment; nothing was charged",
                                         hint="Ask again in a moment.") from None
        raise AssertionError("unreachable")

    async def _answer_once(self, text: str, plan: PrivateAggregate,
                           parameters: Parameters | None, offset: int) -> Answer:
        """One try of `answer`.

        With LiftedParameters (literals.py), `text` is the lifted form of the text the
        analyst wrote: an error before the charge then raises LiftFailed, so that the
        text as written is answered instead (with its own error positions and wording).
        """
        settings = self.settings
        epsilon, mechanism = settings.epsilon, settings.mechanism
        bound = _parameters_text(parameters)
        lifted = parameters if isinstance(parameters, LiftedParameters) else None
        async with self.pool.connection() as backend:
            try:
                calibration, sql, shape = await self._before_charge(
                    backend, text, plan, parameters, offset)
            except StatementError:
                if lifted is not None:
                    raise LiftFailed() from None
                raise
        # The connection is back in the pool: the ledger's read below and its commit after
        # the query never hold one.
        # Computed constants (current_date…) are part of the question asked.
        asked = bound + (f" -- computed: {sql}" if plan.constants else "")
        request = ChargeRequest(
            analyst=self.analyst.name,
            statement=text + bound if lifted is None else lifted.original,
            fingerprint=fingerprint(plan.fingerprint_text + asked, epsilon,
                                    calibration.delta, mechanism),
            epsilon=calibration.epsilon, delta=calibration.delta, mechanism=mechanism,
            sensitivity=max((p.elastic_sensitivity for p in calibration.parts), default=0),
        )
        # The stored answer, or the budget and shift: a read, no fsync. The one commit
        # comes after the query ran (_answer): check, charge and answer together.
        prior = self._look_up_at_once(request.fingerprint) or await ledger_call(
            self.workers.ledger_read, look_up, self.ledger, self.analyst.name,
            request.fingerprint, self.shift)
        outcome: Charged | Repeated | None = prior if isinstance(prior, Repeated) else None
        limited = split_limit(plan.fingerprint_text)
        question = None if limited is None else fingerprint(
            limited[0] + asked, epsilon, calibration.delta, mechanism)
        if isinstance(prior, Standing) and question is not None and limited is not None:
            first = await self._first_rows(question, limited[1], prior, shape,
                                           request.statement)
            if first is not None:
                return first
        if isinstance(prior, Standing):
            if prior.budget is not None and \
                    not prior.budget.fits(request.epsilon, request.delta):
                raise _exhausted(BudgetExceeded(request.epsilon, prior.budget,
                                                request.delta))
            rows, notice, outcome = await self._answer(sql, plan, calibration, shape,
                                                       prior.shift, parameters, request)
        self.report_charge(request.fingerprint, request.epsilon, request.delta,
                           isinstance(outcome, Repeated))
        if isinstance(outcome, Repeated):
            self._remember(repeated_answer(request.statement, [n for n, _ in shape.columns],
                                           self.config.privacy.confidence))
            # Stored as released: text or NULL.
            rows = cast(list[list[str | None]], outcome.rows)
            notice = (f"dpgate: repeated question, the stored answer is returned and "
                      f"nothing is charged (epsilon left {outcome.budget.epsilon_left:g} "
                      f"of {outcome.budget.epsilon_total:g})")
        if question is not None and limited is not None:
            self.settings.recent.first_rows.remember(
                self.analyst.name, question, limited[1], request.fingerprint, len(rows),
                fresh=not isinstance(outcome, Repeated))
        # A long answer (fresh or stored) is encoded on a worker thread, as it was noised.
        encoded = await self.workers.cpu(text_data_rows, rows, analyst=self.analyst.name) \
            if len(rows) > INLINE_RELEASE_ROWS else None
        return Answer(shape.columns, rows, f"SELECT {len(rows)}", notice, encoded)

    async def _first_rows(self, question: str, limit: int, prior: Standing, shape: Shape,
                          statement: str) -> Answer | None:
        """The first `limit` rows of the stored answer to the same question with a larger
        LIMIT (first_rows.py), free; None when there is none."""
        earlier = self.settings.recent.first_rows.first(self.analyst.name, question, limit)
        if earlier is None:
            return None
        stored = self._look_up_at_once(earlier.fingerprint) or await ledger_call(
            self.workers.ledger_read, look_up, self.ledger, self.analyst.name,
            earlier.fingerprint, prior.shift)
        if not isinstance(stored, Repeated):
            return None  # forgotten by the ledger since
        rows = cast(list[list[str | None]], stored.rows)[:limit]
        self.report_charge(earlier.fingerprint, 0.0, 0.0, True)
        self._remember(repeated_answer(statement, [n for n, _ in shape.columns],
                                       self.config.privacy.confidence))
        notice = (f"dpgate: the first {len(rows)} rows of your answer to the same question "
                  f"with LIMIT {earlier.limit}; nothing is charged (epsilon left "
                  f"{stored.budget.epsilon_left:g} of {stored.budget.epsilon_total:g})")
        return Answer(shape.columns, rows, f"SELECT {len(rows)}", notice)

    def _look_up_at_once(self, fingerprint: str) -> Repeated | Standing | None:
        """The ledger's look-up here on the loop when the store answers without waiting
        (None: ask a worker thread)."""
        try:
            return look_up_at_once(self.ledger, self.analyst.name, fingerprint)
        except sqlite3.Error:  # the thread's look-up reports it as ledger_call does
            return None

    async def _before_charge(self, backend: BackendConnection, text: str,
                             plan: PrivateAggregate, parameters: Parameters | None,
                             offset: int) -> tuple[Calibration, str, Shape]:
        """Everything that may fail for free: calibration, PostgreSQL's parse of the
        statement, constants, the plan check and the answer's shape."""
        settings = self.settings
        try:
            calibration = calibrate_cached.get(plan, settings.epsilon, settings.delta,
                                               settings.mechanism)
            if calibration is None:
                # The first calibration of a join scans the smooth sensitivity: off the loop,
                # and stopped (free: nothing ran yet) when it takes longer than an analysis.
                calibration = await self.workers.cpu_until(
                    self.config.server.analysis_timeout, calibrate_cached, plan,
                    settings.epsilon, settings.delta, settings.mechanism,
                    analyst=self.analyst.name)
        except Refusal as refusal:
            raise client_error(refusal) from None
        except TimeoutError:
            raise StatementError(SqlState.PROGRAM_LIMIT_EXCEEDED, "dpgate gave up calibrating "
                                 f"the noise after {self.config.server.analysis_timeout:g} s; "
                                 "nothing was charged",
                                 hint="Ask with a larger dp.epsilon.") from None
        types = parameters.types if parameters else ()
        # The shape of a statement with parameters is the same for all their values
        # (Parse/Describe read catalogs only). A bad value fails at the private query's
        # Bind (_run), which tells it from an execution error and charges nothing.
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

    async def _answer(self, sql: str, plan: PrivateAggregate, calibration: Calibration,
                      shape: Shape, shift: float, parameters: Parameters | None,
                      request: ChargeRequest
                      ) -> tuple[list[list[str | None]], str, Charged | Repeated]:
        """Run the rewritten query, noise it, then charge and store the answer in one
        durable commit, before anything is sent. A failure of the query may depend on the
        rows: it is charged too (and reported only once charged)."""
        true_rows = await self._run(sql, parameters, calibration, request)
        try:
            for _ in range(3):  # a rotation of the shift meanwhile: noise again with the new one
                rows, answer = await self._released(plan, calibration, shape, shift, true_rows,
                                                    parameters, request)
                try:
                    outcome = await ledger_call(self.charges, charge, self.ledger,
                                                AnswerCharge(request, shift, rows))
                except BudgetExceeded as exceeded:
                    raise _exhausted(exceeded) from None
                if isinstance(outcome, Repeated):
                    return cast(list[list[str | None]], outcome.rows), "", outcome
                if isinstance(outcome, Charged):
                    self.shift = outcome.shift  # a rotation applies to the next answers
                    self._remember(recent_answer(
                        request.statement, plan, answer.bounds,
                        self.config.privacy.confidence, calibration.epsilon,
                        calibration.delta, calibration.pure))
                    return rows, answer_notice(plan, calibration, answer, outcome.budget,
                                               self.config.privacy.confidence,
                                               len(rows)), outcome
                shift = outcome.shift
        finally:
            self.workers.free(true_rows)  # 182,000 rows take ~8 ms to free: not here
        raise StatementError(SqlState.IO_ERROR, "the analyst's secret shift kept changing; "
                             "nothing was released", hint="Ask again.")

    def _remember(self, answer: RecentAnswer) -> None:
        self.settings.recent.add(self.analyst.name, answer)

    async def _run(self, sql: str, parameters: Parameters | None, calibration: Calibration,
                   request: ChargeRequest) -> Sequence[Row]:
        """The rewritten query's true rows, on a connection borrowed for it alone.

        Once the connection is lent, a failure may depend on the rows: it is charged,
        after the connection went back to the pool. Failing to get a connection ran
        nothing, so it is not charged (and `answer` may try again). Nor is a query refused
        because the analyst's earlier ones used up its reader-seconds (reader_time.py)."""
        wait = self.reader_seconds.wait(self.analyst.name)
        if wait > 0:
            raise StatementError(
                SqlState.INSUFFICIENT_RESOURCES, "your private queries have used their share "
                "of dpgate's database time for now; nothing was charged",
                hint=f"Ask again in {math.ceil(wait)} s; queries that read fewer rows (a "
                "narrower WHERE, fewer joins) take less of it.")
        try:
            async with self.pool.connection() as backend:
                self.charging = True
                with self.running.on(backend), self.reader_seconds.held(self.analyst.name):
                    if parameters is None:
                        return (await backend.fetch(sql)).rows
                    return (await backend.fetch_bound(sql, parameters)).rows
        except NotExecuted as error:
            # Refused at Parse or Bind (a value its type does not take): no row was read,
            # so PostgreSQL's own error, free, as the plan check's would have been.
            self.charging = False
            if isinstance(parameters, LiftedParameters):
                raise LiftFailed() from None
            raise client_error(error) from None
        except (BackendError, OSError, asyncio.IncompleteReadError) as error:
            if not self.charging:
                raise
            log.warning("private query failed and is charged (%s): %.200s",
                        getattr(error, "sqlstate", type(error).__name__), sql)
        await self._charge_failure(request)
        # The failure may depend on the rows, so neither its detail nor a refund.
        raise StatementError(
            SqlState.DATA_EXCEPTION,
            f"the query failed while reading private data; its charge of epsilon "
            f"{calibration.epsilon:g} is kept",
        ) from None

    async def _released(self, plan: PrivateAggregate, calibration: Calibration, shape: Shape,
                        shift: float, true_rows: Sequence[Row],
                        parameters: Parameters | None, request: ChargeRequest
                        ) -> tuple[list[list[str | None]], Release]:
        """The noisy answer as the client will see it (post-processing included)."""
        arguments = (plan, calibration, shape.key_types, true_rows, shift,
                     self.config.privacy, self.rng,
                     shape.released if plan.post_sql else shape.answer)
        answer = await self.workers.cpu(release, *arguments, analyst=self.analyst.name) \
            if heavy_release(plan, calibration, true_rows) else release(*arguments)
        rows = answer.rows
        if plan.post_sql is not None:
            sql = with_rows(plan.post_sql, rows, [name for name, _ in shape.released])
            rows = await self._post_processed(sql, parameters, request)
        if plan.outer is not None:
            sql = with_answer(plan.outer.sql, plan.outer.alias, rows, [
                (name, type_name) for (name, _), type_name in
                zip(shape.answer, shape.answer_types, strict=True)])
            rows = await self._post_processed(sql, parameters, request)
        return rows, answer

    async def _charge_failure(self, request: ChargeRequest) -> None:
        """Charge a failed question (one commit). Without the budget for it, the failure
        is not reported: the analyst hears that the budget is exhausted."""
        try:
            await ledger_call(self.charges, charge, self.ledger,
                              FailureCharge(request, "failed"))
        except BudgetExceeded as exceeded:
            raise _exhausted(exceeded) from None
        self.report_charge(request.fingerprint, request.epsilon, request.delta, False)

    async def _post_processed(self, sql: str, parameters: Parameters | None,
                              request: ChargeRequest) -> list[list[str | None]]:
        """The statement's expressions over the released values only (post-processing),
        on a connection borrowed for this statement alone.

        Its failure (a noisy count of 0 as a divisor) depends on released values only, so
        PostgreSQL's own error is reported, once the question is charged: the values
        were drawn. The connection is back in the pool before that charge commits. A
        connection lost meanwhile is charged the same way and is this statement's error,
        not the session's end.
        """
        try:
            async with self.released.connection() as backend:
                result = await backend.fetch(sql, parameters)
        except BackendError as error:
            await self._charge_failure(request)
            raise client_error(error, 0) from None
        except (OSError, asyncio.IncompleteReadError):
            await self._charge_failure(request)
            raise StatementError(SqlState.CONNECTION_FAILURE, "the connection to the database "
                                 "was lost while computing over the released values; the "
                                 "charge is kept", hint="Ask again.") from None
        return [[None if v is None else v.decode() for v in row] for row in result.rows]


def heavy_release(plan: PrivateAggregate, calibration: Calibration, true_rows: Sequence[Row]
                  ) -> bool:
    """Whether releasing these rows may take more than a millisecond, and so runs on a
    worker thread: noise for many rows, the exponential mechanism's sampling (it weighs
    every candidate) and Gaussian noise (a real-valued grid calibrates for ~15 ms). A few
    rows of Laplace noise stay on the event loop: the hop to a thread would cost more."""
    return len(true_rows) > INLINE_RELEASE_ROWS or any(p.choice for p in plan.parts) \
        or calibration.mechanism == Mechanism.GAUSSIAN


def _exhausted(exceeded: BudgetExceeded) -> StatementError:
    return StatementError(SqlState.BUDGET_EXHAUSTED, str(exceeded),
                          hint="Ask the data owner for more budget, or lower dp.epsilon.")


def answer_notice(plan: PrivateAggregate, calibration: Calibration, answer: Release,
                  budget: Budget, confidence: float, rows: int | None = None) -> str:
    """What the analyst is told after a fresh answer: cost, budget left, accuracy; `rows`
    is how many rows are sent (after the statement's own expressions)."""
    if not plan.parts:
        return ("dpgate: nothing charged: every key of the declared domain that the WHERE "
                "admits is listed, whatever the data holds")
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
    elif (grouping := plan.grouping) is not None:
        admits = ("" if grouping.domain_unnarrowed else "that the WHERE admits ")
        lines.append(f"of the declared domain's keys {admits}those whose noisy count is "
                     "above 0 are kept, then ordered, limited or aggregated"
                     if grouping.occupied_by is not None else
                     f"every key of the declared domain {admits}is listed, empty ones with "
                     "noise")
        if grouping.domain_unnarrowed:
            lines.append("a WHERE condition on a key with a subquery's values does not "
                         "narrow its domain: list the values")
    if plan.grouping is not None and not (len(answer.rows) if rows is None else rows):
        lines.append(_no_group(plan, calibration))
    if (mode := answer.unit_note or mode_notice(plan)) is not None:
        lines.append(mode)
    if plan.post_sql is not None or plan.outer is not None:
        lines.append("the statement's expressions were computed from the noisy values")
    elif any(o.hidden for o in plan.outputs):
        lines.append("HAVING and ORDER BY used noisy aggregates")
    return "; ".join(lines)


def _no_group(plan: PrivateAggregate, calibration: Calibration) -> str:
    """Why a GROUP BY answer has no row: decided from noisy values only, never from
    whether the data holds groups."""
    reasons = []
    if calibration.threshold is not None:
        reasons.append("no group's noisy count passed the key-selection threshold")
    if plan.post.having is not None or plan.post_sql is not None:
        reasons.append("HAVING, applied to the noisy values, kept none")
    if plan.post.limit == 0 or plan.post.offset:
        reasons.append("LIMIT/OFFSET left none")
    why = " or ".join(reasons) or "the declared domain admits no key here"
    return f"no group was released ({why})"


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


@dataclass(frozen=True)
class Shape:
    """What Describe tells of a private aggregate: its parameter types, the rewritten
    query's key types and the columns the client sees."""

    parameters: list[int]
    key_types: list[int]
    columns: list[tuple[str, int]]  # what the client receives
    # For a plan with Computed: every output's (PostgreSQL type name, type OID).
    released: list[tuple[str, int]]
    # The aggregate's own answer (an outer query's inner one) and its type names.
    answer: list[tuple[str, int]]
    answer_types: list[str]
