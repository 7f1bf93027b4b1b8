"""The relations a query reads, as data: sources (FROM items), relations (their join,
with its stability S(k)), derived columns and resolved column references."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from sqlglot import exp

from ..sensitivity.elastic import Elastic
from ..sensitivity.metrics import ColumnKey


@dataclass(frozen=True)
class DerivedColumn:
    """A column of a derived relation: its frequency there, and the base column it is."""

    max_freq: Elastic | None  # None: computed, frequency unbounded (∞)
    origin: ColumnKey | None
    # A UNION ALL column whose branches read different base columns: all of them (its
    # origin is then None). plan_joins.py sees a join on it as a join on each.
    branches: frozenset[ColumnKey] = frozenset()

    @property
    def bases(self) -> frozenset[ColumnKey]:
        return frozenset({self.origin}) if self.origin is not None else self.branches


# A derived relation's output columns in order: PostgreSQL renames them by position.
Columns = tuple[tuple[str, DerivedColumn], ...]
# Two output columns of one name: referring to it is ambiguous, as in PostgreSQL.
AMBIGUOUS = DerivedColumn(None, None)


@dataclass(frozen=True)
class CteDefinition:
    """One WITH item: its body, its column alias list and the names its body may see.

    A non-recursive CTE sees the CTEs of outer queries and the siblings written *before*
    it, never later ones nor itself: a name it uses is resolved where it is defined, not
    where it is read.
    """

    body: exp.Expression
    columns: tuple[str, ...]
    scope: Mapping[str, CteDefinition]


Ctes = Mapping[str, CteDefinition]


@dataclass(frozen=True)
class Source:
    """One name in a FROM scope. `factor` multiplies its frequencies after joins."""

    alias: str
    factor: Elastic = Elastic.ONE
    table: str | None = None  # "schema.name" of a base table
    private: bool = False
    derived: Relation | None = None
    columns: Mapping[str, DerivedColumn] | None = None  # a derived relation's output
    star: bool = False  # a derived `SELECT *`: any column of `derived`
    # A base table renamed by a column alias list: visible name -> the table's column
    # (None: two columns go by that name, so naming it is ambiguous).
    renamed: Mapping[str, str | None] | None = None
    # A public table cross-joined: its columns recur a private number of times (∞).
    crossed: bool = False


@dataclass(frozen=True)
class Relation:
    stability: Elastic
    sources: tuple[Source, ...]
    base_tables: frozenset[str]
    private_tables: int  # D: private base tables in the tree, the degree bound of ES(k)
    # Columns merged by JOIN … USING: an unqualified name means this side's column, or
    # (FULL JOIN) the first non-NULL of both sides' (joins.py, _merged_sides).
    merged: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Resolved:
    """A column reference resolved in a relation."""

    max_freq: Elastic | None
    origin: ColumnKey | None
    source: Source
    branches: frozenset[ColumnKey] = frozenset()  # as DerivedColumn.branches

    @property
    def bases(self) -> frozenset[ColumnKey]:
        return frozenset({self.origin}) if self.origin is not None else self.branches
