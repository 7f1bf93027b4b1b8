"""Private aggregates: described without running anything, then charged, run and noised.

Before the charge PostgreSQL parses the statement as written (its own errors first),
computes the row-independent constants and checks the rewritten plan; after it the
rewritten SQL runs as dpgate_reader, the rows are released with noise (release.py), and
expressions over released values run over those values only.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

from accounting import (
    Analyst,
    Budget,
    BudgetExceeded,
    Charged,
    ChargeRequest,
    Ledger,
    Repeated,
    fingerprint,
)
from mechanisms.random_source import RandomSource
from rewriter.calibrate import Calibration
from rewriter.computed import with_rows
from rewriter.errors import Refusal
from rewriter.outer import with_answer
from rewriter.plan import PrivateAggregate
from rewriter.sqlstate import SqlState
from rewriter.unit_report import mode_notice

from ..config import Config
from ..pgwire.backend import BackendConnection, BackendError, BackendPool, Described, Parameters
from ..pgwire.running import Running
from .connection_loss import connection_loss
from .dp_settings import DpSettings
from .errors import StatementError, client_error, ledger_call
from .outcome import Answer
from .plan_cache import calibrate_cached
from .plan_check import PlanChecker
from .release import Release, release, result_columns
from .workers import Workers

log = logging.getLogger("dpgate.session")

# Answers with more rows than this are noised on a worker thread.
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
                 report_charge: ChargeReport = _unreported):
        self.analyst = analyst
        self.config = config
        self.ledger = ledger
        self.pool = pool
        self.rng = rng
        self.checker = checker
        self.workers = workers
        self.settings = settings
        self.running = running
        self.report_charge = report_charge
        # Whether the statement under way reached its charge (never retried after).
        self.charging = False

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
        if plan.outer_sql is not None:  # `written` is the outer query; the answer is inner
            written = await self._as_written(backend, plan.inner_sql, plan, types, 0)
        columns = result_columns(plan, key_types)
        if written is not None and len(written.columns) == len(columns):
            columns = written.columns
        released = (await backend.describe(plan.probe_sql, types)).columns \
            if plan.probe_sql is not None else []
        names = await _type_names(backend, [t for _, t in released + columns])
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
            raise client_error(error) from None

    async def answer(self, text: str, plan: PrivateAggregate,
                     parameters: Parameters | None = None, offset: int = 0) -> Answer:
        """Charge, run and noise one private aggregate (or return its stored answer).

        A database connection that fails before the charge (PostgreSQL restarted, starting
        up or down) is replaced and the statement tried once more; a second failure is this
        statement's error with PostgreSQL's SQLSTATE, uncharged (connection_loss.py)."""
        for attempt in range(2):
            self.charging = False
            try:
                return await self._answer_once(text, plan, parameters, offset)
            except Exception as error:
                # A describe's BackendError arrives as a StatementError with its code.
                state = None if self.charging else connection_loss(
                    BackendError({"C": error.sqlstate})
                    if isinstance(error, StatementError) else error)
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
        settings = self.settings
        epsilon, delta, mechanism = settings.epsilon, settings.delta, settings.mechanism
        try:
            # The first calibration of a join scans the smooth sensitivity: not on the loop.
            calibration = await self.workers.cpu(calibrate_cached, plan, epsilon, delta,
                                                 mechanism)
        except Refusal as refusal:
            raise client_error(refusal) from None
        bound = _parameters_text(parameters)
        async with self.pool.connection() as backend:
            # Bad parameter values fail here, at bind time, before the charge.
            types = parameters.types if parameters else ()
            written = await self._as_written(backend, text, plan, types, offset)
            sql = await self._prepare(backend, plan, parameters)
            shape = await self._shape(backend, written, sql, plan, types, parameters)
            # Computed constants (current_date…) are part of the question asked.
            asked = bound + (f" -- computed: {sql}" if plan.constants else "")
            request = ChargeRequest(
                analyst=self.analyst.name, statement=text + bound,
                fingerprint=fingerprint(plan.fingerprint_text + asked, epsilon,
                                        calibration.delta, mechanism),
                epsilon=calibration.epsilon, delta=calibration.delta, mechanism=mechanism,
                sensitivity=max((p.elastic_sensitivity for p in calibration.parts), default=0),
            )
            self.charging = True
            try:
                outcome = await ledger_call(self.workers.ledger_write,
                                            self.ledger.charge_or_repeat, request)
                self.report_charge(request.fingerprint, request.epsilon, request.delta,
                                   isinstance(outcome, Repeated))
            except BudgetExceeded as exceeded:
                raise StatementError(SqlState.BUDGET_EXHAUSTED, str(exceeded),
                                     hint="Ask the data owner for more budget, or lower "
                                     "dp.epsilon.") from None
            if isinstance(outcome, Repeated):
                # Stored as released: text or NULL.
                rows = cast(list[list[str | None]], outcome.rows)
                notice = (f"dpgate: repeated question, the stored answer is returned and "
                          f"nothing is charged (epsilon left {outcome.budget.epsilon_left:g} "
                          f"of {outcome.budget.epsilon_total:g})")
            else:
                rows, notice = await self._answer(backend, sql, plan, calibration, shape,
                                                  outcome, parameters)
        return Answer(shape.columns, rows, f"SELECT {len(rows)}", notice)

    async def _answer(self, backend: BackendConnection, sql: str, plan: PrivateAggregate,
                      calibration: Calibration, shape: Shape, charged: Charged,
                      parameters: Parameters | None) -> tuple[list[list[str | None]], str]:
        try:
            with self.running.on(backend):
                result = await backend.fetch(sql, parameters)
        except (BackendError, OSError, asyncio.IncompleteReadError) as error:
            log.warning("private query failed after its charge (%s): %.200s",
                        getattr(error, "sqlstate", type(error).__name__), sql)
            await ledger_call(self.workers.ledger_write, self.ledger.record_failure,
                               charged.charge_id, "failed")
            # The failure may depend on the rows, so neither its detail nor a refund.
            raise StatementError(
                SqlState.DATA_EXCEPTION,
                f"the query failed while reading private data; its charge of epsilon "
                f"{calibration.epsilon:g} is kept",
            ) from None
        arguments = (plan, calibration, shape.key_types, result.rows, charged.shift,
                     self.config.privacy, self.rng,
                     shape.released if plan.post_sql else shape.answer)
        # Noise for a large histogram, or the exponential mechanism's sampling, takes long.
        large = len(result.rows) > INLINE_RELEASE_ROWS or any(p.choice for p in plan.parts)
        answer = await self.workers.cpu(release, *arguments) if large else release(*arguments)
        rows = answer.rows
        if plan.post_sql is not None:
            sql = with_rows(plan.post_sql, rows, [name for name, _ in shape.released])
            rows = await self._post_processed(backend, sql, parameters, charged)
        if plan.outer_sql is not None:
            sql = with_answer(plan.outer_sql, plan.outer_alias, rows, [
                (name, type_name) for (name, _), type_name in
                zip(shape.answer, shape.answer_types, strict=True)])
            rows = await self._post_processed(backend, sql, parameters, charged)
        await ledger_call(self.workers.ledger_write, self.ledger.record_answer,
                           charged.charge_id, rows)
        return rows, answer_notice(plan, calibration, answer, charged.budget,
                                   self.config.privacy.confidence)

    async def _post_processed(self, backend: BackendConnection, sql: str,
                              parameters: Parameters | None, charged: Charged
                              ) -> list[list[str | None]]:
        """The statement's expressions over the released values only (post-processing).

        Its failure (a noisy count of 0 as a divisor) depends on released values only, so
        PostgreSQL's own error is reported; the charge stays, as the values were drawn.
        """
        try:
            result = await backend.fetch(sql, parameters)
        except BackendError as error:
            await ledger_call(self.workers.ledger_write, self.ledger.record_failure,
                               charged.charge_id, "failed")
            raise client_error(error, 0) from None
        return [[None if v is None else v.decode() for v in row] for row in result.rows]



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
    if (mode := mode_notice(plan)) is not None:
        lines.append(mode)
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
