"""Statements answered by several private releases under one charge (plan.Composite): a
quantile or mode beside noisy aggregates, or of several columns, a set operation
(UNION [ALL], INTERSECT [ALL], EXCEPT [ALL]) whose branches are private aggregates, and
a LIMIT or OFFSET by an aggregate over private rows.

Each part is planned as a statement of its own (plan_private_aggregate) and released with
its share of ε (calibrate.branch_budgets). What joins the parts — the statement's column
order, the set operation's de-duplication and type resolution, its ORDER BY and LIMIT —
is the `combine` SQL, which PostgreSQL runs over the released rows only: post-processing,
at no further cost. The charge is the sum of the parts' (sequential composition), made
once, before any value leaves (docs/queries.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from sqlglot import exp

from ..errors import Refusal, unsupported
from ..plan import Branch, Composite, PrivateAggregate, branch_table
from ..policy.model import Policy
from ..release.computed import branch_source
from ..sensitivity.metrics import Metrics
from ..sql.nodes import name_of, unalias
from ..sql.positions import position_of
from ..sql.scopes import real_tables
from .choice import choice_spec
from .private import plan_private_aggregate

# A branch over public tables only (or none), checked as a relayed query would be; it
# stays in `combine` as it is, run as the relay role (classify.py gives it).
PublicBranch = Callable[[exp.Expression], None]
_CHOICES = (exp.Min, exp.Max, exp.Median, exp.WithinGroup)
# What a statement split into parts must not have: clauses over the groups or the rows
# the parts would each compute. (ORDER BY over the one row changes nothing; LIMIT and
# OFFSET apply to the combined row.)
_WHOLE_ROW = ("group", "having", "distinct", "windows", "qualify")
_ROWS = ("limit", "offset")


def plan_query(tree: exp.Expression, policy: Policy, offset: int, metrics: Metrics,
               public: PublicBranch) -> PrivateAggregate | Composite:
    """The plan of a query over private tables: one release, or a Composite of several.

    Raises Refusal for what is not answered, MissingMetrics as plan_private_aggregate."""
    if isinstance(tree, exp.SetOperation):
        return _set_operation(tree, policy, offset, metrics, public)
    if isinstance(tree, exp.Select):
        parts = _choice_parts(tree, offset)
        if parts is not None:
            return _split(tree, parts, policy, offset, metrics)
        if _row_subqueries(tree, policy):
            return _limited(tree, policy, offset, metrics)
    return plan_private_aggregate(tree, policy, offset, metrics)


def _choice_parts(tree: exp.Select, offset: int) -> list[list[int]] | None:
    """The select list's indexes by release: the noisy outputs together, then the choices
    of each column (one exponential mechanism each). None when the statement is one
    release, or cannot be split by column (a choice inside an expression, GROUP BY,
    HAVING: the planner's own message then explains)."""
    if any(tree.args.get(clause) for clause in _WHOLE_ROW):
        return None
    noisy: list[int] = []
    choices: dict[tuple[str, str], list[int]] = {}
    for index, projection in enumerate(tree.expressions):
        node = unalias(projection)
        try:
            spec = choice_spec(node, offset)
        except Refusal:
            return None
        if spec is not None:
            key = (spec.kind, spec.column.sql(dialect="postgres"))
            choices.setdefault(key, []).append(index)
        elif node.find(*_CHOICES):
            return None
        else:
            noisy.append(index)
    parts = ([noisy] if noisy else []) + list(choices.values())
    return parts if choices and len(parts) > 1 else None


def _split(tree: exp.Select, parts: list[list[int]], policy: Policy, offset: int,
           metrics: Metrics) -> Composite:
    branches, combine = _split_parts(tree, parts, policy, offset, metrics, 0, "")
    return _composite(branches, combine, tree, offset, policy)


def _split_parts(tree: exp.Select, parts: list[list[int]], policy: Policy, offset: int,
                 metrics: Metrics, first: int, label: str
                 ) -> tuple[list[Branch], exp.Select]:
    """One branch per part (numbered from `first`), each the statement with that part's
    columns, and the SELECT that puts the columns back in the statement's order (each
    branch has one row)."""
    branches, columns = [], {}
    for number, indexes in enumerate(parts, first):
        part = tree.copy()
        part.set("expressions", [tree.expressions[i].copy() for i in indexes])
        for clause in ("order", *_ROWS):
            part.set(clause, None)
        branches.append(Branch(part.sql(dialect="postgres"),
                               plan_private_aggregate(part.copy(), policy, offset, metrics),
                               label))
        for column, index in enumerate(indexes):
            columns[index] = exp.column(f"c{column}", table=f"b{number}", quoted=True)
    combine = exp.select(*[
        columns[index].as_(name_of(projection), quoted=True)
        for index, projection in enumerate(tree.expressions)])
    for number in range(first, first + len(parts)):
        combine = combine.join(branch_source(number), join_type="cross") if number > first \
            else combine.from_(branch_source(number))
    for clause in _ROWS:
        if tree.args.get(clause) is not None:
            combine.set(clause, tree.args[clause].copy())
    return branches, combine


def _row_subqueries(tree: exp.Select, policy: Policy) -> list[exp.Subquery]:
    """The outermost subqueries of the statement's LIMIT and OFFSET that read private
    tables: each is a release of its own, the rows' count applied over released values."""
    found: list[exp.Subquery] = []
    for clause in _ROWS:
        node = tree.args.get(clause)
        found += [sub for sub in (node.find_all(exp.Subquery) if node is not None else ())
                  if sub.find_ancestor(exp.Subquery) is None and _reads_private(sub, policy)]
    return found


def _reads_private(node: exp.Expression, policy: Policy) -> bool:
    return any(policy.is_private(table.db, table.name) for table in real_tables(node))


def _limited(tree: exp.Select, policy: Policy, offset: int, metrics: Metrics) -> Composite:
    """LIMIT or OFFSET by an aggregate over private rows: the statement without them is
    one release, each such subquery another (one row, one column), and `combine` applies
    LIMIT/OFFSET over the released rows, the subquery reading the released value."""
    whole = tree.copy()
    main = tree.copy()
    for clause in _ROWS:
        main.set(clause, None)
    # PostgreSQL limits the groups that exist (groups.occupied_by), in the statement's order.
    plan = plan_private_aggregate(main.copy(), policy, offset, metrics, occupied=True)
    branches = [Branch(main.sql(dialect="postgres"), plan)]
    combine = exp.select(*[
        exp.column(f"c{column}", table="b0", quoted=True).as_(name, quoted=True)
        for column, name in enumerate(_names(main, plan))]).from_(branch_source(0))
    written: set[int] = set()
    shared = whole.args.get("with_")
    for number, sub in enumerate(_row_subqueries(whole, policy), 1):
        query = sub.this
        if shared is not None and isinstance(query, exp.Select):  # it may read the WITH
            given = [cte.copy() for cte in _read_ctes(shared.expressions, query)]
            if given and query.args.get("with_") is None and not shared.args.get("recursive"):
                query.set("with_", exp.With(expressions=given))
        scalar = plan_private_aggregate(query.copy(), policy, offset, metrics)
        if not isinstance(query, exp.Select) or scalar.grouping is not None or \
                len(scalar.visible) != 1:
            raise unsupported("a subquery in LIMIT or OFFSET over private tables is answered "
                              "as one aggregate without GROUP BY", hint="Ask for one "
                              "count(*) there.", position=position_of(sub, offset))
        clause = "LIMIT" if sub.find_ancestor(exp.Limit, exp.Fetch) is not None else "OFFSET"
        branches.append(Branch(query.sql(dialect="postgres"), scalar, f"subquery in {clause}"))
        value = exp.select(exp.column("c0", table=f"b{number}", quoted=True)).from_(
            branch_source(number)).subquery()
        written.add(id(value))
        sub.replace(value)
    for clause in _ROWS:
        if whole.args.get(clause) is not None:
            combine.set(clause, whole.args[clause])
    return _composite(branches, combine, tree, offset, policy, written)


def _set_operation(tree: exp.SetOperation, policy: Policy, offset: int, metrics: Metrics,
                   public: PublicBranch) -> Composite:
    """Each branch reading private tables released on its own; the others, over public
    tables, run in `combine` as relayed queries would."""
    combine = tree.copy()
    shared = combine.args.get("with_")
    if shared is not None:
        # A WITH before the set operation names queries its branches read: each branch
        # gets its own copy (PostgreSQL runs a CTE where it is read; none may change state).
        combine.set("with_", None)
        for leaf in _leaves(combine):
            own = leaf.args.get("with_")
            if shared.args.get("recursive") or not isinstance(leaf, exp.Select) or \
                    (own is not None and own.args.get("recursive")):
                raise unsupported(f"this WITH before {tree.key.upper()} over private tables "
                                  "is not supported", hint="Write the WITH inside each "
                                  "branch, in parentheses.", position=position_of(tree, offset))
            given = _read_ctes(shared.expressions, leaf)
            if given or own is not None:
                leaf.set("with_", exp.With(expressions=[
                    *(cte.copy() for cte in given), *(own.expressions if own else [])]))
    branches: list[Branch] = []
    for place, leaf in enumerate(list(_leaves(combine)), 1):
        if not _reads_private(leaf, policy):
            public(leaf)
            if leaf.args.get("with_") is not None and not isinstance(leaf.parent, exp.Subquery):
                leaf.replace(exp.Subquery(this=leaf.copy()))  # a WITH given it above
            continue
        number = len(branches)
        parts = _choice_parts(leaf, offset) if isinstance(leaf, exp.Select) else None
        if parts is not None and isinstance(leaf, exp.Select):  # itself several releases
            split, select = _split_parts(leaf, parts, policy, offset, metrics, number,
                                         f"branch {place}")
            branches += split
            leaf.replace(select if select.args.get("limit") is None and
                         select.args.get("offset") is None else exp.Subquery(this=select))
            continue
        text = leaf.sql(dialect="postgres")
        # PostgreSQL combines the groups that exist: a branch over a declared domain
        # releases only the keys whose noisy count is above 0 (groups.occupied_by).
        plan = plan_private_aggregate(leaf.copy(), policy, offset, metrics, occupied=True)
        branches.append(Branch(text, plan, f"branch {place}"))
        leaf.replace(exp.select(*[
            exp.column(f"c{column}", table=f"b{number}", quoted=True).as_(name, quoted=True)
            for column, name in enumerate(_names(leaf, plan))]).from_(branch_source(number)))
    return _composite(branches, combine, tree, offset, policy)


def _names(leaf: exp.Expression, plan: PrivateAggregate) -> list[str]:
    """The names of a branch's columns: its outputs', or for a query over an aggregate
    subquery (release/outer.py) its own select list's."""
    if plan.outer is None or not isinstance(leaf, exp.Select) or \
            any(isinstance(unalias(p), exp.Star) or p.find(exp.Star) for p in leaf.expressions):
        return [output.name for output in plan.visible]
    return [name_of(projection) for projection in leaf.expressions]


def _read_ctes(ctes: list[exp.CTE], leaf: exp.Expression) -> list[exp.CTE]:
    """The CTEs a branch reads, directly or through another, in their order: a branch
    over public tables stays one, whatever the WITH names for the others."""
    read = {table.name for table in leaf.find_all(exp.Table) if not table.db}
    for cte in reversed(ctes):  # a CTE reads only those before it
        if cte.alias in read:
            read |= {table.name for table in cte.this.find_all(exp.Table) if not table.db}
    return [cte for cte in ctes if cte.alias in read]


def _leaves(node: exp.Expression) -> Iterator[exp.Expression]:
    """The queries a set operation combines, left to right."""
    if isinstance(node, exp.SetOperation):
        yield from _leaves(node.this)
        yield from _leaves(node.expression)
    elif isinstance(node, exp.Subquery):
        yield from _leaves(node.this)
    else:
        yield node


def _composite(branches: list[Branch], combine: exp.Expression, tree: exp.Expression,
               offset: int, policy: Policy, written: frozenset[int] | set[int] = frozenset()
               ) -> Composite:
    """`written`: the subqueries of LIMIT/OFFSET that dpgate wrote over a branch's released
    value (_limited), the only ones allowed there."""
    if combine.find(exp.Placeholder, exp.Parameter):
        raise unsupported("parameters outside the private parts of a statement answered in "
                          "several releases (in its ORDER BY, LIMIT or OFFSET, or a public "
                          "branch) are not supported", hint="Write the value.",
                          position=position_of(tree, offset))
    for clause in combine.find_all(exp.Limit, exp.Offset, exp.Fetch):
        # `combine` runs after the releases: a count of rows there would be a number
        # about private rows, unnoised, and a failure there is charged.
        found = next((node for node in clause.find_all(
            exp.Subquery, exp.Select, exp.Table, exp.Column, exp.AggFunc, exp.Window)
            if not any(id(above) in written for above in _upwards(node, clause))), None)
        if found is not None:
            raise unsupported("LIMIT and OFFSET of a statement answered in several releases "
                              "take a constant", hint="Write the number of rows: LIMIT 10.",
                              position=position_of(found, offset))
    own = {branch_table(number) for number in range(len(branches))}
    private = [table for table in real_tables(combine)
               if table.name not in own and policy.is_private(table.db or None, table.name)]
    if private:
        raise unsupported(f"{private[0].name} is read outside the private parts of this "
                          "statement", hint="Ask for it in a statement of its own.",
                          position=position_of(private[0], offset))
    sql = combine.sql(dialect="postgres")
    # The question: how the branches combine, and each branch's question.
    fingerprint = " -- ".join([sql, *(branch.plan.fingerprint_text for branch in branches)])
    return Composite(tuple(branches), sql, fingerprint)


def _upwards(node: exp.Expr, top: exp.Expr) -> Iterator[exp.Expr]:
    """`node` and its ancestors up to `top`."""
    current: exp.Expr | None = node
    while current is not None and current is not top:
        yield current
        current = current.parent
