"""SHOW dp.last_answers: each analyst's recent answers with every column's error bar.

BI tools (Superset, Metabase, Grafana) never show a NOTICE, so their users would see
neither the charge nor the accuracy of what they were given. The proxy keeps, per analyst,
the last answers it released — the statement, each column's error at the configured
confidence, ε and δ charged — and answers `SHOW dp.last_answers` from that memory alone:
nothing in it was computed from private data except through released noisy values, so
showing it again costs nothing. It lives in this proxy's memory: a fleet of proxies
behind a load balancer shows each proxy's own, and a restart forgets them (the ledger
keeps the statements and charges).
"""

from __future__ import annotations

import datetime as dt
import threading
from collections import OrderedDict, deque
from dataclasses import dataclass

from rewriter.plan import OutputKind, PrivateAggregate

from ..pgwire import wire
from .computed_errors import NOT_STATED
from .first_rows import FirstRows

# Per analyst, and how many analysts are remembered (the least recently answered go).
ANSWERS_PER_ANALYST = 20
ANALYSTS = 10_000
# A statement longer than this is shown cut, with "…".
STATEMENT_CHARACTERS = 2000

LAST_ANSWERS_COLUMNS = [
    ("answered_at", wire.TEXT_OID), ("statement", wire.TEXT_OID),
    ("column_name", wire.TEXT_OID), ("error", wire.TEXT_OID),
    ("confidence", wire.FLOAT8_OID), ("epsilon", wire.FLOAT8_OID),
    ("delta", wire.FLOAT8_OID)]


@dataclass(frozen=True)
class RecentAnswer:
    answered_at: str
    statement: str
    columns: tuple[tuple[str, str], ...]  # (name, error)
    confidence: float
    epsilon: float
    delta: float


class RecentAnswers:
    """Shared by the sessions of one proxy; bounded per analyst and in analysts."""

    def __init__(self) -> None:
        self._answers: OrderedDict[str, deque[RecentAnswer]] = OrderedDict()
        self._lock = threading.Lock()  # release may run on a worker thread
        # Which stored answers answer a question with a smaller LIMIT (first_rows.py).
        self.first_rows = FirstRows()

    def add(self, analyst: str, answer: RecentAnswer) -> None:
        with self._lock:
            kept = self._answers.pop(analyst, None) or deque(maxlen=ANSWERS_PER_ANALYST)
            kept.append(answer)
            self._answers[analyst] = kept
            while len(self._answers) > ANALYSTS:
                self._answers.popitem(last=False)

    def rows(self, analyst: str) -> list[list[str | None]]:
        """One row per column of each answer, the newest answer first."""
        with self._lock:
            answers = list(self._answers.get(analyst, ()))
        return [[a.answered_at, a.statement, name, error, repr(a.confidence),
                 repr(a.epsilon), repr(a.delta)]
                for a in reversed(answers) for name, error in a.columns]


def recent_answer(statement: str, plan: PrivateAggregate, bounds: dict[str, int | str],
                  confidence: float, epsilon: float, delta: float, pure: bool
                  ) -> RecentAnswer:
    """What SHOW dp.last_answers lists of one fresh answer: the NOTICE's error bars, and
    for every other column why it has none."""
    columns = []
    for output, label in zip(plan.visible, plan.labels, strict=True):
        if label in bounds:
            error = f"±{bounds[label]}"
        elif output.kind == OutputKind.KEY:
            error = "a group key: no noise"
        elif not plan.parts:
            error = "public: no noise"
        elif not pure:
            error = "not shown: the noise follows this join's smooth sensitivity, which " \
                    "depends on the data"
        elif output.kind == OutputKind.COMPUTED:
            error = f"computed from the noisy values: no interval stated ({NOT_STATED})"
        else:
            error = "not shown"
        columns.append((label, error))
    return _answer(statement, columns, confidence, epsilon, delta)


def composite_answer(statement: str, releases: list[tuple[str, RecentAnswer]],
                     confidence: float, epsilon: float, delta: float) -> RecentAnswer:
    """A statement answered by several releases (each with its label): every release's
    columns under the one charge, named with their release where a set operation's
    branches repeat the names."""
    columns = []
    for label, one in releases:
        names = ", ".join(name for name, _ in one.columns)
        columns += [(name if label == names else f"{name} ({label})", error)
                    for name, error in one.columns]
    return _answer(statement, columns, confidence, epsilon, delta)


def repeated_answer(statement: str, names: list[str], confidence: float) -> RecentAnswer:
    """A repeated question: its stored answer was returned, free."""
    return _answer(statement, [(name, "as when first answered (a repeated question is "
                                "free)") for name in names], confidence, 0.0, 0.0)


def _answer(statement: str, columns: list[tuple[str, str]], confidence: float,
            epsilon: float, delta: float) -> RecentAnswer:
    if len(statement) > STATEMENT_CHARACTERS:
        statement = statement[:STATEMENT_CHARACTERS - 1] + "…"
    now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    return RecentAnswer(now, statement, tuple(columns), confidence, epsilon, delta)
