"""Which privacy unit a row of a query belongs to.

Every private table of the FROM clause reaches the unit through its declared path (a
column of its own, or a foreign-key chain through other tables of the query). The join's
equalities (ON, USING and WHERE conjuncts `a.x = b.y`) put columns in classes of equal
values; when every private table's unit column falls in one class, each row of the join
belongs to exactly one unit, and bounding the rows per unit after the join is sound. Public
tables need no path: they belong to nobody. An outer join may pad a private table when its
own condition equates that table's unit with the preserved side's: the row's unit is then
the first of its unit columns that is not NULL (`_padded_units`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from ..errors import Refusal
from ..plan import UnitBounds
from ..sql.functions import RESERVED_PREFIX
from .joins import conjuncts
from .relations import Analyzer
from .semi_joins import PREFIX as SEMI_JOIN
from .sources import Relation, Source

Node = tuple[str, str]  # (FROM alias, column of its base table)
# A hop's columns in the derived table dpgate joins (`_unit_node`): a name no private
# statement may write (classify.RESERVED), so none of the statement's can mean it.
HOP_COLUMN = RESERVED_PREFIX + "hop_"
_QUERIES = (exp.Select, exp.SetOperation)


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
    return _rows_unit(tree, analyzer, relation)[0]


def _rows_unit(tree: exp.Select, analyzer: Analyzer, relation: Relation
               ) -> tuple[UnitOfRows, _Classes]:
    """unit_of_rows, and the classes of columns the query's equalities make equal."""
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
    padded = _padded_units(tree, relation)
    classes = _Classes()
    always, outer = _equalities(tree, analyzer, relation)
    for a, b in always:
        classes.union(a, b)
    for side, across in outer:
        # An outer join's equalities hold on its matched rows only; elsewhere one side is
        # NULL as a whole. Taken only when the columns of each side that a padded row
        # keeps are one class already: `a = c.x AND b = c.x` would make a and b one
        # class through the NULLs of a padded c.
        kept = ([[x for x, _ in across]] if side in ("LEFT", "FULL") else []) + \
            ([[y for _, y in across]] if side in ("RIGHT", "FULL") else [])
        if across and all(len({classes.find(node) for node in nodes}) == 1 for nodes in kept):
            for x, y in across:
                classes.union(x, y)
    hops = _Hops([], [], [])
    nodes = [_unit_node(source, relation, classes, analyzer, hops, source.alias in padded)
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
    expression: exp.Expression = _column(first, hops)
    if padded:
        # A padded row's unit columns on the padded side are NULL, the others equal.
        expression = exp.Coalesce(this=expression, expressions=[
            _column(node, hops) for node in dict.fromkeys(nodes[1:]) if node != first])
    return UnitOfRows(expression, bounds, tuple(hops.tables), tuple(hops.conditions),
                      columns), classes


def _unit_node(source: Source, relation: Relation, classes: _Classes, analyzer: Analyzer,
               hops: _Hops, padded: bool = False) -> Node:
    """The column whose value is the unit of `source`'s rows, following its path.

    A hop through a table the query joins on the path uses that join; otherwise dpgate
    joins the hop table itself (`_dp_hopN`). Either way the hop's key must be unique
    (maxFreq 1), or one row would reach several units. A table an outer join pads must
    hold its unit itself: a hop joined to its NULLs would drop the padded rows.
    """
    table = source.table or ""
    path = analyzer.policy.unit_path(table)
    if path is None:
        name = table.split(".", 1)[1]
        raise NotOneUnit(
            f"the private table {table} has no path to the privacy unit",
            f"Ask about the tables that reach the unit (SHOW dp.policy), or ask the data "
            f"owner to say how {name} reaches it.", f"[tables.{name}] unit")
    if padded and path.hops:
        raise NotOneUnit(f"an outer join pads rows of {table}, whose unit is reached "
                         "through other tables", "Use an inner JOIN, or keep the table on "
                         "the preserved side of the outer join.")
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
        # Only the columns the hop needs, under HOP_COLUMN names: the table's own would
        # make an unqualified column of the statement that the hop table has too
        # ambiguous in PostgreSQL (SELECT sum(order_id) FROM order_notes).
        columns = dict.fromkeys((hop.key, hop.value))
        hops.tables.append(exp.alias_(exp.select(*(
            exp.alias_(exp.column(column, quoted=True), HOP_COLUMN + column, quoted=True)
            for column in columns)).from_(exp.Table(
                this=exp.to_identifier(name, quoted=True),
                db=exp.to_identifier(schema, quoted=True))).subquery(), alias, quoted=True))
        hops.aliases[alias] = hop.table
        hops.conditions.append(exp.EQ(this=_column((alias, hop.key), hops),
                                      expression=_column(node, hops)))
        if analyzer.policy.is_private(schema, name):
            hops.scans.append(hop.table)
        node = (alias, hop.value)
    return node


def _column(node: Node, hops: _Hops) -> exp.Column:
    """The SQL of a node's column: a hop's under the name its derived table gives it."""
    alias, name = node
    return exp.column(HOP_COLUMN + name if alias in hops.aliases else name, table=alias,
                      quoted=True)


def _derived_unit(source: Source, tree: exp.Select, analyzer: Analyzer) -> str:
    """The output column through which a derived table or CTE exposes its rows' unit.

    Each output row must be one unit's, and one column must hold that unit
    (docs/privacy-unit.md argues each shape): a SELECT without aggregates whose own rows are
    each one unit's (found as for the statement, recursively), passing the unit column on;
    a GROUP BY or DISTINCT whose keys include the unit (a group then holds one unit's
    rows); a UNION, INTERSECT or EXCEPT [ALL] whose branches carry the unit at the same
    position (a row value then includes its unit, so it is one unit's).
    """
    body = _derived_body(source.alias, tree)
    if body is None or source.derived is None:
        raise _not_derived(source.alias, "")
    position, name = _query_unit(body, analyzer, source.alias)
    if source.star:
        if source.columns and name in source.columns:
            raise _not_derived(source.alias, f"two of its columns are named {name}")
        return name
    names = list(source.columns or {})
    if len(names) != _width(body):
        raise _not_derived(source.alias, "two of its output columns have one name")
    return names[position]


def _not_derived(alias: str, why: str) -> NotOneUnit:
    if alias.startswith(SEMI_JOIN):
        return NotOneUnit(
            "the IN or EXISTS subquery over private tables does not select rows of the "
            "unit of the row it filters, so one unit's rows could decide other units' rows",
            "Correlate it on the unit: EXISTS (SELECT 1 FROM t WHERE t.customer_id = "
            "r.customer_id AND …), or join the tables instead.")
    return NotOneUnit(
        f"the derived table or CTE {alias} does not pass on one unit per row"
        f"{': ' + why if why else ''}; unit mode cannot tell whose its rows are",
        "Select the unit column in it (and GROUP BY it, if it groups), or join the "
        "tables in one FROM clause.")


def _query_unit(query: exp.Expr, analyzer: Analyzer, alias: str) -> tuple[int, str]:
    """(position, name) of the output column of `query` holding each row's unit."""
    if isinstance(query, exp.SetOperation):
        if any(query.args.get(key) for key in ("order", "limit", "offset")):
            raise _not_derived(alias, "ORDER BY, LIMIT or OFFSET on a set operation")
        left = _query_unit(query.this, analyzer, alias)
        right = _query_unit(query.expression, analyzer, alias)
        if left[0] != right[0]:
            raise _not_derived(alias, f"its set operation's branches carry the unit in "
                               f"columns {left[0] + 1} and {right[0] + 1}, not one column")
        return left
    relation = analyzer.derived_relations.get(id(query))
    if not isinstance(query, exp.Select) or relation is None:
        raise _not_derived(alias, "")
    if any(query.args.get(key) for key in ("limit", "offset", "windows", "qualify")) or \
            any(p.find(exp.Window) for p in query.expressions):
        raise _not_derived(alias, "a LIMIT, OFFSET or window lets one unit's rows move "
                           "others' in or out")
    rows, classes = _rows_unit(query, analyzer, relation)
    if rows.tables:
        raise _not_derived(alias, "its unit is reached through a table it does not join")
    if not isinstance(rows.expression, exp.Column):
        raise _not_derived(alias, "an outer join in it pads a private table")
    unit = (rows.expression.table, rows.expression.name)
    keys = _group_keys(query)
    if keys is not None and not any(
            (node := _node(key, analyzer, relation)) is not None and classes.same(node, unit)
            for key in keys):
        raise _not_derived(alias, "it groups rows of several units (its GROUP BY or "
                           "DISTINCT does not include the unit)")
    if keys is None and any(p.find(exp.AggFunc) for p in query.expressions):
        raise _not_derived(alias, "an aggregate without GROUP BY mixes every unit's rows")
    for position, projection in enumerate(query.expressions):
        inner = projection.this if isinstance(projection, exp.Alias) else projection
        if isinstance(inner, exp.Star):
            if len(query.expressions) == 1 and len(relation.sources) == 1:
                return 0, unit[1]
            break
        if isinstance(inner, exp.Column) and \
                (node := _node(inner, analyzer, relation)) is not None and \
                classes.same(node, unit):
            return position, projection.alias_or_name
    raise _not_derived(alias, "none of its output columns is the unit")


def _group_keys(query: exp.Select) -> list[exp.Column] | None:
    """The columns a grouped SELECT groups on (positions read as their projections), or
    None when it does not group."""
    group, distinct = query.args.get("group"), query.args.get("distinct")
    if group is None and distinct is None:
        return None
    items = list(group.expressions) if group is not None else \
        list(distinct.args.get("on") or []) if distinct is not None else []
    items = items or list(query.expressions)
    keys = []
    for item in items:
        key = query.expressions[int(item.this) - 1] if isinstance(item, exp.Literal) and \
            item.is_int and 0 < int(item.this) <= len(query.expressions) else item
        key = key.this if isinstance(key, exp.Alias) else key
        if isinstance(key, exp.Column):
            keys.append(key)
    return keys


def _width(query: exp.Expr) -> int:
    while isinstance(query, exp.SetOperation):
        query = query.this
    return len(query.expressions)


def _padded_units(tree: exp.Select, relation: Relation) -> set[str]:
    """The private tables an outer join pads with NULLs. Their padded rows still belong to
    a unit when the join's own condition equates their unit with the preserved side's
    (`_equalities` takes such conditions; every private table's unit must then fall in
    one class): the unit is the first of the rows' unit columns that is not NULL. A
    derived table padded is refused (its unit column is not read here)."""
    padded: set[str] = set()
    seen: list[Source] = list(relation.sources[:1])
    for join in tree.args.get("joins") or []:
        source = next((s for s in relation.sources if s.alias == join.this.alias_or_name),
                      None)
        side = (join.args.get("side") or "").upper()
        if _anti_join(join):  # its kept rows are the padded ones: the left side's units
            continue
        for pads in ([source] if side in ("LEFT", "FULL") else []) + \
                (seen if side in ("RIGHT", "FULL") else []):
            if pads is None or (pads.derived is not None and _reads_private(pads)):
                raise NotOneUnit(f"the {side} JOIN pads rows of a derived table with NULLs, "
                                 "so those rows have no unit",
                                 "Keep derived tables on the preserved side of an outer "
                                 "join, or use an inner JOIN.")
            if pads.private:
                padded.add(pads.alias)
        if source is not None:
            seen.append(source)
    private = [s for s in relation.sources if _reads_private(s)]
    joins = tree.args.get("joins") or []
    lone_full = len(relation.sources) == 2 == len(private) and len(joins) == 1 and \
        (joins[0].args.get("side") or "").upper() == "FULL"
    if padded and not lone_full and all(s.alias in padded for s in private):
        # A row padded on every private table (a product without orders) has no unit.
        raise NotOneUnit("an outer join pads rows of every private table with NULLs, so "
                         "some rows have no unit",
                         "Keep a private table on the preserved side of the outer join "
                         "(FROM private LEFT JOIN …), or use an inner JOIN.")
    return padded


def _anti_join(join: exp.Join) -> bool:
    """NOT EXISTS as semi_joins.py writes it: LEFT JOIN a DISTINCT table, keeping only the
    rows it pads (`WHERE key IS NULL`). A row is kept when no row of the subquery matches
    it; with the ON making the subquery's unit the row's, that depends on the row's own
    unit only, so the row belongs to the left side's unit."""
    return (join.args.get("side") or "").upper() == "LEFT" and \
        join.this.alias_or_name.startswith(SEMI_JOIN)


def _reads_private(source: Source) -> bool:
    return source.private or (source.derived is not None and
                              source.derived.private_tables > 0)


def _derived_body(alias: str, tree: exp.Select) -> exp.Query | None:
    """The query behind a FROM item of `tree`: a subquery, or a CTE of a WITH around it."""
    items = [tree.args.get("from_") or tree.args.get("from")]
    items += list(tree.args.get("joins") or [])
    for item in items:
        node = item.this if item is not None else None
        if node is None or node.alias_or_name != alias:
            continue
        if isinstance(node, exp.Subquery):
            return node.this if isinstance(node.this, _QUERIES) else None
        scope: exp.Expr | None = tree
        while isinstance(node, exp.Table) and not node.db and scope is not None:
            # the nearest WITH that names it, in this query or one around it
            with_ = scope.args.get("with_") or scope.args.get("with")
            for cte in with_.expressions if with_ is not None else []:
                if cte.alias_or_name == node.name:
                    return cte.this if isinstance(cte.this, _QUERIES) else None
            scope = scope.parent
    return None


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
                ) -> tuple[list[tuple[Node, Node]], list[tuple[str, list[tuple[Node, Node]]]]]:
    """Column equalities of the join: those every row satisfies (inner ON and USING,
    WHERE, dpgate's anti-join, whose ON says whose rows decide which rows it keeps), and
    per outer join in order, its side and its equalities across its two sides as
    (earlier, new)."""
    conditions: list[exp.Expression] = []
    where = tree.args.get("where")
    if where is not None:
        conditions += conjuncts(where.this)
    pairs: list[tuple[Node, Node]] = []
    outer_pairs: list[tuple[str, list[tuple[Node, Node]]]] = []
    seen: list[Source] = [relation.sources[0]] if relation.sources else []
    merged: dict[str, list[str]] = {}  # USING columns so far: whose column the name reads
    for join in tree.args.get("joins") or []:
        side = (join.args.get("side") or "").upper()
        outer = bool(side) and not _anti_join(join)
        alias = join.this.alias_or_name
        found = _column_pairs(conjuncts(join.args["on"]), analyzer, relation) \
            if join.args.get("on") is not None else []
        for name in join.args.get("using") or []:
            column = name.name
            lefts = merged.get(column) or [left.alias for left in seen
                                            if analyzer.resolver.has_column(left, column)]
            found += [((left, column), (alias, column)) for left in lefts]
            merged[column] = {"RIGHT": [alias], "FULL": [*lefts, alias]}.get(side, lefts)
        if outer:
            earlier = {s.alias for s in seen}
            outer_pairs.append((side, [(a, b) if b[0] == alias else (b, a) for a, b in found
                                       if {a[0], b[0]} <= earlier | {alias} and
                                       (a[0] == alias) != (b[0] == alias)]))
        else:
            pairs += found
        right = next((s for s in relation.sources if s.alias == alias), None)
        if right is not None:
            seen.append(right)
    return pairs + _column_pairs(conditions, analyzer, relation), outer_pairs


def _column_pairs(conditions: list[exp.Expression], analyzer: Analyzer, relation: Relation
                  ) -> list[tuple[Node, Node]]:
    """The `a.x = b.y` conditions among `conditions`, as class members."""
    pairs = []
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
