"""A private aggregate's query on private rows, and its release.

The rewritten SQL runs as dpgate_reader on a connection borrowed for it alone, within the
analyst's reader-seconds (reader_time.py). From the moment the connection is lent, a
failure may depend on the rows, so it is charged (`charging`). The true rows are then
noised (release.py), on a worker thread when that takes long, and the statement's own
expressions over released values run over those values only, as the relay role that
cannot read private tables (`released`; tests/test_released_values.py); so does the SQL
that combines a Composite's releases.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable, Sequence

from accounting import BudgetExceeded, ChargeRequest, FailureCharge, Ledger, charge
from mechanisms.names import Mechanism
from mechanisms.random_source import RandomSource
from rewriter.plan import PrivateAggregate
from rewriter.release.computed import BoundValues, with_branches, with_rows
from rewriter.release.outer import with_answer
from rewriter.sensitivity.calibrate import Calibration
from rewriter.sqlstate import SqlState

from ..config import PrivacySettings
from ..pgwire.backend import BackendError, BackendPool, NotExecuted, Parameters, Row
from ..pgwire.running import Running
from .before_charge import Checked, Shape
from .charge_batches import ChargeBatches
from .errors import StatementError, budget_exhausted, client_error, ledger_call
from .literals import LiftedParameters, LiftFailed
from .reader_time import ReaderTime
from .release import Release, release
from .workers import Workers

log = logging.getLogger("dpgate.session")

# Answers with more rows than this are noised and encoded on a worker thread.
INLINE_RELEASE_ROWS = 64
# Told of each charge the ledger made (fingerprint, epsilon, delta, repeated): how the
# operations side (proxy/ops) learns what a statement cost, never what it released.
ChargeReport = Callable[[str, float, float, bool], None]


class PrivateQuery:
    """One session's private queries: run, charged if they fail, released."""

    def __init__(self, analyst: str, privacy: PrivacySettings, ledger: Ledger,
                 pool: BackendPool, released: BackendPool, rng: RandomSource,
                 workers: Workers, running: Running, charges: ChargeBatches,
                 reader_seconds: ReaderTime, report_charge: ChargeReport):
        self.analyst = analyst
        self.privacy = privacy
        self.ledger = ledger
        self.pool = pool
        self.released = released
        self.rng = rng
        self.workers = workers
        self.running = running
        self.charges = charges
        self.reader_seconds = reader_seconds
        self.report_charge = report_charge
        # Whether the statement under way reached its private query (never retried after:
        # from there a failure may depend on the rows, and is charged).
        self.charging = False

    async def rows(self, sql: str, parameters: Parameters | None, calibration: Calibration,
                   request: ChargeRequest) -> Sequence[Row]:
        """The rewritten query's true rows, on a connection borrowed for it alone.

        Once the connection is lent, a failure may depend on the rows: it is charged,
        after the connection went back to the pool. Failing to get a connection ran
        nothing, so it is not charged (and PrivateAnswers.answer may try again). Nor is a
        query refused because the analyst's earlier ones used up its reader-seconds
        (reader_time.py). After an earlier release of the same statement (a Composite's)
        read private rows, every failure is charged and nothing is refused for free: the
        earlier query's run time, say, depends on the rows."""
        earlier = self.charging
        wait = 0.0 if earlier else self.reader_seconds.wait(self.analyst)
        if wait > 0:
            raise StatementError(
                SqlState.INSUFFICIENT_RESOURCES, "your private queries have used their share "
                "of dpgate's database time for now; nothing was charged",
                hint=f"Ask again in {math.ceil(wait)} s; queries that read fewer rows (a "
                "narrower WHERE, fewer joins) take less of it.")
        try:
            async with self.pool.connection() as backend:
                self.charging = True
                with self.running.on(backend), self.reader_seconds.held(self.analyst):
                    if parameters is None:
                        return (await backend.fetch(sql)).rows
                    return (await backend.fetch_bound(sql, parameters)).rows
        except NotExecuted as error:
            if earlier:
                log.warning("private query refused after an earlier one ran, charged: %s",
                            error)
            else:
                # Refused at Parse or Bind (a value its type does not take): no row was
                # read, so PostgreSQL's own error, free, as the plan check's would have been.
                self.charging = False
                if isinstance(parameters, LiftedParameters):
                    raise LiftFailed() from None
                raise client_error(error) from None
        except (BackendError, OSError, asyncio.IncompleteReadError) as error:
            if not self.charging:
                raise
            log.warning("private query failed and is charged (%s): %.200s",
                        getattr(error, "sqlstate", type(error).__name__), sql)
        await self.charge_failure(request)
        # The failure may depend on the rows, so neither its detail nor a refund.
        raise StatementError(
            SqlState.DATA_EXCEPTION,
            f"the query failed while reading private data; its charge of epsilon "
            f"{calibration.epsilon:g} is kept",
        ) from None

    async def answer_rows(self, checked: Checked, shift: float,
                          true_rows: list[Sequence[Row]], request: ChargeRequest
                          ) -> tuple[list[list[str | None]], list[Release]]:
        """The noisy answer as the client will see it, and each release: a Composite's
        releases combined by its `combine` SQL over their released rows only."""
        answers, rows = [], []
        for run, read in zip(checked.runs, true_rows, strict=True):
            released, answer = await self.released_rows(run.plan, run.calibration, run.shape,
                                                        shift, read, checked.parameters,
                                                        request)
            rows.append(released)
            answers.append(answer)
        if checked.combine is None:
            return rows[0], answers
        bound = BoundValues(0)  # `combine` has no parameter of the statement's
        sql = with_branches(checked.combine, [
            (released, run.type_names)
            for released, run in zip(rows, checked.runs, strict=True)], bound)
        return await self._post_processed(sql, None, bound, request), answers

    async def released_rows(self, plan: PrivateAggregate, calibration: Calibration, shape: Shape,
                        shift: float, true_rows: Sequence[Row],
                        parameters: Parameters | None, request: ChargeRequest
                        ) -> tuple[list[list[str | None]], Release]:
        """The noisy answer as the client will see it (post-processing included)."""
        arguments = (plan, calibration, shape.key_types, true_rows, shift,
                     self.privacy, self.rng,
                     shape.released if plan.post_sql else shape.answer)
        answer = await self.workers.cpu(release, *arguments, analyst=self.analyst) \
            if heavy_release(plan, calibration, true_rows) else release(*arguments)
        rows = answer.rows
        if plan.post_sql is not None:
            bound = BoundValues(_count(parameters))
            sql = with_rows(plan.post_sql, rows, [name for name, _ in shape.released], bound)
            rows = await self._post_processed(sql, parameters, bound, request)
        if plan.outer is not None:
            bound = BoundValues(_count(parameters))
            sql = with_answer(plan.outer.sql, plan.outer.alias, rows, [
                (name, type_name) for (name, _), type_name in
                zip(shape.answer, shape.answer_types, strict=True)], bound)
            rows = await self._post_processed(sql, parameters, bound, request)
        return rows, answer

    async def charge_failure(self, request: ChargeRequest) -> None:
        """Charge a failed question (one commit). Without the budget for it, the failure
        is not reported: the analyst hears that the budget is exhausted."""
        try:
            await ledger_call(self.charges, charge, self.ledger,
                              FailureCharge(request, "failed"))
        except BudgetExceeded as exceeded:
            raise budget_exhausted(exceeded) from None
        self.report_charge(request.fingerprint, request.epsilon, request.delta, False)

    async def _post_processed(self, sql: str, parameters: Parameters | None,
                              bound: BoundValues, request: ChargeRequest
                              ) -> list[list[str | None]]:
        """The statement's expressions over the released values only (post-processing),
        on a connection borrowed for this statement alone. The values are bound after the
        statement's own parameters, never written into its text (BoundValues).

        Its failure (a noisy count of 0 as a divisor) depends on released values only, so
        PostgreSQL's own error is reported, once the question is charged: the values
        were drawn. The connection is back in the pool before that charge commits. A
        connection lost meanwhile is charged the same way and is this statement's error,
        not the session's end.
        """
        if _count(parameters) + len(bound.values) > MAX_PARAMETERS:
            await self.charge_failure(request)
            raise StatementError(SqlState.PROGRAM_LIMIT_EXCEEDED, "too many released values "
                                 "to compute over; the charge is kept",
                                 hint="Ask for fewer groups or columns.")
        try:
            async with self.released.connection() as backend:
                result = await backend.fetch(sql, _with_bound(parameters, bound))
        except BackendError as error:
            await self.charge_failure(request)
            raise client_error(error, 0) from None
        except (OSError, asyncio.IncompleteReadError):
            await self.charge_failure(request)
            raise StatementError(SqlState.CONNECTION_FAILURE, "the connection to the database "
                                 "was lost while computing over the released values; the "
                                 "charge is kept", hint="Ask again.") from None
        return [[None if v is None else v.decode() for v in row] for row in result.rows]


# A Bind message counts its parameters in 16 bits.
MAX_PARAMETERS = 65535


def _count(parameters: Parameters | None) -> int:
    return len(parameters.values) if parameters is not None else 0


def _with_bound(parameters: Parameters | None, bound: BoundValues) -> Parameters | None:
    """The statement's own parameters, then the released values as text of a type the
    statement's casts decide (`$n::type`)."""
    if not bound.values:
        return parameters
    own = _count(parameters)
    types = parameters.types if parameters is not None else ()
    formats = parameters.formats if parameters is not None else ()
    formats = formats * own if len(formats) == 1 else formats or (0,) * own
    values = parameters.values if parameters is not None else ()
    added = len(bound.values)
    return Parameters(types + (0,) * (own - len(types) + added), formats + (0,) * added,
                      values + tuple(bound.values))


def heavy_release(plan: PrivateAggregate, calibration: Calibration, true_rows: Sequence[Row]
                  ) -> bool:
    """Whether releasing these rows may take more than a millisecond, and so runs on a
    worker thread: noise for many rows, the exponential mechanism's sampling (it weighs
    every candidate), Gaussian noise (a real-valued grid calibrates for ~15 ms) and the
    intervals of the statement's own expressions in more than one row (~0.3 ms a row,
    computed_errors.py). A few rows of Laplace noise stay on the event loop: the hop to a
    thread would cost more."""
    return len(true_rows) > INLINE_RELEASE_ROWS or any(p.choice for p in plan.parts) \
        or calibration.mechanism == Mechanism.GAUSSIAN \
        or (plan.post_sql is not None and len(true_rows) > 1)

