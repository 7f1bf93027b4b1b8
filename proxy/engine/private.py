"""Private aggregates: described without running anything, then run, noised and charged.

One answer, in order: everything that may fail for free (before_charge.py: calibration,
PostgreSQL's parse of the statement as written, constants, the plan check); the ledger's
look-up (a stored answer to the same question is returned free, and so are the first
rows of a stored answer to it with a larger LIMIT); the private query, run and released
with noise (private_query.py); then the budget check, the charge and the stored answer
as one durable commit (accounting/one_commit.py) before anything is sent.

A backend connection is borrowed from the pool only while PostgreSQL works (the checks,
the private query, each post-processing step) and is back in the pool before every ledger
call: a slow fsync, or a wait for the ledger's lock, never keeps other sessions from
PostgreSQL (tests/test_private_connections.py). Post-processing and the probe of its
types borrow from the relay role's pool (`released`): that role cannot read private
tables, and its connections are reset before each use (tests/test_released_values.py).
"""

from __future__ import annotations

import logging
import sqlite3
from typing import cast

from accounting import (
    Analyst,
    AnswerCharge,
    BudgetExceeded,
    Charged,
    ChargeRequest,
    Ledger,
    Repeated,
    Standing,
    charge,
    fingerprint,
    look_up,
    look_up_at_once,
)
from mechanisms.random_source import RandomSource
from rewriter.plan import Composite, PrivateAggregate
from rewriter.sensitivity.calibrate import Calibration
from rewriter.sqlstate import SqlState

from ..config import Config
from ..pgwire.backend import BackendPool, Parameters
from ..pgwire.running import Running
from .before_charge import BeforeCharge, Checked, Shape
from .charge_batches import ChargeBatches
from .connection_loss import connection_loss
from .dp_settings import DpSettings
from .errors import StatementError, budget_exhausted, ledger_call
from .fair import FairShares
from .first_rows import split_limit
from .literals import LiftedParameters, LiftFailed
from .notice import answer_notice, composite_notice
from .outcome import Answer, text_data_rows
from .plan_check import PlanChecker
from .private_query import INLINE_RELEASE_ROWS, ChargeReport, PrivateQuery
from .reader_time import ReaderTime, reader_time
from .recent import RecentAnswer, composite_answer, recent_answer, repeated_answer
from .release import Release
from .workers import Workers

log = logging.getLogger("dpgate.session")


def _unreported(fingerprint: str, epsilon: float, delta: float, repeated: bool) -> None:
    pass


class PrivateAnswers:
    """One session's private aggregates: the ledger's side of each answer (look-up,
    budget, charge, stored answers), around its free steps and its private query."""

    def __init__(self, analyst: Analyst, config: Config, ledger: Ledger, pool: BackendPool,
                 rng: RandomSource, checker: PlanChecker, workers: Workers,
                 settings: DpSettings, running: Running,
                 report_charge: ChargeReport | None = None,
                 charges: ChargeBatches | None = None, readers: FairShares | None = None,
                 released: BackendPool | None = None, reader_seconds: ReaderTime | None = None):
        self.analyst = analyst
        self.config = config
        self.ledger = ledger
        # Where SQL over released values and the probes of their types run: the proxy's
        # relay-role pool (server.py); the reader's only in-process setups without one.
        self.released = released or pool
        self.workers = workers
        self.settings = settings
        self.report_charge = report_charge or _unreported
        # Where charges go to commit: with other sessions' (charge_batches.py).
        self.charges = charges or ChargeBatches(ledger, workers)
        # The analyst's share of the reader connections, shared with the other sessions
        # (fair.py): one analyst's slow statements hold at most
        # backend.private_statements_per_analyst of them.
        self.readers = readers or FairShares(config.backend.pool_size,
                                             config.backend.private_statements_per_analyst)
        self.before_charge = BeforeCharge(analyst.name, config, pool, self.released, checker,
                                          workers, settings)
        # Reader-seconds: every analyst's (reader_time.py), shared too.
        self.query = PrivateQuery(analyst.name, config.privacy, ledger, pool, self.released,
                                  rng, workers, running, self.charges,
                                  reader_seconds or reader_time(config.backend),
                                  self.report_charge)
        # The analyst's secret shift as last seen by this session (its login, then each
        # charge): a rotation by the data owner applies to sessions already open.
        self.shift = analyst.shift

    async def describe(self, text: str, plan: PrivateAggregate | Composite,
                       types: tuple[int, ...] = ()) -> Shape:
        """Parameter types and columns, without running anything private (no charge)."""
        return await self.before_charge.describe(text, plan, types)

    async def answer(self, text: str, plan: PrivateAggregate | Composite,
                     parameters: Parameters | None = None, offset: int = 0) -> Answer:
        """Run, noise and charge one private aggregate (or return its stored answer).

        A database connection that fails before the private query runs (PostgreSQL
        restarted, starting up or down) is replaced and the statement tried once more; a
        second failure is this statement's error with PostgreSQL's SQLSTATE, uncharged
        (connection_loss.py). The whole answer is run within the analyst's share of the
        reader connections."""
        async with self.readers.slot(self.analyst.name):
            return await self._answer_twice(text, plan, parameters, offset)

    async def _answer_twice(self, text: str, plan: PrivateAggregate | Composite,
                            parameters: Parameters | None, offset: int) -> Answer:
        for attempt in range(2):
            self.query.charging = False
            try:
                return await self._answer_once(text, plan, parameters, offset)
            except Exception as error:
                state = None if self.query.charging else connection_loss(error)
                if state is None:
                    raise
                log.warning("database connection failed before the charge (%s)%s", state,
                            "" if attempt else ", retrying")
                if attempt:
                    raise StatementError(state, "dpgate cannot reach its database at the "
                                         "moment; nothing was charged",
                                         hint="Ask again in a moment.") from None
        raise AssertionError("unreachable")

    async def _answer_once(self, text: str, plan: PrivateAggregate | Composite,
                           parameters: Parameters | None, offset: int) -> Answer:
        """One try of `answer`.

        With LiftedParameters (literals.py), `text` is the lifted form of the text the
        analyst wrote: an error before the charge then raises LiftFailed, so that the
        text as written is answered instead (with its own error positions and wording).
        """
        try:
            checked = await self.before_charge.checked(text, plan, parameters, offset)
        except StatementError:
            if isinstance(parameters, LiftedParameters):
                raise LiftFailed() from None
            raise
        calibration, shape = checked.calibration, checked.shape
        # The connection is back in the pool: the ledger's read below and its commit after
        # the query never hold one.
        # Computed constants (current_date…) are part of the question asked.
        asked = _parameters_text(parameters) + "".join(
            f" -- computed: {run.sql}" for run in checked.runs if run.plan.constants)
        request = self._request(text, plan, parameters, calibration, asked)
        epsilon, mechanism = self.settings.epsilon, self.settings.mechanism
        # The stored answer, or the budget and shift: a read, no fsync. The one commit
        # comes after the query ran (_answer): check, charge and answer together.
        prior = self._look_up_at_once(request.fingerprint) or await ledger_call(
            self.workers.ledger_read, look_up, self.ledger, self.analyst.name,
            request.fingerprint, self.shift)
        outcome: Charged | Repeated | None = prior if isinstance(prior, Repeated) else None
        limited = split_limit(plan.fingerprint_text) \
            if isinstance(plan, PrivateAggregate) else None
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
                raise budget_exhausted(BudgetExceeded(request.epsilon, prior.budget,
                                                      request.delta))
            rows, notice, outcome = await self._answer(checked, prior.shift, request)
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

    def _request(self, text: str, plan: PrivateAggregate | Composite,
                 parameters: Parameters | None,
                 calibration: Calibration, asked: str) -> ChargeRequest:
        """What the ledger is asked to charge: the statement as the analyst wrote it (with
        its bound values), and the question's fingerprint (`asked`: what makes it this
        question beyond its text)."""
        settings = self.settings
        statement = parameters.original if isinstance(parameters, LiftedParameters) \
            else text + _parameters_text(parameters)
        return ChargeRequest(
            analyst=self.analyst.name, statement=statement,
            fingerprint=fingerprint(plan.fingerprint_text + asked, settings.epsilon,
                                    calibration.delta, settings.mechanism),
            epsilon=calibration.epsilon, delta=calibration.delta, mechanism=settings.mechanism,
            sensitivity=max((p.elastic_sensitivity for p in calibration.parts), default=0),
        )

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

    async def _answer(self, checked: Checked, shift: float, request: ChargeRequest
                      ) -> tuple[list[list[str | None]], str, Charged | Repeated]:
        """Run the rewritten queries (a Composite's one after the other), noise them, then
        charge and store the answer in one durable commit, before anything is sent. A
        failure of a query may depend on the rows: it is charged too (and reported only
        once charged), the whole statement's charge, whichever release failed."""
        true_rows = []
        try:
            for run in checked.runs:
                true_rows.append(await self.query.rows(run.sql, checked.parameters,
                                                       checked.calibration, request))
            for _ in range(3):  # a rotation of the shift meanwhile: noise again with the new one
                rows, answers = await self._released(checked, shift, true_rows, request)
                try:
                    outcome = await ledger_call(self.charges, charge, self.ledger,
                                                AnswerCharge(request, shift, rows))
                except BudgetExceeded as exceeded:
                    raise budget_exhausted(exceeded) from None
                if isinstance(outcome, Repeated):
                    return cast(list[list[str | None]], outcome.rows), "", outcome
                if isinstance(outcome, Charged):
                    self.shift = outcome.shift  # a rotation applies to the next answers
                    self._remember(self._recent(request.statement, checked, answers))
                    confidence = self.config.privacy.confidence
                    notice = answer_notice(checked.runs[0].plan, checked.calibration,
                                           answers[0], outcome.budget, confidence, len(rows)) \
                        if checked.combine is None else composite_notice(
                            checked, answers, outcome.budget, confidence)
                    return rows, notice, outcome
                shift = outcome.shift
        finally:
            for rows_read in true_rows:  # 182,000 rows take ~8 ms to free: not here
                self.workers.free(rows_read)
        raise StatementError(SqlState.IO_ERROR, "the analyst's secret shift kept changing; "
                             "nothing was released", hint="Ask again.")

    async def _released(self, checked: Checked, shift: float, true_rows: list, request:
                        ChargeRequest) -> tuple[list[list[str | None]], list[Release]]:
        """query.answer_rows, whose unforeseen failure (a bug in a release) is charged:
        it came after the private rows were read and noise was drawn from them, so even
        whether it happens may depend on them. Its detail stays in the log."""
        try:
            return await self.query.answer_rows(checked, shift, true_rows, request)
        except StatementError:  # charged where it arose (post-processing, PostgreSQL's)
            raise
        except Exception:
            log.exception("releasing a private answer failed; the failure is charged")
            await self.query.charge_failure(request)
            raise StatementError(
                SqlState.INTERNAL_ERROR, f"dpgate failed while releasing the answer; its "
                f"charge of epsilon {checked.calibration.epsilon:g} is kept") from None

    def _recent(self, statement: str, checked: Checked, answers: list[Release]
                ) -> RecentAnswer:
        """What SHOW dp.last_answers keeps of a fresh answer."""
        confidence, calibration = self.config.privacy.confidence, checked.calibration
        releases = [(run.label, recent_answer(
            statement, run.plan, answer.bounds, confidence, run.calibration.epsilon,
            run.calibration.delta, run.calibration.pure))
            for run, answer in zip(checked.runs, answers, strict=True)]
        if checked.combine is None:
            return releases[0][1]
        return composite_answer(statement, releases, confidence, calibration.epsilon,
                                calibration.delta)

    def _remember(self, answer: RecentAnswer) -> None:
        self.settings.recent.add(self.analyst.name, answer)

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
