"""The one dispatcher from plan kind to action, shared by the simple and the extended
protocol. Relayed statements are the protocol layer's (they travel as the client's own
messages); every other plan is answered here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import assert_never

from accounting import Analyst, Ledger
from mechanisms.random_source import RandomSource
from rewriter.analysis.classify import Statement
from rewriter.errors import Refusal
from rewriter.plan import (
    ColumnProbe,
    Composite,
    EmptyStatement,
    Plan,
    PrivateAggregate,
    Relay,
    SetDpSetting,
    ShowDpSetting,
)
from rewriter.sqlstate import SqlState

from ..config import Config
from ..pgwire import wire
from ..pgwire.backend import BackendError, BackendPool, Parameters
from ..pgwire.codes import ErrorField
from ..pgwire.running import Running
from .binary import binary_rows
from .charge_batches import ChargeBatches
from .column_probes import describe_probe, probe_answer
from .dp_settings import DpSettings
from .errors import StatementError, client_error
from .fair import FairShares
from .literals import LiftedStatement, LiftFailed
from .outcome import Answer, Outcome, Reply
from .plan_check import PlanChecker
from .planning import Planner
from .private import PrivateAnswers
from .private_query import INLINE_RELEASE_ROWS, ChargeReport
from .reader_time import ReaderTime
from .recent import RecentAnswers
from .workers import Workers

_MULTIPLE_COMMANDS = "cannot insert multiple commands into a prepared statement"
_DPGATE_FUNCTIONS = ("function median(",)


@dataclass(frozen=True)
class Description:
    """What Describe tells of a statement dpgate answers itself: its parameter types and
    result columns (none: NoData)."""

    parameter_types: tuple[int, ...] = ()
    columns: tuple[tuple[str, int], ...] = ()


# Anonymous records and their arrays: PostgreSQL has no input function for them.
_NO_TEXT_INPUT = frozenset({2249, 2287})


class Engine:
    """One analyst session's answers to the plans dpgate answers itself."""

    def __init__(self, analyst: Analyst, config: Config, ledger: Ledger, pool: BackendPool,
                 rng: RandomSource, planner: Planner, checker: PlanChecker,
                 workers: Workers, running: Running,
                 report_charge: ChargeReport | None = None,
                 charges: ChargeBatches | None = None, readers: FairShares | None = None,
                 released: BackendPool | None = None, recent: RecentAnswers | None = None,
                 reader_seconds: ReaderTime | None = None):
        self.pool = pool
        self.planner = planner
        self.analyst = analyst.name
        # recent: the proxy's memory of answers for SHOW dp.last_answers (this engine's
        # own without one).
        self.settings = DpSettings(analyst, config, ledger, workers, planner, recent)
        # report_charge: how proxy/ops learns what each statement was charged.
        # charges, readers, reader_seconds: the proxy's ChargeBatches, fair shares of the
        # reader connections and reader-seconds, shared by its sessions (this engine's own
        # without them).
        self.private = PrivateAnswers(analyst, config, ledger, pool, rng, checker, workers,
                                      self.settings, running, report_charge,
                                      charges or ChargeBatches(ledger, workers), readers,
                                      released, reader_seconds)

    async def plan(self, sql: str) -> list[Statement]:
        """A simple-query string's plans: from the plan cache, else through its lifted
        shape (literals.py), else planned as written (planning.py)."""
        return self.cached(sql) or await self.planner.lifted(
            sql, self.settings.values, self.analyst) or await self.statements(sql)

    async def statements(self, sql: str) -> list[Statement]:
        """The plans of a query string as written (see Planner.statements)."""
        return await self.planner.statements(sql, self.settings.values, self.analyst)

    def cached(self, sql: str) -> list[Statement] | None:
        """A query string's plans if it was planned before (Planner.cached)."""
        return self.planner.cached(sql, self.settings.values)

    async def answer(self, statement: Statement) -> Outcome:
        """A statement of a simple query that dpgate answers itself. A lifted one that
        fails before its charge is answered as written instead, with its own error."""
        if not isinstance(statement, LiftedStatement):
            return await self.execute(statement.text, statement.plan, offset=statement.offset)
        try:
            return await self.execute(statement.text, statement.plan, statement.parameters)
        except LiftFailed:
            # The shape was one statement, and so is the text: only its literals differ.
            (original,) = await self.statements(statement.parameters.original)
            if isinstance(original.plan, Refusal):
                raise await self.refused(original.text, original.plan, original.offset
                                         ) from None
            return await self.execute(original.text, original.plan, offset=original.offset)

    async def execute(self, text: str, plan: Plan | Refusal,
                      parameters: Parameters | None = None, offset: int = 0) -> Outcome:
        """Answer a plan that is not relayed: rows, or a single message."""
        match plan:
            case PrivateAggregate() | Composite():
                return await self.private.answer(text, plan, parameters, offset)
            case SetDpSetting():
                return Reply(wire.command_complete(self.settings.set(plan)))
            case ShowDpSetting():
                return await self.settings.show(plan)
            case EmptyStatement():
                return Reply(wire.empty_query_response())
            case ColumnProbe():
                return await probe_answer(self.private.released, text, plan,
                                          parameters.types if parameters else (), offset)
            case Relay() | Refusal():  # the protocol layer's: relayed, or refused
                raise TypeError(f"the engine does not answer {type(plan).__name__} plans")
            case _:
                assert_never(plan)

    async def describe(self, text: str, plan: Plan, types: tuple[int, ...]) -> Description:
        """Parameter types and result columns, without running or charging anything."""
        match plan:
            case PrivateAggregate() | Composite():
                shape = await self.private.describe(text, plan, types)
                return Description(tuple(shape.parameters), tuple(shape.columns))
            case ShowDpSetting():
                return Description(columns=tuple(self.settings.show_columns(plan)))
            case ColumnProbe():
                described = await describe_probe(self.private.released, text, types)
                return Description(tuple(described.parameters), tuple(described.columns))
            case SetDpSetting() | EmptyStatement() | Relay():
                return Description()
            case _:
                assert_never(plan)

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
                        return client_error(error, offset)
        return client_error(refusal)

    @staticmethod
    def refuse_unencodable(columns: tuple[tuple[str, int], ...], formats: tuple[int, ...]
                           ) -> None:
        """Refuse, before anything runs or is charged, binary results dpgate cannot make
        (`encode` has PostgreSQL read each value's text form back, and it cannot read an
        anonymous record: `SELECT (count(*), 1)`)."""
        for index, (name, type_oid) in enumerate(columns):
            binary = formats[index if len(formats) > 1 else 0] if formats else 0
            if binary and type_oid in _NO_TEXT_INPUT:
                raise StatementError(SqlState.FEATURE_NOT_SUPPORTED,
                                     f'column "{name}" is an anonymous record, which dpgate '
                                     "cannot send in binary format",
                                     hint="Ask for text results, or select its fields as "
                                     "columns of their own.")

    async def encode(self, answer: Answer, formats: tuple[int, ...]) -> list[bytes]:
        """DataRow messages of an answer in the client's result formats."""
        if not any(formats):
            return answer.text_rows()
        types = [oid for _, oid in answer.columns]
        # Encoded here when every value's type is one binary.py knows: no round trip. A
        # long answer on a worker thread, as its text rows are.
        local = binary_rows(answer.rows, types, formats) \
            if len(answer.rows) <= INLINE_RELEASE_ROWS else await self.private.workers.cpu(
                binary_rows, answer.rows, types, formats, analyst=self.analyst)
        if local is not None:
            return local
        async with self.pool.connection() as backend:
            try:
                return await backend.encode(answer.rows, types, list(formats))
            except BackendError as error:
                # A type whose text form PostgreSQL cannot read back: a limit of dpgate's,
                # not an internal error. The answer is stored, so asking again is free.
                raise StatementError(SqlState.FEATURE_NOT_SUPPORTED,
                                     f"dpgate cannot send this answer in binary format: "
                                     f"{error}", hint="Ask again for text results: the "
                                     "answer is stored, so it is not charged again."
                                     ) from None


def _ours(error: BackendError) -> bool:
    """Whether dpgate's refusal says more than PostgreSQL's error: a query string of several
    statements cannot be parsed in one go, and dpgate's own aggregates are unknown there."""
    text = error.fields.get(ErrorField.MESSAGE, "")
    return text == _MULTIPLE_COMMANDS or (
        error.sqlstate == SqlState.UNDEFINED_FUNCTION and text.startswith(_DPGATE_FUNCTIONS))
