"""GROUP BY keys: each resolved to the column it reads (a bucket, when the key is a
function of one column), and each as the rewrite takes it (KeySpec)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlglot import exp

from ..analysis.buckets import bucket_failure, mark_domain_only
from ..analysis.constants import Constant, placeholder_token
from ..analysis.sources import Resolved
from ..errors import (
    INVALID_COLUMN_REFERENCE,
    UNDEFINED_COLUMN,
    Refusal,
    policy_refusal,
    unsupported,
)
from ..policy.model import Domain
from ..sql.functions import RESERVED_PREFIX
from ..sql.nodes import unalias
from .rewrite import KeySpec
from .scope import Scope, domain_hint, domain_reason

# Column types a domain value may be cast to, to compare it with a WHERE condition as the
# column's own values compare.
_CASTABLE_TYPES = frozenset({
    "smallint", "integer", "bigint", "numeric", "real", "double precision", "boolean", "date",
    "text", "character varying", "timestamp without time zone", "timestamp with time zone"})


@dataclass(frozen=True)
class KeyPlan:
    """A key as the rewrite takes it; a computed key's mapping is the constant `check`
    evaluates before the query. `unnarrowed`: a condition on the key alone left the
    domain whole (a public subquery's values in it)."""
    spec: KeySpec
    check: Constant | None
    unnarrowed: bool


@dataclass(frozen=True)
class GroupKeys:
    scope: Scope
    # Per key: its column resolved, and the column as written (or the one a bucket reads).
    keys: tuple[tuple[Resolved, exp.Column], ...]
    # Per key: the GROUP BY expression of its column (a bucket), or None for the column.
    expressions: tuple[exp.Expression | None, ...]

    def __len__(self) -> int:
        return len(self.keys)

    def index(self, column: exp.Column) -> int | None:
        """The plain key that `column` names, if any."""
        resolved = self.scope.resolve(column)
        for index, (key, written) in enumerate(self.keys):
            if self.expressions[index] is None and \
                    key.source.alias == resolved.source.alias and \
                    key.origin == resolved.origin and \
                    column.name.lower() == written.name.lower():
                return index
        return None

    def expression_index(self, node: exp.Expression) -> int | None:
        """The computed GROUP BY key written exactly as `node`, if any."""
        text = node.sql(dialect="postgres", normalize=True)
        return next((i for i, e in enumerate(self.expressions) if e is not None and
                     e.sql(dialect="postgres", normalize=True) == text), None)

    def plan(self, index: int, domain: Domain | None) -> KeyPlan:
        """Key `index` as the rewriter takes it; a computed key gets the column's type and
        the constant that computes its mapping first (buckets.py)."""
        resolved, column = self.keys[index]
        expression = self.expressions[index]
        restriction, restriction_type, unnarrowed = self._restriction(resolved, column)
        enum_type = self._enum_type(resolved)
        if expression is None:
            return KeyPlan(KeySpec(column, domain, None, restriction, restriction_type,
                                   enum_type=enum_type), None, unnarrowed)
        kind = self.scope.analyzer.metrics.column_types.get(resolved.origin) \
            if resolved.origin else None
        name = f"{RESERVED_PREFIX}bucket_{index}"
        spec = KeySpec(column, domain or self.scope.domain(resolved), expression, restriction,
                       restriction_type, kind if kind in _CASTABLE_TYPES else None, name,
                       enum_type)
        return KeyPlan(spec, Constant(placeholder_token(name), spec.check_sql()), unnarrowed)

    def _enum_type(self, key: Resolved) -> str | None:
        return self.scope.analyzer.metrics.enum_types.get(key.origin) if key.origin else None

    def _restriction(self, key: Resolved, column: exp.Column
                     ) -> tuple[tuple[exp.Expr, ...], str | None, bool]:
        """The WHERE conjuncts that read the key's column and nothing else (PostgreSQL would
        never list a key they reject, so neither does the filled histogram), the column's
        type, which the domain's value is cast to when they are applied to it, and whether
        a condition on the key alone was left out for a subquery in it.

        Read as the column's own type, the domain's value compares with a literal as the
        column does, and PostgreSQL deduces the same type for a parameter ($1: bound by the
        client, or a literal lifted into one) in both places; so a literal or a parameter
        gives the same keys. Without a known type nothing is restricted. Conjuncts with
        subqueries, aggregates, windows or random draws are left out. A value computed
        before the query (constants.py) is written into the data's WHERE as a literal, and
        here as the expression it is (`TO_DATE('2024-01-01', 'YYYY-MM-DD')`): on the
        domain it reads no private row, and it already ran once without failing. One with
        a subquery (its values) is left out, and the NOTICE says so."""
        where = self.scope.tree.args.get("where")
        if where is None:
            return (), None, False
        condition = where.this
        conjuncts = condition.flatten() if isinstance(condition, exp.And) else [condition]
        kind = self.scope.analyzer.metrics.column_types.get(key.origin) if key.origin else None
        enum = self._enum_type(key) is not None
        if kind not in _CASTABLE_TYPES and not enum:
            return (), None, False
        kept: list[exp.Expr] = []
        unnarrowed = False
        for conjunct in conjuncts:
            columns = list(conjunct.find_all(exp.Column))
            if not columns or conjunct.find(exp.Subquery, exp.Select, exp.AggFunc, exp.Window,
                                            exp.Rand, exp.Anonymous) or \
                    not all(self._same_column(c, key, column) for c in columns):
                continue
            computed = self._computed(conjunct)
            if computed is None:
                unnarrowed = True  # the NOTICE says so (answer_notice)
            else:
                kept.append(computed)
        # An enum's domain values are read as the column's type already (enum_type).
        return tuple(kept), kind if kept and not enum else None, unnarrowed

    def _computed(self, conjunct: exp.Expr) -> exp.Expr | None:
        """The conjunct with each value computed before the query written as its
        expression; None when one of them holds a subquery."""
        if conjunct.find(exp.Placeholder) is None:
            return conjunct
        expressions = {c.token: c.sql for c in self.scope.constants}
        copy = conjunct.copy()
        for node in list(copy.find_all(exp.Placeholder)):
            sql = expressions.get(placeholder_token(str(node.this)))
            if sql is None:
                return None
            value: exp.Expr = exp.maybe_parse(sql, dialect="postgres")
            if value.find(exp.Subquery, exp.Select):
                return None
            node.replace(exp.Paren(this=value))
        return copy

    def _same_column(self, column: exp.Column, key: Resolved, key_column: exp.Column) -> bool:
        if column.name != key_column.name:
            return False
        try:
            return self.scope.resolve(column).source is key.source
        except Refusal:
            return False


def group_keys(scope: Scope) -> GroupKeys:
    """The statement's GROUP BY keys, each resolved; refused when a computed key is not a
    function of one column with a declared domain."""
    group = scope.tree.args.get("group")
    keys: list[tuple[Resolved, exp.Column]] = []
    expressions: list[exp.Expression | None] = []
    for item in group.expressions if group is not None else []:
        target = _key_column(scope, item)
        column = target if isinstance(target, exp.Column) else _bucketed(scope, target, item)
        resolved = scope.resolve(column)
        scope.findings.group_columns |= resolved.bases  # plan_joins.py
        keys.append((resolved, column))
        expressions.append(None if target is column else target)
        if target is not column:
            failure = bucket_failure(target)
            if failure is not None:
                raise unsupported(failure, hint="Group by a column with a declared domain, "
                                  "or by arithmetic, casts, date_trunc, extract, to_char, "
                                  "floor or CASE of one.", position=scope.position(item))
        if target is not column and scope.domain(resolved) is None:
            raise policy_refusal(
                f"GROUP BY {target.sql(dialect='postgres')} needs a declared domain for "
                f"{column.sql(dialect='postgres')}: its groups are the image of the domain",
                hint=domain_hint(resolved), position=scope.position(item),
                reason=domain_reason(resolved))
    return GroupKeys(scope, tuple(keys), tuple(expressions))


def mark_buckets(tree: exp.Expression, expressions: Sequence[exp.Expression | None]) -> None:
    """Mark every occurrence of a computed key in `tree` as evaluated on the domain
    only: the rewritten SQL reads its value from the mapping, never from a row."""
    texts = {e.sql(dialect="postgres", normalize=True) for e in expressions if e is not None}
    def mark(node: exp.Expression) -> None:
        # Never inside an aggregate (its argument is read on every row) or a subquery.
        if isinstance(node, (exp.AggFunc, exp.Window, exp.Subquery, exp.Select)):
            return
        if node.sql(dialect="postgres", normalize=True) in texts:
            mark_domain_only(node)
            return
        for child in node.iter_expressions():
            mark(child)
    if not texts:
        return
    for clause in ("expressions", "group", "having", "order"):
        value = tree.args.get(clause)
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, exp.Expression):
                mark(item)


def _bucketed(scope: Scope, target: exp.Expression, item: exp.Expression) -> exp.Column:
    """The one column a computed GROUP BY key is a function of (a time bucket, a CASE
    bucket): the key's groups are the image of that column's domain."""
    columns = {c.sql(dialect="postgres") for c in target.find_all(exp.Column)}
    if len(columns) != 1 or target.find(exp.AggFunc, exp.Subquery, exp.Select, exp.Window):
        raise unsupported(
            "GROUP BY a computed expression is supported only as a function of one "
            "column with a declared domain",
            hint="Group by such a column, or by date_trunc(…)/extract(…)/CASE of it.",
            position=scope.position(item))
    return next(target.find_all(exp.Column))


def _key_column(scope: Scope, item: exp.Expression) -> exp.Expression:
    """A GROUP BY item as a column: by position, as written or by output alias.

    As in PostgreSQL, a bare name is an input column when the FROM clause has one of
    that name, and an output alias only otherwise.
    """
    target = item
    projections = scope.tree.expressions
    if isinstance(item, exp.Literal) and not item.is_string:
        index = int(item.this) - 1
        if not 0 <= index < len(projections):
            raise Refusal(INVALID_COLUMN_REFERENCE,
                          f"GROUP BY position {item.this} is not in select list",
                          position=scope.position(item))
        target = unalias(projections[index])
    elif isinstance(item, exp.Column) and not item.table and \
            not _is_input_column(scope, item):
        aliased = [p.this for p in projections if isinstance(p, exp.Alias)
                   and p.alias.lower() == item.name.lower()]
        target = aliased[0] if aliased else item
    return target


def _is_input_column(scope: Scope, column: exp.Column) -> bool:
    try:
        scope.resolve(column)
    except Refusal as refusal:
        if refusal.sqlstate == UNDEFINED_COLUMN:
            return False
        raise
    return True
