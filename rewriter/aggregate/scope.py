"""What every step of a private aggregate's plan reads: the statement, its relations as
the analysis built them, and the policy's domains of its columns."""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from ..analysis.constants import Constant
from ..analysis.findings import Findings
from ..analysis.relations import Analyzer
from ..analysis.sources import Relation, Resolved
from ..errors import missing_setting
from ..policy.model import ColumnDomain, Domain, Policy
from ..sql.positions import position_of


@dataclass(frozen=True)
class Scope:
    analyzer: Analyzer
    tree: exp.Select
    offset: int
    relation: Relation
    constants: tuple[Constant, ...] = ()  # the values computed before the query
    occupied: bool = False  # a histogram releases only the keys counted above 0

    @property
    def policy(self) -> Policy:
        return self.analyzer.policy

    @property
    def findings(self) -> Findings:
        return self.analyzer.findings

    def resolve(self, column: exp.Column) -> Resolved:
        return self.analyzer.resolve(column, self.relation)

    def position(self, node: exp.Expr) -> int | None:
        return position_of(node, self.offset)

    def domain(self, resolved: Resolved) -> Domain | None:
        if resolved.origin is None:
            return None
        table, column = resolved.origin
        if not self.policy.is_private(*table.split(".", 1)):
            domain: Domain | None = ColumnDomain(table, column)  # public values are public
        else:
            domain = self.policy.column(table, column).domain
        if isinstance(domain, ColumnDomain):
            # The rewritten SQL joins the key to the DISTINCT domain (at most one match per
            # row): PostgreSQL's plan may show it as a join of these two columns.
            self.findings.domain_joins.add((resolved.origin, (domain.table, domain.column)))
        return domain


def domain_hint(resolved: Resolved) -> str:
    if resolved.origin is None:
        return "Use a column of a table, not a computed one."
    table, column = resolved.origin
    return ("Use a column with a declared domain (SHOW dp.policy lists them), or ask the "
            f"data owner for a domain of {table}.{column}.")


def domain_reason(resolved: Resolved) -> str:
    return missing_setting(*resolved.origin, "domain") if resolved.origin else \
        "a computed column has no domain"
