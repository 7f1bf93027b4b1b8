"""A private aggregate before its charge: everything that may fail for free.

The noise is calibrated (plan_cache.py), PostgreSQL parses the statement as written (its
own errors come first), the row-independent constants are computed and the rewritten
plan checked (plan_check.py), and the answer's shape is described: its parameter types
and the columns the client sees. Nothing here reads a private row or charges anything;
Describe of a private aggregate is `describe`, and nothing more. A statement answered by
several releases (a Composite) takes these steps for each, then has its `combine` SQL
described over no rows for the answer's columns.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from mechanisms.names import Mechanism
from rewriter.errors import Refusal
from rewriter.plan import Branch, Composite, PrivateAggregate
from rewriter.release.computed import BoundValues, with_branches
from rewriter.sensitivity.calibrate import Calibration, branch_budgets, composed
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

    async def describe(self, text: str, plan: PrivateAggregate | Composite,
                       types: tuple[int, ...] = (), offset: int = 0) -> Shape:
        """Parse the statement and its rewritten SQL on the backend without running them
        (no charge).

        Schema errors (a misspelt column) surface here and cannot depend on the rows.
        """
        async with self.pool.connection() as backend:
            written = await self._as_written(backend, text, plan, types, offset)
            types = tuple(written.parameters) if written is not None else types
            if isinstance(plan, Composite):
                runs = [await self._run(backend, branch, None, None, types)
                        for branch in plan.branches]
                return await self._combined(written, plan, runs, types)
            sql = await self._prepare(backend, plan, None, check=False)
            return await self._shape(backend, written, sql, plan, types, None)

    async def checked(self, text: str, plan: PrivateAggregate | Composite,
                      parameters: Parameters | None, offset: int) -> Checked:
        """Everything that may fail for free, on a connection borrowed for it alone:
        calibration, PostgreSQL's parse of the statement, constants, the plan check and
        the answer's shape; for a Composite, of each of its releases."""
        if isinstance(plan, Composite):
            return await self._checked_composite(text, plan, parameters, offset)
        async with self.pool.connection() as backend:
            calibration = await self._calibration(plan)
            sql, shape, parameters = await self._described(backend, text, plan, parameters,
                                                           offset)
        return Checked(calibration, shape, (Run(plan, sql, calibration, shape),), parameters)

    async def _checked_composite(self, text: str, plan: Composite,
                                 parameters: Parameters | None, offset: int) -> Checked:
        """Each release checked as a statement of its own, at its share of (ε, δ). Bound
        values go to every release with the types PostgreSQL gives the whole statement's
        parameters, so a release that reads only some of them is bound to all."""
        settings = self.settings
        plans = tuple(branch.plan for branch in plan.branches)
        budgets = branch_budgets(plans, settings.epsilon, settings.delta, settings.mechanism)
        types = parameters.types if parameters is not None else ()
        async with self.pool.connection() as backend:
            written = await self._as_written(backend, text, plan, types, offset)
            if parameters is not None and parameters.values:
                if written is None:
                    raise StatementError(SqlState.FEATURE_NOT_SUPPORTED, "parameters in a "
                                         "statement with median answered in several "
                                         "releases are not supported",
                                         hint="Write the values into the statement, or "
                                         "use percentile_cont(0.5) WITHIN GROUP (…).")
                parameters = replace(parameters, types=tuple(written.parameters))
            types = tuple(written.parameters) if written is not None else types
            runs = []
            for branch, (epsilon, delta) in zip(plan.branches, budgets, strict=True):
                calibration = await self._calibration(branch.plan, epsilon, delta)
                runs.append(await self._run(backend, branch, calibration, parameters, types))
        shape = await self._combined(written, plan, runs, types)
        return Checked(composed(tuple(run.calibration for run in runs), settings.epsilon),
                       shape, tuple(runs),
                       parameters, plan.combine)

    async def _run(self, backend: BackendConnection, branch: Branch,
                   calibration: Calibration | None, parameters: Parameters | None,
                   types: tuple[int, ...]) -> Run:
        """One release of a Composite, its branch's statement described as written (its
        columns' types), its SQL prepared (checked unless only described: no calibration)."""
        written = await self._as_written(backend, branch.text, branch.plan, types, 0)
        sql = await self._prepare(backend, branch.plan, parameters, check=calibration is not None)
        shape = await self._shape(backend, written, sql, branch.plan, types, parameters)
        label = branch.label or ", ".join(output.name for output in branch.plan.visible)
        names = await self._type_names(backend, tuple(t for _, t in shape.columns))
        return Run(branch.plan, sql, calibration or Calibration(0.0, 0.0, True, (), None),
                   shape, label, names)

    async def _combined(self, written: Described | None, plan: Composite, runs: list[Run],
                        types: tuple[int, ...]) -> Shape:
        """The answer's columns: the statement's as PostgreSQL reads it, else those of
        `combine` over no released row (a statement with median)."""
        empty = with_branches(plan.combine, [([], run.type_names) for run in runs],
                              BoundValues(0))
        columns = (await self._probe(empty, ())).columns
        if written is not None and len(written.columns) == len(columns):
            columns = written.columns
        return Shape(list(types), [], columns, [], columns, [])

    async def _calibration(self, plan: PrivateAggregate, epsilon: float | None = None,
                           delta: float | None = None) -> Calibration:
        """The plan's calibration at the session's (ε, δ), or at a Composite's share."""
        settings = self.settings
        epsilon = settings.epsilon if epsilon is None else epsilon
        delta = settings.delta if delta is None else delta
        if plan.unit is not None and plan.unit.cells_by_size and \
                settings.mechanism == Mechanism.GAUSSIAN:
            # Planned before SET dp.mechanism (a prepared statement): its SQL returns the
            # rows per unit size, not the whole rows per unit Gaussian cells keep.
            raise StatementError(SqlState.FEATURE_NOT_SUPPORTED, "this statement was "
                                 "prepared for another dp.mechanism than the session's "
                                 "gaussian; nothing was charged",
                                 hint="Prepare it again after SET dp.mechanism.")
        try:
            share = self.config.privacy.sum_count_share
            calibration = calibrate_cached.get(plan, epsilon, delta, settings.mechanism, share)
            if calibration is None:
                # The first calibration of a join scans the smooth sensitivity: off the loop,
                # and stopped (free: nothing ran yet) when it takes longer than an analysis.
                calibration = await self.workers.cpu_until(
                    self.config.server.analysis_timeout, calibrate_cached, plan,
                    epsilon, delta, settings.mechanism, share, analyst=self.analyst)
        except Refusal as refusal:
            raise client_error(refusal) from None
        except TimeoutError:
            raise StatementError(SqlState.PROGRAM_LIMIT_EXCEEDED, "dpgate gave up calibrating "
                                 f"the noise after {self.config.server.analysis_timeout:g} s; "
                                 "nothing was charged",
                                 hint="Ask with a larger dp.epsilon.") from None
        return calibration

    async def _described(self, backend: BackendConnection, text: str, plan: PrivateAggregate,
                         parameters: Parameters | None, offset: int
                         ) -> tuple[str, Shape, Parameters | None]:
        """The SQL to run, the answer's shape, and the parameters typed as PostgreSQL types
        the statement's: a parameter sent untyped that only the computed columns or HAVING
        read is not in the rewritten SQL, which could not type it."""
        types = parameters.types if parameters else ()
        # The shape of a statement with parameters is the same for all their values
        # (Parse/Describe read catalogs only). A bad value fails at the private query's
        # Bind (private_query.py), which tells it from an execution error and charges nothing.
        remembered = (text, types, plan) if parameters is not None else None
        shape = None if remembered is None else self.checker.shapes.get(remembered)
        written = None if shape is not None else \
            await self._as_written(backend, text, plan, types, offset)
        if parameters is not None and written is not None:
            types = tuple(written.parameters)
            parameters = replace(parameters, types=types)
        elif parameters is not None and shape is not None:
            parameters = replace(parameters, types=tuple(shape.parameters))
        sql = await self._prepare(backend, plan, parameters)
        if shape is None:
            shape = await self._shape(backend, written, sql, plan, types, parameters)
            if remembered is not None:
                self.checker.shapes.put(remembered, shape)
        return sql, shape, parameters

    async def _prepare(self, backend: BackendConnection, plan: PrivateAggregate,
                       parameters: Parameters | None, check: bool = True) -> str:
        """The SQL to run, its constants computed and its plan checked, before any charge."""
        try:
            return await self.checker.prepare(backend, plan, parameters, check)
        except (Refusal, BackendError) as error:
            raise client_error(error) from None

    @staticmethod
    async def _as_written(backend: BackendConnection, text: str,
                          plan: PrivateAggregate | Composite, types: tuple[int, ...],
                          offset: int) -> Described | None:
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
        names = await self._type_names(backend, oids)
        return Shape(described.parameters, key_types,
                     outer.columns if plan.outer is not None and outer else columns,
                     [(name, t) for name, (_, t) in zip(names[:len(released)], released,
                                                        strict=True)],
                     columns, names[len(released):])

    async def _type_names(self, backend: BackendConnection, oids: tuple[int, ...]
                          ) -> list[str]:
        names = self.checker.type_names.get(oids)  # an OID names one type for good
        if names is None:
            names = await type_names(backend, list(oids))
            self.checker.type_names.put(oids, names)
        return names

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


@dataclass(frozen=True)
class Run:
    """One release of an answer: its plan, the SQL to run, its calibration and shape;
    for a Composite's, `label` names it in the NOTICE and `type_names` are those of the
    columns it gives the SQL that combines the releases."""

    plan: PrivateAggregate
    sql: str
    calibration: Calibration
    shape: Shape
    label: str = ""
    type_names: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Checked:
    """A private answer after its free steps: what it is charged (a Composite's, the sum
    of its releases'), the answer's shape, each release, the values bound to every
    release, and the SQL that combines their released rows (a Composite's; None: the one
    release is the answer)."""

    calibration: Calibration
    shape: Shape
    runs: tuple[Run, ...]
    parameters: Parameters | None = None
    combine: str | None = None
