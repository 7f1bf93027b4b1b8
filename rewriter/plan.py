"""What the rewriter decides for one statement. Plain data, consumed by the proxy."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from fractions import Fraction

from mechanisms.exponential import QuantileGrid

from .analysis.constants import Constant
from .checks.plan_joins import JoinKeys
from .sensitivity.elastic import Elastic

# Aggregates answered by the exponential mechanism rather than by noise.
CHOICES = ("mode", "quantile")


@dataclass(frozen=True)
class Relay:
    """Harmless catalog or session statement: send the original text to the backend.

    `resets_dp` marks RESET ALL / DISCARD ALL, which also reset the session's dp.* settings.
    `deallocates` names the prepared statement a DEALLOCATE drops; `deallocates_all` marks
    DEALLOCATE ALL / DISCARD ALL, which drop every one (and every portal with DISCARD).
    """

    text: str
    resets_dp: bool = False
    deallocates: str | None = None
    deallocates_all: bool = False


@dataclass(frozen=True)
class SetDpSetting:
    """SET dp.NAME = value (value None: RESET dp.NAME)."""

    name: str
    value: str | None


@dataclass(frozen=True)
class ShowDpSetting:
    name: str


@dataclass(frozen=True)
class NoisyPart:
    """One aggregate the backend computes and the proxy noises, or one choice.

    `elastic` is ES(k) for one unit of the aggregated value; `magnitude` is that unit
    (max(|lo|, |hi|) for a clamped SUM, 1 for a count). A choice ("mode" or "quantile")
    is made by the exponential mechanism from the backend's count per candidate, with
    Δu = `elastic` (the ES of that count); a quantile has its level p and public grid.
    """

    aggregate: str  # "count", "sum", "mode" or "quantile"
    elastic: Elastic
    magnitude: float = 1.0
    level: Fraction | None = None
    grid: QuantileGrid | None = None
    # Unit mode: `elastic` is then the constant L1 sensitivity per unit (in
    # units of `magnitude`), `row_elastic` the row-level FLEX ES(k) shown beside it, and
    # `l2` the L2 sensitivity per unit (in units of `magnitude`) for the Gaussian.
    row_elastic: Elastic | None = None
    l2: float | None = None
    # A sum whose clamping bounds are chosen at release (rewrite.PartSpec.edges), and
    # whether it is an AVG's sum of x − (L + U)/2.
    edges: tuple[Fraction, ...] | None = None
    centred: bool = False
    # Unit mode bounded by weights (rewriter/aggregate/weighted.py): a count is then a sum of
    # weights, a real number.
    weighted: bool = False
    # A SUM's own hidden count of its non-NULL values (no COUNT of them in the statement
    # could serve): the index of that sum's part, whose ε it takes a share of
    # (calibrate.py's sum_count_share). The SUM is released as NULL when this count's
    # released value is below 0.5, as PostgreSQL's SUM over no value is NULL.
    presence_of: int | None = None

    @property
    def integer(self) -> bool:
        return self.aggregate == "count" and not self.weighted

    @property
    def choice(self) -> bool:
        return self.aggregate in CHOICES


class OutputKind(StrEnum):
    """What a column of a private answer is (a StrEnum: equal to its string)."""

    KEY = "key"  # a group key, released as it is
    NOISY = "noisy"  # an aggregate with additive noise
    CHOICE = "choice"  # an exponential-mechanism answer (mode, min, max, percentiles)
    COMPUTED = "computed"  # an expression over released values (post_sql)


@dataclass(frozen=True)
class OutputColumn:
    """A column of the answer: a group key as it is, a noisy aggregate or a choice.

    `parts` indexes NoisyPart for a noisy column (AVG has a sum and a count) or a choice,
    or the group key for a key. Hidden columns feed ORDER BY and HAVING but are not sent.
    """

    name: str
    kind: OutputKind
    # count, count_distinct, sum, avg; for a choice: mode, min, max, percentile_cont,
    # percentile_disc (median is percentile_cont)
    aggregate: str | None
    parts: tuple[int, ...]
    hidden: bool = False
    bounds: tuple[float, float] | None = None
    # A SUM: the noisy count of its non-NULL values (its own, or a COUNT or AVG of the same
    # values in the statement) whose released value below 0.5 releases the SUM as NULL.
    present: int | None = None


@dataclass(frozen=True)
class UnitBounds:
    """A plan answered in unit mode: the unit and the contribution bounds.

    `groups` and `group_rows` are κ' = min(κ, τ) and τ_g' = min(τ_g, τ): the most groups
    one unit can reach, and its most rows in one group (key selection's threshold).
    """

    unit: str  # "schema.table.column"
    max_contributions: int  # τ
    max_groups: int  # κ
    max_group_contributions: int  # τ_g
    # A lone COUNT(*): the backend returns the histogram of per-unit row counts
    # (bounding.contribution_histogram), capped at `counts_cap`; the proxy answers at τ
    # from it, or first chooses τ ≤ `chosen_limit` privately when that is set.
    counts_cap: int | None = None
    chosen_limit: int | None = None
    # A count histogram at a chosen τ whose cells need no whole rows (any noise but the
    # Gaussian): the backend returns per key and unit size n the rows of such units
    # (bounding.weighted_rows), not the units' rows per cell (bounding.cell_contributions).
    cells_by_size: bool = False
    # SUM, AVG, the variance family and counts beside them: the backend returns per group
    # and per unit size n their aggregates (bounding.weighted_rows), n capped at
    # `weights_cap` for the choice of τ; the proxy weighs each by min(1, τ/n).
    weights_cap: int | None = None
    # A chosen-τ histogram whose keys are read from the rows, none from the unit's own
    # table or its unit column: a unit's rows may fall in several of its groups, so the
    # release may answer it as its units' shape times its total (chosen_bound.py).
    spread_keys: bool = False

    @property
    def groups(self) -> int:
        return min(self.max_groups, self.max_contributions)

    @property
    def group_rows(self) -> int:
        return min(self.max_group_contributions, self.max_contributions)


@dataclass(frozen=True)
class Grouping:
    """How the groups of a GROUP BY are chosen.

    Either the backend returns every key of the declared domains (`domain_size` cells, or
    None when a public table supplies the domain), or only the groups whose noisy count
    (part `selection_part`) passes the τ threshold are released. `occupied_by` and
    `domain_unnarrowed` concern declared domains only.
    """

    keys: int
    key_selection: bool
    selection_part: int | None = None
    domain_size: int | None = None
    # Over a declared domain whose groups the statement orders or limits: the output (a
    # COUNT(*)) whose released value, ≤ 0, drops its group (docs/queries.md).
    occupied_by: int | None = None
    # A WHERE condition on a key alone did not narrow its declared domain (it holds a
    # public subquery's values, computed before the query): the NOTICE says so.
    domain_unnarrowed: bool = False


@dataclass(frozen=True)
class Comparison:
    op: str  # "=", "<>", "<", "<=", ">", ">="
    left: int | float | str  # an int is an output index when `left_is_column`
    right: int | float | str
    left_is_column: bool = True
    right_is_column: bool = False


@dataclass(frozen=True)
class Condition:
    """HAVING, evaluated by the proxy on noisy values: "and"/"or"/"not" or a comparison."""

    op: str
    items: tuple[Condition | Comparison, ...]


@dataclass(frozen=True)
class PostProcess:
    """HAVING, ORDER BY and LIMIT, applied to the noisy answer, never to true values."""

    having: Condition | Comparison | None = None
    order: tuple[tuple[int, bool], ...] = ()  # (output index, descending)
    limit: int | None = None
    offset: int = 0


@dataclass(frozen=True)
class Computed:
    """The statement over released values (release/computed.py), when the answer is not the
    released outputs as they are: `probe_sql` is described for each output's PostgreSQL
    type; `post_sql`, when an output is an expression over released values, runs over the
    released rows and is the answer (None: the released outputs are, typed by the probe).
    """

    probe_sql: str
    post_sql: str | None = None
    # Per visible output, what its value can take whatever the data (a variance of a
    # bounded column: Popoviciu's bound), or None: its interval is clipped to it.
    ranges: tuple[tuple[float, float] | None, ...] = ()


@dataclass(frozen=True)
class Outer:
    """A query over the aggregate as a subquery or CTE (release/outer.py): `sql` runs over
    the answer of `inner_sql`, which it names `alias`."""

    sql: str
    alias: str
    inner_sql: str


@dataclass(frozen=True)
class PlanChecks:
    """What the proxy verifies on PostgreSQL before the charge (proxy/engine/plan_check.py).

    `scans`: the private base tables the analysis saw, once per occurrence; `windows`: the
    window functions of dpgate's own contribution bounding in the SQL (PostgreSQL's plan
    may show that many WindowAgg nodes and no more); `join_keys`: the base columns the
    analysis joined on and the alias lists it read, the only columns PostgreSQL's plan may
    join private rows on (plan_joins.py; None: unchecked); `cells_sql`: the number of
    cells of a histogram whose domain a public table supplies, refused above max_cells;
    `reads`: where dpgate's SQL reads the statement's rows more than once (weights read
    them twice where the reads agree: bounding.weighted_rows), the SQL of each read: each
    is checked on its own, with the analysis's scans, and the statement may scan each
    private table that many times per scan the analysis saw. (Pooled over the reads, one
    read could scan a table once more than the analysis saw where PostgreSQL left a scan
    out of the other, a join it removed as unused there.)
    """

    scans: tuple[str, ...] = ()
    windows: int = 0
    join_keys: JoinKeys | None = None
    cells_sql: str | None = None
    reads: tuple[str, ...] = ()


@dataclass(frozen=True)
class PrivateAggregate:
    """A query over private tables, rewritten to return true aggregates for noising.

    The rewritten `sql` returns the group keys first, then one column per NoisyPart.
    A choice plan (every part a choice) returns instead one row per candidate: the
    candidate as k0 (a domain key for a mode; for a quantile an always-NULL k0 carries
    the column's type and k1 is the grid index), then its count c0.
    `fingerprint_text` is the normalized statement: equal texts mean the same question.
    `private_tables` is D, the degree bound of every part's ES(k). `postgres_sql` is
    False when the statement uses dpgate's own aggregates (median), so PostgreSQL cannot
    check it as written.
    """

    sql: str
    keys: int
    parts: tuple[NoisyPart, ...]
    outputs: tuple[OutputColumn, ...]
    grouping: Grouping | None
    post: PostProcess
    private_tables: int
    fingerprint_text: str
    tables: tuple[str, ...]
    postgres_sql: bool = True
    # Row-independent values the proxy has PostgreSQL compute first (constants.py).
    constants: tuple[Constant, ...] = ()
    checks: PlanChecks = PlanChecks()
    # Unit mode, or None: row-level FLEX. `row_level_reason` says why a policy
    # with a unit answered this statement at row level (row_level_fallback).
    unit: UnitBounds | None = None
    row_level_reason: str | None = None
    computed: Computed | None = None
    outer: Outer | None = None

    def __post_init__(self) -> None:
        assert self.unit is None or self.row_level_reason is None, "unit mode or row level"

    @property
    def visible(self) -> tuple[OutputColumn, ...]:
        return tuple(column for column in self.outputs if not column.hidden)

    @property
    def labels(self) -> tuple[str, ...]:
        """What each visible column's error bar is said of: its name, numbered "(2)",
        "(3)"… after the first where names repeat (each unnamed expression is ?column?)."""
        seen: dict[str, int] = {}
        labels = []
        for column in self.visible:
            seen[column.name] = seen.get(column.name, 0) + 1
            labels.append(column.name if seen[column.name] == 1 else
                          f"{column.name} ({seen[column.name]})")
        return tuple(labels)

    @property
    def post_sql(self) -> str | None:
        """The statement's own expressions over the released rows (Computed), if any."""
        return None if self.computed is None else self.computed.post_sql


@dataclass(frozen=True)
class Branch:
    """One release of a Composite: a private aggregate, and the statement it answers as a
    statement of its own (PostgreSQL describes it for the release's column types)."""

    text: str
    plan: PrivateAggregate
    label: str = ""  # how the NOTICE and SHOW dp.last_answers name its columns' release


@dataclass(frozen=True)
class Composite:
    """A statement answered by several private releases under one charge (composite.py):
    a quantile beside noisy aggregates, a UNION/INTERSECT/EXCEPT of private aggregates, or
    a LIMIT/OFFSET by a private aggregate.

    Each branch is released as a PrivateAggregate with its share of ε (and δ); `combine`
    then runs over the released rows only (post-processing), branch i's rows as a VALUES
    list in place of `branch_table(i)`, and is the answer. The charge is the sum of the
    branches' charges, made once, before any value leaves.
    """

    branches: tuple[Branch, ...]
    combine: str
    fingerprint_text: str

    @property
    def postgres_sql(self) -> bool:
        """Whether PostgreSQL can parse the statement as written (no median)."""
        return all(branch.plan.postgres_sql for branch in self.branches)


def branch_table(index: int) -> str:
    """Where a Composite's `combine` reads branch `index`'s released rows."""
    return f"__dpgate_branch_{index}__"


@dataclass(frozen=True)
class EmptyStatement:
    pass


@dataclass(frozen=True)
class ColumnProbe:
    """A statement dpgate refuses, asked with LIMIT 0 or 1 as BI tools ask for a query's
    columns: answered with PostgreSQL's Describe of it and no row, `refused` (the
    refusal's message) in the NOTICE (probes.py)."""

    limit: int
    refused: str


Plan = (Relay | SetDpSetting | ShowDpSetting | PrivateAggregate | Composite | EmptyStatement
        | ColumnProbe)
