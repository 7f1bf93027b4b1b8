"""A private aggregate before its charge: everything that may fail for free.

The noise is calibrated (plan_cache.py), PostgreSQL parses the statement as written (its
own errors come first), the row-independent constants are computed and the rewritten
plan checked (plan_check.py), and the answer's shape is described: its parameter types
and the columns the client sees. Nothing here reads a private row or charges anything;
Describe of a private aggregate is `describe`, and nothing more.
"""

from __future__ import annotations

from dataclasses import dataclass

from rewriter.errors import Refusal
from rewriter.plan import PrivateAggregate
from rewriter.sensitivity.calibrate import Calibration
from rewriter.sqlstate import SqlState

from ..config import Config
from ..pgwire.backend import BackendConnection, BackendError, BackendPool, Described, Parameters
from .dp_settings import DpSettings
from .errors import StatementError, client_error
from .generic_plan import type_names
from .plan_cache import calibrate_cached
from .plan_check import PlanChecker
from .release import result_columns
from .workers import Workers


class BeforeCharge:
    """One session's free steps of its private aggregates."""

    def __init__(self, analyst: str, config: Config, pool: BackendPool,
                 released: BackendPool, checker: PlanChecker, workers: Workers,
                 settings: DpSettings):
        self.analyst = analyst
        self.config = config
        self.pool = pool
        # Where the probes of released values' types are described (see PrivateAnswers).
        self.released = released
        self.checker = checker
        self.workers = workers
        self.settings = settings

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

    async def checked(self, text: str, plan: PrivateAggregate, parameters: Parameters | None,
                      offset: int) -> tuple[Calibration, str, Shape]:
        """Everything that may fail for free, on a connection borrowed for it alone:
        calibration, PostgreSQL's parse of the statement, constants, the plan check and
        the answer's shape. Returns the calibration, the SQL to run and the shape."""
        async with self.pool.connection() as backend:
            calibration = await self._calibration(plan)
            sql, shape = await self._described(backend, text, plan, parameters, offset)
        return calibration, sql, shape

    async def _calibration(self, plan: PrivateAggregate) -> Calibration:
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
                    analyst=self.analyst)
        except Refusal as refusal:
            raise client_error(refusal) from None
        except TimeoutError:
            raise StatementError(SqlState.PROGRAM_LIMIT_EXCEEDED, "dpgate gave up calibrating "
                                 f"the noise after {self.config.server.analysis_timeout:g} s; "
                                 "nothing was charged",
                                 hint="Ask with a larger dp.epsilon.") from None
        return calibration

    async def _described(self, backend: BackendConnection, text: str, plan: PrivateAggregate,
                         parameters: Parameters | None, offset: int) -> tuple[str, Shape]:
        types = parameters.types if parameters else ()
        # The shape of a statement with parameters is the same for all their values
        # (Parse/Describe read catalogs only). A bad value fails at the private query's
        # Bind (private_query.py), which tells it from an execution error and charges nothing.
        remembered = (text, types, plan) if parameters is not None else None
        shape = None if remembered is None else self.checker.shapes.get(remembered)
        written = None if shape is not None else \
            await self._as_written(backend, text, plan, types, offset)
        sql = await self._prepare(backend, plan, parameters)
        if shape is None:
            shape = await self._shape(backend, written, sql, plan, types, parameters)
            if remembered is not None:
                self.checker.shapes.put(remembered, shape)
        return sql, shape

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
