"""Which privacy unit a row of a query belongs to.

Every private table of the FROM clause reaches the unit through its declared path (a
column of its own, or a foreign-key chain through other tables of the query). The join's
equalities (ON, USING and WHERE conjuncts `a.x = b.y`) put columns in classes of equal
values; when every private table's unit column falls in one class, each row of the join
belongs to exactly one unit, and bounding the rows per unit after the join is sound. Public
tables need no path: they belong to nobody.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from ..errors import Refusal
from ..plan import UnitBounds
from .joins import conjuncts
from .relations import Analyzer
from .sources import Relation, Source

Node = tuple[str, str]  # (FROM alias, column of its base table)


class NotOneUnit(Exception):
    """The rows of this query are not each one unit's: `reason` says why, `hint` what the
    analyst can do, `setting` the policy setting that would decide (for the operator)."""

    def __init__(self, reason: str, hint: str, setting: str = ""):
        super().__init__(reason)
        self.reason = reason
        self.hint = hint
        self.setting = setting


@dataclass(frozen=True)
class UnitOfRows:
    """The unit of every row of the query's FROM/WHERE, as an expression over its aliases.

    `tables` and `conditions` are the foreign-key hops dpgate joins itself (a chain through
    a table the query does not join): added to FROM and WHERE of the bounded rows.
    """

    expression: exp.Expression
    bounds: UnitBounds
    tables: tuple[exp.Expr, ...] = ()
    conditions: tuple[exp.Expression, ...] = ()
    # The base columns (table, column) holding the unit; None when one is a derived
    # table's. Grouping rows by unit groups on these (plan_joins.py checks group keys).
    columns: frozenset[tuple[str, str]] | None = None


@dataclass
class _Hops:
    """The hop tables dpgate adds to reach the unit, as they are met."""

    tables: list[exp.Expr]
    conditions: list[exp.Expression]
    scans: list[str]  # the private hop tables, counted once the unit is found
    aliases: dict[str, str] = field(default_factory=dict)  # hop alias -> its table


def unit_of_rows(tree: exp.Select, analyzer: Analyzer, relation: Relation) -> UnitOfRows:
    """The unit expression of the statement's rows; NotOneUnit when there is none."""
    policy = analyzer.policy
    unit = policy.unit
    assert unit is not None
    derived_units = {source.alias: _derived_unit(source, tree, analyzer)
                     for source in relation.sources
                     if source.derived is not None and source.derived.private_tables}
    for source in relation.sources:
        if source.private and source.renamed is not None:
            raise NotOneUnit(f"{source.alias} renames its columns; unit mode needs the "
                             "table's own column names", "Drop the column alias list.")
    _refuse_padded_units(tree, relation)
    classes = _Classes()
    for a, b in _equalities(tree, analyzer, relation):
        classes.union(a, b)
    hops = _Hops([], [], [])
    nodes = [_unit_node(source, relation, classes, analyzer, hops)
             for source in relation.sources if source.private]
    tables = {source.alias: source.table for source in relation.sources} | hops.aliases
    columns = None if derived_units else frozenset(
        (table, name) for alias, name in nodes if (table := tables.get(alias)) is not None)
    nodes += [(alias, name) for alias, name in derived_units.items()]
    if not nodes:
        raise NotOneUnit("no private table", "")
    first = nodes[0]
    for node in nodes[1:]:
        if not classes.same(first, node):
            raise NotOneUnit(
                f"the join mixes rows of different units: {first[0]}.{first[1]} and "
                f"{node[0]}.{node[1]} are not made equal by the join",
                f"Join on the unit ({unit.column}), e.g. ON {first[0]}.{first[1]} = "
                f"{node[0]}.{node[1]}, or ask the data owner for row_level_fallback.")
    bounds = UnitBounds(unit.label, unit.max_contributions, unit.max_groups,
                        unit.max_group_contributions)
    for table in hops.scans:
        analyzer.findings.scans[table] += 1  # PostgreSQL's plan reads it: plan_check.py
    return UnitOfRows(exp.column(first[1], table=first[0], quoted=True), bounds,
                      tuple(hops.tables), tuple(hops.conditions), columns)


def _unit_node(source: Source, relation: Relation, classes: _Classes, analyzer: Analyzer,
               hops: _Hops) -> Node:
    """The column whose value is the unit of `source`'s rows, following its path.

    A hop through a table the query joins on the path uses that join; otherwise dpgate
    joins the hop table itself (`_dp_hopN`). Either way the hop's key must be unique
    (maxFreq 1), or one row would reach several units.
    """
    table = source.table or ""
    path = analyzer.policy.unit_path(table)
    if path is None:
        name = table.split(".", 1)[1]
        raise NotOneUnit(
            f"the private table {table} has no path to the privacy unit",
            f"Ask about the tables that reach the unit (SHOW dp.policy), or ask the data "
            f"owner to say how {name} reaches it.", f"[tables.{name}] unit")
    node: Node = (source.alias, path.column)
    node_table = table
    for hop in path.hops:
        _check_unique_key(hop.table, hop.key, analyzer)
        # The hop joins on these columns (plan_joins.py expects them in PostgreSQL's plan).
        analyzer.findings.join_columns |= {(node_table, node[1]), (hop.table, hop.key)}
        node_table = hop.table
        # Not through a column alias list (only a public table may have one here): the
        # unit is written as `alias.value`, which PostgreSQL reads by the visible names.
        match = next((other for other in relation.sources if other.table == hop.table and
                      other.renamed is None and classes.same(node, (other.alias, hop.key))),
                     None)
        if match is not None:
            node = (match.alias, hop.value)
            continue
        alias = f"_dp_hop{len(hops.tables) + 1}"
        schema, name = hop.table.split(".", 1)
        hops.tables.append(exp.alias_(exp.Table(this=exp.to_identifier(name, quoted=True),
                                                db=exp.to_identifier(schema, quoted=True)),
                                      alias, quoted=True))
        hops.conditions.append(exp.EQ(
            this=exp.column(hop.key, table=alias, quoted=True),
            expression=exp.column(node[1], table=node[0], quoted=True)))
        if analyzer.policy.is_private(schema, name):
            hops.scans.append(hop.table)
        hops.aliases[alias] = hop.table
        node = (alias, hop.value)
    return node


def _derived_unit(source: Source, tree: exp.Select, analyzer: Analyzer) -> str:
    """The column through which a derived table or CTE exposes its rows' unit.

    Supported: a plain SELECT (no GROUP BY, DISTINCT, aggregate, LIMIT, OFFSET or set
    operation) over one occurrence of one private table whose path to the unit is a column
    of its own, the derived table passing that column on unchanged (by name or through
    `*`). Each of its rows is then one row of that table, with the same unit.
    """
    refusal = NotOneUnit(
        f"the derived table or CTE {source.alias} is not a plain SELECT of one private table "
        "that passes on its unit column; unit mode cannot tell whose its rows are",
        "Select the unit column in it, or join the tables in one FROM clause.")
    body = _derived_body(source.alias, tree)
    derived = source.derived
    if body is None or derived is None or not _plain(body):
        raise refusal
    private = [s for s in derived.sources if s.private]
    if len(private) != 1 or any(s.derived is not None and s.derived.private_tables
                                for s in derived.sources) or private[0].renamed is not None:
        raise refusal
    table = private[0].table or ""
    path = analyzer.policy.unit_path(table)
    if path is None or path.hops:
        raise refusal
    if source.star:
        name = path.column
        try:
            origin = analyzer.resolve(exp.column(name, table=source.alias),
                                      _alone(source)).origin
        except Refusal:
            raise refusal from None
        if origin == (table, path.column):
            return name
        raise refusal
    for name, column in (source.columns or {}).items():
        if column.origin == (table, path.column):
            return name
    raise refusal


def _refuse_padded_units(tree: exp.Select, relation: Relation) -> None:
    """An outer join's padded rows carry NULL in every column of the side without a match:
    a private table there would give them no unit (a public one has none to give)."""
    seen: list[Source] = list(relation.sources[:1])
    for join in tree.args.get("joins") or []:
        source = next((s for s in relation.sources if s.alias == join.this.alias_or_name),
                      None)
        side = (join.args.get("side") or "").upper()
        padded = ([source] if side in ("LEFT", "FULL") else []) + \
            (seen if side in ("RIGHT", "FULL") else [])
        if any(s is None or _reads_private(s) for s in padded):
            raise NotOneUnit(f"the {side} JOIN pads rows of a private table with NULLs, so "
                             "those rows have no unit",
                             "Keep private tables on the preserved side of an outer join "
                             "(FROM private LEFT JOIN public), or use an inner JOIN.")
        if source is not None:
            seen.append(source)


def _reads_private(source: Source) -> bool:
    return source.private or (source.derived is not None and
                              source.derived.private_tables > 0)


def _derived_body(alias: str, tree: exp.Select) -> exp.Select | None:
    """The SELECT behind a FROM item of `tree`: a subquery, or a CTE of its WITH."""
    items = [tree.args.get("from_") or tree.args.get("from")]
    items += list(tree.args.get("joins") or [])
    for item in items:
        node = item.this if item is not None else None
        if node is None or node.alias_or_name != alias:
            continue
        if isinstance(node, exp.Subquery):
            return node.this if isinstance(node.this, exp.Select) else None
        if isinstance(node, exp.Table):
            with_ = tree.args.get("with_") or tree.args.get("with")
            for cte in with_.expressions if with_ is not None else []:
                if cte.alias_or_name == node.name and isinstance(cte.this, exp.Select):
                    return cte.this
    return None


def _plain(select: exp.Select) -> bool:
    """Each output row is one input row: no grouping, aggregate, LIMIT or set operation."""
    if any(select.args.get(key) for key in ("group", "distinct", "having", "limit",
                                            "offset", "windows", "qualify")):
        return False
    return not any(p.find(exp.AggFunc, exp.Window) for p in select.expressions)


def _alone(source: Source) -> Relation:
    assert source.derived is not None
    return Relation(source.derived.stability, (source,), source.derived.base_tables,
                    source.derived.private_tables)


def _check_unique_key(table: str, key: str, analyzer: Analyzer) -> None:
    """A chain's key names one row: its declared or measured maxFreq is 1."""
    declared = analyzer.policy.column(table, key).max_freq
    frequency = declared if declared is not None else analyzer.metrics.max_freq.get((table, key))
    if frequency is None:
        analyzer.findings.missing.add((table, key))  # the proxy measures it and asks again
    elif frequency > 1:
        raise NotOneUnit(f"the unit path's key {table}.{key} is not unique (up to "
                         f"{frequency} rows share a value), so a row could reach several "
                         "units", "Make the path go through a primary key.")


def _equalities(tree: exp.Select, analyzer: Analyzer, relation: Relation
                ) -> list[tuple[Node, Node]]:
    """Column equalities every row of the join satisfies: ON, USING and WHERE conjuncts."""
    conditions: list[exp.Expression] = []
    where = tree.args.get("where")
    if where is not None:
        conditions += conjuncts(where.this)
    pairs: list[tuple[Node, Node]] = []
    seen: list[Source] = [relation.sources[0]] if relation.sources else []
    for join in tree.args.get("joins") or []:
        # An outer join's condition does not hold on its padded rows.
        outer = bool(join.args.get("side"))
        if join.args.get("on") is not None and not outer:
            conditions += conjuncts(join.args["on"])
        alias = join.this.alias_or_name
        right = next((s for s in relation.sources if s.alias == alias), None)
        for name in [] if outer else join.args.get("using") or []:
            column = name.name
            pairs += [((left.alias, column), (alias, column)) for left in seen
                      if analyzer.resolver.has_column(left, column)]
        if right is not None:
            seen.append(right)
    for condition in conditions:
        if isinstance(condition, exp.EQ) and isinstance(condition.this, exp.Column) and \
                isinstance(condition.expression, exp.Column):
            a, b = _node(condition.this, analyzer, relation), \
                _node(condition.expression, analyzer, relation)
            if a is not None and b is not None:
                pairs.append((a, b))
    return pairs


def _node(column: exp.Column, analyzer: Analyzer, relation: Relation) -> Node | None:
    """A column as a class member: (alias, the base table's column), or for a derived
    table (alias, its output column's name)."""
    try:
        resolved = analyzer.resolve(column, relation)
    except Refusal:
        return None
    if resolved.source.derived is not None:
        return resolved.source.alias, column.name
    if resolved.origin is None or resolved.source.table is None:
        return None
    return resolved.source.alias, resolved.origin[1]


class _Classes:
    """Union-find over columns: the classes of values the join makes equal."""

    def __init__(self) -> None:
        self._parent: dict[Node, Node] = {}

    def find(self, node: Node) -> Node:
        parent = self._parent.setdefault(node, node)
        if parent != node:
            parent = self._parent[node] = self.find(parent)
        return parent

    def union(self, a: Node, b: Node) -> None:
        self._parent[self.find(a)] = self.find(b)

    def same(self, a: Node, b: Node) -> bool:
        return self.find(a) == self.find(b)
