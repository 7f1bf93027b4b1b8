"""Values that do not depend on any private row are computed first, then written in.

PostgreSQL evaluates an expression when a row reaches it. An expression that reads no row
of the query — `current_date - interval '30 days'`, a subquery over public tables — is
therefore evaluated only if some private row gets that far, and its error or its cost
(a heavy public join) tells whether one did: an exact bit for any ε. So dpgate takes every
such expression out of the statement and has PostgreSQL compute it on its own, before the
private query runs and before anything is charged: its error (if any) and its time are the
same whatever the private rows hold. The value comes back as a typed literal and replaces a
placeholder in the rewritten SQL:

- a scalar expression or scalar subquery → its value, `CAST('…' AS type)`;
- `x IN (SELECT c FROM public …)` → `x = ANY(<array of the subquery's values>)`, which has
  the same operator and the same NULL semantics; NOT IN is NOT of it;
- `EXISTS (SELECT … FROM public …)` → TRUE or FALSE.

A subquery taken out must read public tables only (checked here, and again against
PostgreSQL's own plan before it runs). A correlated one cannot be computed alone: PostgreSQL
itself refuses it when dpgate asks for its value.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from sqlglot import exp

from ..errors import SYNTAX_ERROR, Refusal, unsupported
from ..policy.model import Policy
from ..sql.functions import RESERVED_PREFIX, is_literal_constant
from ..sql.positions import position_of
from ..sql.scopes import cte_reference_ids

# sqlglot writes a placeholder as %(name)s; nothing else in a statement can produce that.
_TOKEN = "%({name})s"
# Evaluated per row by PostgreSQL: computing them once would change the answer.
_VOLATILE = (exp.Rand, exp.Randn, exp.Uuid)


@dataclass(frozen=True)
class Constant:
    """One value computed before the query: its placeholder in the SQL and its expression."""

    token: str
    sql: str


@dataclass
class _Extractor:
    policy: Policy
    offset: int
    cte_names: frozenset[str]
    constants: list[Constant] = field(default_factory=list)

    def query(self, query: exp.Expression, top: bool = False) -> None:
        """Take the constants out of a query that reads private rows (FROM, CTE, union)."""
        if isinstance(query, exp.Union):
            self.query(query.this)
            self.query(query.expression)
        with_ = query.args.get("with_") or query.args.get("with")
        for cte in with_.expressions if with_ is not None else []:
            self.query(cte.this)
        if not isinstance(query, exp.Select):
            return
        for item in from_items(query):
            if isinstance(item, exp.Subquery):
                self.query(item.this)
        for join in query.args.get("joins") or []:
            if join.args.get("on") is not None:
                self.value(join.args["on"])
        if query.args.get("where") is not None:
            self.value(query.args["where"].this)
        distinct = query.args.get("distinct")
        for key in (distinct.args.get("on") or []) if distinct is not None else []:
            self.value(key)
        if top:  # outputs are computed by the proxy; aggregate filters run on rows
            for node in query.find_all(exp.Filter):
                self.value(node.expression)
            return
        for projection in query.expressions:
            self.value(projection)
        if query.args.get("having") is not None:
            self.value(query.args["having"].this)

    def value(self, node: exp.Expression) -> None:
        """Replace the maximal row-independent parts of an expression by placeholders."""
        if isinstance(node, exp.In) and node.args.get("query") is not None:
            subquery = node.args["query"]
            array = self._placeholder(subquery, f"ARRAY({self._public(subquery.this)})")
            node.replace(exp.EQ(this=node.this, expression=exp.Any(this=array)))
            self.value(node.this)
            return
        if isinstance(node, (exp.Any, exp.All)) or (
                isinstance(node, exp.Anonymous) and str(node.this).upper() in ("ANY", "ALL",
                                                                              "SOME")):
            # `x = ANY(…)` is an operator over an array or a subquery, not a value: only
            # its operand can be computed first (`ANY(SELECT …)` as `ANY(ARRAY(SELECT …))`,
            # which has the same NULL semantics).
            operand = node.this if not isinstance(node, exp.Anonymous) else None
            query = operand.this if isinstance(operand, exp.Subquery) else operand
            if operand is not None and isinstance(query, (exp.Select, exp.Union)):
                array = self._placeholder(operand, f"ARRAY({self._public(query)})")
                node.set("this", exp.Paren(this=array))
                return
            arguments: list[exp.Expression] = list(node.iter_expressions())
            for argument in arguments:
                self.value(argument)
            return
        if isinstance(node, exp.Exists):
            node.replace(self._placeholder(node, f"EXISTS ({self._public(node.this)})"))
            return
        if isinstance(node, exp.Subquery):
            # Over private rows its value would decide which rows count, exactly (a
            # changed row moves max(x), and every row equal to it): two releases.
            hint = ("Ask for the subquery's value in a statement of its own (an aggregate: "
                    "answered with noise), then write that answer here as a constant.")
            node.replace(self._placeholder(node, f"({self._public(node.this, hint)})"))
            return
        if _row_independent(node):
            node.replace(self._placeholder(node, f"({self._public(node)})"))
            return
        for child in list(node.iter_expressions()):
            self.value(child)

    def _placeholder(self, node: exp.Expression, sql: str) -> exp.Placeholder:
        name = f"{RESERVED_PREFIX}constant_{len(self.constants)}"
        self.constants.append(Constant(_TOKEN.format(name=name), sql))
        return exp.Placeholder(this=name)

    def _public(self, query: exp.Expression,
                hint: str = "Join the private table instead: FROM a JOIN b ON a.x = b.y."
                ) -> str:
        """The SQL of an expression whose subqueries read public tables only."""
        refusal = unsupported(
            "subqueries over private tables are not supported inside a query over private "
            "tables: a subquery there must read public tables only", hint=hint,
            position=position_of(query, self.offset))
        inner = {t.alias_or_name for t in query.find_all(exp.Table)}
        for column in query.find_all(exp.Column):
            if column.table and column.table not in inner:
                raise unsupported("correlated subqueries are not supported",
                                  hint="Join the table instead.",
                                  position=position_of(column, self.offset))
        own = cte_reference_ids(query)
        for table in query.find_all(exp.Table):
            if id(table) in own:
                continue
            if not table.db and table.name in self.cte_names:
                raise refusal
            if self.policy.is_private(table.db, table.name):
                raise refusal
        # Every real table schema-qualified, as the reader connection must see it.
        node = query.copy()
        own = cte_reference_ids(node)
        for table in node.find_all(exp.Table):
            if id(table) in own or not isinstance(table.this, exp.Identifier):
                continue
            schema, name = self.policy.resolve(table.db, table.name)
            table.set("db", exp.to_identifier(schema, quoted=True))
            table.set("this", exp.to_identifier(name, quoted=True))
        return node.sql(dialect="postgres")


def placeholder_token(name: str) -> str:
    """How a placeholder named `name` appears in the rewritten SQL."""
    return _TOKEN.format(name=name)


def extract_constants(tree: exp.Select, policy: Policy, offset: int) -> tuple[Constant, ...]:
    """Replace, in place, every row-independent expression PostgreSQL would evaluate on
    private rows by a placeholder, and return what each placeholder stands for."""
    placeholder = tree.find(exp.Placeholder)
    if placeholder is not None:  # `:name` is not PostgreSQL syntax
        raise Refusal(SYNTAX_ERROR, 'syntax error at or near ":"',
                      position=position_of(placeholder, offset))
    names = frozenset(cte.alias_or_name for cte in tree.find_all(exp.CTE))
    extractor = _Extractor(policy, offset, names)
    extractor.query(tree, top=True)
    return tuple(extractor.constants)


def substitute(sql: str, constants: tuple[Constant, ...], literals: list[str],
               reads: int = 1) -> str:
    """The rewritten SQL with each placeholder replaced by its computed literal: each
    placeholder once in each of the `reads` copies of the statement's rows the SQL holds
    (PlanChecks.reads: weights and a histogram by unit size read them twice)."""
    for constant, literal in zip(constants, literals, strict=True):
        if sql.count(constant.token) != reads:
            raise unsupported("dpgate could not place a computed value in the statement")
        sql = sql.replace(constant.token, f"({literal})")
    return sql


def as_expressions(sql: str, constants: tuple[Constant, ...]) -> str:
    """SQL that is only ever described (the probe of output types, computed.py), with each
    placeholder it holds replaced by the expression it stands for: the literal computed
    later has that expression's type (evaluation_sql), and nothing here runs."""
    for constant in constants:
        sql = sql.replace(constant.token, f"({constant.sql})")
    return sql


def evaluation_sql(constants: tuple[Constant, ...]) -> str:
    """One statement computing every constant as a typed literal, in order."""
    values = ", ".join(f"{c.sql} AS v{i}" for i, c in enumerate(constants))
    literals = ", ".join(f"quote_nullable(v{i}) || '::' || pg_typeof(v{i})::text"
                         for i in range(len(constants)))
    # LIMIT 2: a set-returning function shows as a second row, and is refused.
    return f"SELECT {literals} FROM (SELECT {values}) AS dpgate_constants LIMIT 2"


def from_items(query: exp.Select) -> Iterator[exp.Expression]:
    """The FROM item and each joined item of a SELECT, in order."""
    source = query.args.get("from_") or query.args.get("from")
    if source is not None:
        yield source.this
    for join in query.args.get("joins") or []:
        yield join.this


def _row_independent(node: exp.Expression) -> bool:
    """A computed value that reads no column of the query (literals alone need no work)."""
    if is_literal_constant(node) or not isinstance(node, (exp.Func, exp.Binary, exp.Unary,
                                                           exp.Case, exp.Cast, exp.Predicate)):
        return False
    return not any(isinstance(n, _READS_ROW) for n in _outside_subqueries(node))


# What makes an expression depend on the row being read (or on the query's other rows).
_READS_ROW = (exp.Column, exp.Star, exp.AggFunc, exp.Window, exp.Placeholder, exp.Parameter,
              *_VOLATILE)


def _outside_subqueries(node: exp.Expression) -> Iterator[exp.Expression]:
    yield node
    for child in node.iter_expressions():
        if not isinstance(child, (exp.Subquery, exp.Select, exp.Union)):
            yield from _outside_subqueries(child)
