"""A session's dp.* settings: SET/RESET dp.epsilon, dp.delta, dp.mechanism,
dp.max_contributions and dp.max_groups, and SHOW of them, of dp.budget, of dp.policy and
of dp.last_answers (recent.py)."""

from __future__ import annotations

import math
from collections.abc import Callable

from accounting import Analyst, Ledger, as_written
from rewriter.plan import SetDpSetting, ShowDpSetting
from rewriter.policy.model import Policy
from rewriter.policy.session import MAX_SESSION_BOUND, SESSION_BOUNDS, with_session_bounds
from rewriter.policy.view import POLICY_COLUMNS, policy_rows
from rewriter.sensitivity.calibrate import MECHANISMS
from rewriter.sqlstate import SqlState

from ..config import Config
from ..pgwire import wire
from .errors import StatementError, ledger_call
from .outcome import Answer
from .planning import Planner
from .recent import LAST_ANSWERS_COLUMNS, RecentAnswers
from .workers import Workers

# SHOW dp.budget
BUDGET_COLUMNS = [(name, wire.FLOAT8_OID) for name in (
    "epsilon_total", "epsilon_spent", "epsilon_left", "delta_total", "delta_spent")
] + [("queries", wire.INT8_OID)]
# SHOW dp.policy
POLICY_ANSWER_COLUMNS = [(name, wire.TEXT_OID) for name in POLICY_COLUMNS]


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


def _bound(text: str) -> str:
    value = int(text)
    if not 1 <= value <= MAX_SESSION_BOUND:
        raise ValueError(text)
    return str(value)


def _mechanism(text: str) -> str:
    if text.lower() not in MECHANISMS:
        raise ValueError(text)
    return text.lower()


# Session settings: name -> (parser to the stored text, what a valid value is).
DP_SETTINGS: dict[str, tuple[Callable[[str], str], str]] = {
    "dp.epsilon": (_positive, "a positive number"),
    "dp.delta": (_probability, "a number from 0 to 1 (excluded)"),
    "dp.mechanism": (_mechanism, "one of " + ", ".join(MECHANISMS)),
    **{name: (_bound, f"a whole number from 1 to {MAX_SESSION_BOUND}")
       for name in SESSION_BOUNDS},
}


class DpSettings:
    """One session's dp.* values (the configured defaults until SET)."""

    def __init__(self, analyst: Analyst, config: Config, ledger: Ledger, workers: Workers,
                 planner: Planner, recent: RecentAnswers | None = None):
        self.analyst = analyst
        # The proxy's memory of recent answers (SHOW dp.last_answers), shared by sessions.
        self.recent = recent or RecentAnswers()
        self.config = config
        self.ledger = ledger
        self.workers = workers
        self.planner = planner
        self.values: dict[str, str] = {}

    @property
    def epsilon(self) -> float:
        """ε charged per query (SET dp.epsilon, else privacy.default_epsilon)."""
        return float(self.values.get("dp.epsilon", self.config.privacy.default_epsilon))

    @property
    def delta(self) -> float:
        """δ of a query that needs one (SET dp.delta, else privacy.default_delta)."""
        return float(self.values.get("dp.delta", self.config.privacy.default_delta))

    @property
    def mechanism(self) -> str:
        """The noise (SET dp.mechanism, else privacy.default_mechanism)."""
        return self.values.get("dp.mechanism", self.config.privacy.default_mechanism)

    @property
    def policy(self) -> Policy:
        """The policy with this session's dp.max_contributions / dp.max_groups, if any."""
        return with_session_bounds(self.config.policy, self.values)

    def clear(self) -> None:
        """RESET ALL or DISCARD ALL ran: back to the defaults."""
        self.values.clear()

    def set(self, plan: SetDpSetting) -> str:
        """SET or RESET a dp.* setting of this session; returns the command tag."""
        if plan.name not in DP_SETTINGS:
            raise StatementError(SqlState.UNDEFINED_OBJECT,
                                 f'unrecognized configuration parameter "{plan.name}"',
                                 hint=f"dpgate knows {', '.join(DP_SETTINGS)}.")
        if plan.value is None:
            self.values.pop(plan.name, None)
        else:
            parse, what = DP_SETTINGS[plan.name]
            # SET's value comes as tokens: "- 1" is the number -1.
            written = plan.value.strip("'").replace(" ", "")
            try:
                value = parse(written)
            except ValueError:
                raise StatementError(SqlState.INVALID_PARAMETER_VALUE,
                                     f"{plan.name} must be {what}{self._range(plan.name)}, "
                                     f"not {written}") from None
            self._check_range(plan.name, value)
            self.values[plan.name] = value
        return "RESET" if plan.value is None else "SET"

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
        if name in SESSION_BOUNDS and self.config.policy.unit is None:
            raise StatementError(SqlState.INVALID_PARAMETER_VALUE, f"{name} needs a privacy "
                                 "unit, and the policy names none (row-level privacy)",
                                 hint="The data owner declares one: [policy] privacy_unit.")
        if name not in ranges or (name == "dp.delta" and float(value) == 0):
            return
        low, high, setting = ranges[name]
        if not low <= float(value) <= high:
            raise StatementError(
                SqlState.INVALID_PARAMETER_VALUE,
                f"{name} must be between {low:g} and {high:g}, not {float(value):g}",
                hint=f"The data owner sets the range (privacy.min_{setting}, "
                f"privacy.max_{setting}).")

    async def show(self, plan: ShowDpSetting) -> Answer:
        """SHOW dp.epsilon / dp.delta / dp.mechanism / dp.budget / dp.policy /
        dp.last_answers."""
        if plan.name in DP_SETTINGS:
            unit = self.policy.unit
            value = {"dp.epsilon": repr(self.epsilon), "dp.delta": repr(self.delta),
                     "dp.mechanism": self.mechanism,
                     "dp.max_contributions": str(unit.max_contributions) if unit else "",
                     "dp.max_groups": str(unit.max_groups) if unit else ""}[plan.name]
            return Answer([(plan.name, wire.TEXT_OID)], [[value]], "SHOW")
        if plan.name == "dp.budget":
            budget = await ledger_call(self.workers.ledger_read, self.ledger.budget,
                                       self.analyst.name)
            values = [budget.epsilon_total, budget.epsilon_spent, budget.epsilon_left,
                      budget.delta_total, budget.delta_spent, budget.queries]
            return Answer(BUDGET_COLUMNS, [[repr(as_written(v) if isinstance(v, float) else v)
                                            for v in values]], "SHOW")
        if plan.name == "dp.last_answers":
            rows = self.recent.rows(self.analyst.name)
            return Answer(LAST_ANSWERS_COLUMNS, rows, f"SELECT {len(rows)}")
        if plan.name == "dp.policy":
            knowledge = self.planner.knowledge
            if not knowledge.catalog_loaded:
                await self.planner.learn()
            rows = policy_rows(self.config.policy, knowledge.metrics.columns)
            return Answer(POLICY_ANSWER_COLUMNS, rows, f"SELECT {len(rows)}")
        raise StatementError(SqlState.UNDEFINED_OBJECT,
                             f'unrecognized configuration parameter "{plan.name}"',
                             hint=f"dpgate knows {', '.join(DP_SETTINGS)}, dp.budget, "
                             "dp.policy and dp.last_answers.")

    @staticmethod
    def show_columns(plan: ShowDpSetting) -> list[tuple[str, int]]:
        """The columns `show` answers with, for Describe (which must not run anything)."""
        if plan.name == "dp.policy":
            return POLICY_ANSWER_COLUMNS
        if plan.name == "dp.last_answers":
            return LAST_ANSWERS_COLUMNS
        return BUDGET_COLUMNS if plan.name == "dp.budget" else [(plan.name, wire.TEXT_OID)]
