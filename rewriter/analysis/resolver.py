"""Column references resolved as PostgreSQL resolves them: to a source of the relation,
with the column's max frequency (FLEX) and its base column; unknown or ambiguous names
are refused with PostgreSQL's own errors."""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from ..errors import AMBIGUOUS_COLUMN, UNDEFINED_COLUMN, Refusal, unsupported
from ..policy.model import Policy
from ..sensitivity.elastic import Elastic, constant, multiply, plus_k, unmeasured
from ..sensitivity.metrics import ColumnKey, Metrics
from ..sql.positions import position_of
from .sources import AMBIGUOUS, Relation, Resolved, Source


@dataclass(frozen=True)
class Resolver:
    policy: Policy
    metrics: Metrics
    offset: int

    def has_column(self, source: Source, name: str) -> bool | None:
        """Whether a source has a column; None when nobody knows (no catalog entry)."""
        if source.columns is not None and name in source.columns:
            return True
        if source.derived is not None:
            if source.star:
                return any(self.has_column(s, name) for s in source.derived.sources)
            return False
        if source.renamed is not None:
            return name in source.renamed
        known = self.metrics.columns.get(source.table or "")
        return None if known is None else name in known

    def resolve(self, column: exp.Column, relation: Relation) -> Resolved:
        """The frequency and origin of a column reference; refuses unknown or ambiguous."""
        name = column.name
        merged = () if column.table else relation.merged.get(name, ())
        if len(merged) > 1:
            return self._coalesced(name, merged, relation)
        qualifier = column.table or (merged[0] if merged else None)
        if qualifier is not None:
            candidates = [s for s in relation.sources if s.alias == qualifier]
            if not candidates:
                raise unsupported(f'missing FROM-clause entry for table "{qualifier}"',
                                  position=position_of(column, self.offset))
        else:
            known = [s for s in relation.sources if self.has_column(s, name)]
            unknown = [s for s in relation.sources if self.has_column(s, name) is None]
            candidates = known or (unknown if len(relation.sources) == 1 else [])
            position = position_of(column, self.offset)
            if len(known) > 1:
                raise Refusal(AMBIGUOUS_COLUMN, f'column reference "{name}" is ambiguous',
                              position=position)
            if not known and not unknown:
                raise Refusal(UNDEFINED_COLUMN, f'column "{name}" does not exist',
                              position=position)
            if len(candidates) != 1:
                raise unsupported(f'column reference "{name}" cannot be resolved here: '
                                  "qualify it with its table", position=position)
        source = candidates[0]
        frequency, origin, branches = self._source_column(source, name, column)
        return Resolved(None if frequency is None or source.crossed else
                        multiply(frequency, source.factor), origin, source, branches)

    def _coalesced(self, name: str, aliases: tuple[str, ...], relation: Relation) -> Resolved:
        """A FULL JOIN … USING column: COALESCE of both sides' columns, a computed value
        (frequency ∞) read from every side's base column."""
        sides = [self.resolve(exp.column(name, table=alias), relation) for alias in aliases]
        return Resolved(None, None, sides[0].source,
                        frozenset().union(*(side.bases for side in sides)))

    def _source_column(self, source: Source, name: str, column: exp.Column
                       ) -> tuple[Elastic | None, ColumnKey | None, frozenset[ColumnKey]]:
        if source.derived is not None:
            if source.columns and name in source.columns:
                derived = source.columns[name]
                if derived is AMBIGUOUS:
                    raise Refusal(AMBIGUOUS_COLUMN, f'column reference "{name}" is ambiguous',
                                  position=position_of(column, self.offset))
                return derived.max_freq, derived.origin, derived.branches
            if source.star:
                inner = self.resolve(exp.column(name), source.derived)
                return inner.max_freq, inner.origin, inner.branches
            raise unsupported(f'column {source.alias}.{name} does not exist',
                              position=position_of(column, self.offset))
        table = source.table or ""
        if source.renamed is not None:
            if name not in source.renamed:
                raise Refusal(UNDEFINED_COLUMN, f'column {source.alias}.{name} does not exist',
                              position=position_of(column, self.offset))
            real = source.renamed[name]
            if real is None:
                raise Refusal(AMBIGUOUS_COLUMN, f'column reference "{name}" is ambiguous',
                              position=position_of(column, self.offset))
            name = real
        return self.base_frequency(table, name, source.private), (table, name), frozenset()

    def type_of(self, column: exp.Column, relation: Relation) -> str | None:
        origin = self.resolve(column, relation).origin
        return self.metrics.column_types.get(origin) if origin is not None else None

    def base_frequency(self, table: str, column: str, private: bool) -> Elastic:
        declared = self.policy.column(table, column).max_freq
        measured = self.metrics.max_freq.get((table, column))
        value = declared if declared is not None else measured
        if value is None:
            return unmeasured(table, column)
        return plus_k(value) if private else constant(value)
