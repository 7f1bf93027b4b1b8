"""From a query string to its plans: the plan cache, else the rewriter within the limits
of one statement, measuring the join metrics it is missing first; for the simple protocol,
first through the string's shape with its WHERE literals lifted out (literals.py)."""

from __future__ import annotations

from collections.abc import Mapping

from rewriter.analysis.classify import Statement, classify
from rewriter.errors import Refusal
from rewriter.policy.model import Policy
from rewriter.policy.session import SESSION_BOUNDS, with_session_bounds, with_session_noise
from rewriter.sensitivity.metrics import ColumnKey, Metrics, MissingMetrics
from rewriter.sqlstate import SqlState

from ..config import Config, ServerSettings
from ..pgwire.backend import BackendError, BackendPool
from .errors import StatementError, client_error
from .knowledge import Knowledge, measure_column
from .limits import INLINE_ANALYSIS_SIZE, TooMuchWork, check_size, check_statement
from .literals import LiftedStatement, lift, relayed_as_written, usable
from .plan_cache import PlanCache
from .workers import Workers

# The session's settings its plans depend on: its bounds and its noise.
SESSION_NOISE = (*SESSION_BOUNDS, "dp.mechanism")


class Planner:
    """Plans query strings for every session of the process (its caches are shared)."""

    def __init__(self, config: Config, knowledge: Knowledge, plans: PlanCache,
                 pool: BackendPool, workers: Workers):
        self.config = config
        self.knowledge = knowledge
        self.plans = plans
        self.pool = pool
        self.workers = workers

    async def statements(self, sql: str, session: Mapping[str, str] | None = None,
                         analyst: str = "") -> list[Statement]:
        """Plans for a query string, from the cache or the rewriter, under the policy with
        the session's dp.max_contributions / dp.max_groups (`session`: its dp.* values);
        the analysis runs within `analyst`'s share of the worker threads.

        A join column met for the first time is measured (maxFreq) and the string is
        analysed again, so a metric is never guessed.
        """
        knowledge = self.knowledge
        if not knowledge.catalog_loaded:
            await self.learn()
        session = session or {}
        for _ in range(2):
            key = self._key(sql, session)
            cached = self.plans.get(key)
            if cached is not None:
                return cached
            try:
                statements = await self._analyse(sql, self.policy(session), analyst)
            except MissingMetrics as missing:
                await self.learn(missing.columns)
                continue
            self.plans.put(key, statements)
            return statements
        raise StatementError(SqlState.DATA_EXCEPTION, "dpgate could not measure the join metrics")

    def policy(self, session: Mapping[str, str]) -> Policy:
        """The policy as this session plans under it: its bounds and its noise."""
        return with_session_noise(with_session_bounds(self.config.policy, session),
                                  self._mechanism(session))

    def _mechanism(self, session: Mapping[str, str]) -> str:
        return session.get("dp.mechanism", self.config.privacy.default_mechanism)

    def _key(self, sql: str, session: Mapping[str, str]) -> tuple[str, int]:
        """The plan cache's key: the text, the session's bounds and noise if set, the
        metrics."""
        if not session:  # most sessions set no dp.* value
            return (sql, self.knowledge.metrics.version)
        bounds = "".join(f"\0{session.get(name, '')}" for name in SESSION_NOISE)
        return (sql + bounds if bounds.strip("\0") else sql, self.knowledge.metrics.version)

    def cached(self, sql: str, session: Mapping[str, str] | None = None
               ) -> list[Statement] | None:
        """The plans of a query string planned before, without waiting for anything (asked
        for every Query the fast relay sees: most sessions set no dp.* value)."""
        if not session:
            return self.plans.get((sql, self.knowledge.metrics.version))
        return self.plans.get(self._key(sql, session))

    async def lifted(self, sql: str, session: Mapping[str, str] | None = None,
                     analyst: str = "") -> list[Statement] | None:
        """The plans of a simple-query string not in the cache (callers ask `cached`
        first) through its lifted shape (literals.py): a private aggregate to answer with
        the shape's plan and the literals as parameters, or the string relayed as written
        when its shape is relayed unchanged (remembered for the string too, so it comes
        back from the cache next time). None when the string is to be planned as written
        (nothing to lift, or a shape that is refused or needs its values before the
        query)."""
        session = session or {}
        lifted = lift(sql) if len(sql) <= INLINE_ANALYSIS_SIZE else None
        if lifted is None:
            return None
        try:
            statements = await self.statements(lifted.text, session, analyst)
        except (Refusal, StatementError):
            return None  # the text as written gets its own analysis and its own error
        relayed = relayed_as_written(statements, lifted)
        if relayed is not None:
            # Which tables and functions a statement reads does not depend on its WHERE
            # literals: the original text is relayed, unchanged, as its shape would be.
            self.plans.put(self._key(sql, session), [relayed])
            return [relayed]
        if not usable(statements):
            return None
        return [LiftedStatement(lifted.text, 0, statements[0].plan, lifted.parameters)]

    async def _analyse(self, sql: str, policy: Policy, analyst: str) -> list[Statement]:
        """classify(), within the limits of limits.py, on a worker thread of the analyst's
        share: a few milliseconds for the shortest statement, which the event loop would
        lose for every other session (a plan cache hit skips it). Past
        server.analysis_timeout the analysis is stopped (workers.py)."""
        server = self.config.server
        try:
            check_size(sql, server)  # the rest of the measure is linear: on the thread
            return await self.workers.cpu_until(
                server.analysis_timeout, _classify_within_limits, sql, policy,
                self.knowledge.metrics, server, analyst=analyst)
        except TooMuchWork as limit:
            raise StatementError(limit.sqlstate, limit.message, limit.hint) from None
        except RecursionError:
            raise StatementError(SqlState.STATEMENT_TOO_COMPLEX,
                                 "statement is too complex for dpgate "
                                 "to analyse", hint="Split it or simplify it.") from None
        except TimeoutError:
            raise StatementError(SqlState.PROGRAM_LIMIT_EXCEEDED, "dpgate gave up analysing the "
                                 f"statement after {server.analysis_timeout:g} s",
                                 hint="Ask a shorter or simpler statement.") from None

    async def learn(self, columns: tuple[ColumnKey, ...] = ()) -> None:
        """Load the column names (once per process) and measure maxFreq of `columns`."""
        async with self.pool.connection() as backend:
            try:
                if not self.knowledge.catalog_loaded:
                    await self.knowledge.load_catalog(backend)
                measured = [await measure_column(backend, table, column)
                            for table, column in columns]
            except BackendError as error:  # a misspelt join column, say
                raise client_error(error) from None
        if measured:  # stored once the connection is back in the pool
            await self.knowledge.remember(measured)


def _classify_within_limits(sql: str, policy: Policy, metrics: Metrics,
                            server: ServerSettings) -> list[Statement]:
    """The statement measured (limits.py), then classified: both on the worker thread."""
    check_statement(sql, server)
    return classify(sql, policy, metrics)
