"""Functions that must never run through dpgate, and those allowed on private rows."""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

# Functions that run SQL text, read files or server state, sleep, change settings or
# reveal the size or contents of tables below SQL (pages, tuples, buffers, free space,
# visibility maps, WAL). Matched on the lower-case name, as exact names or prefixes.
# Extension functions are listed too: an operator may install pageinspect and friends.
DENIED_PREFIXES = (
    "pg_read_", "pg_ls_", "pg_stat_", "pg_file_", "pg_logdir_", "lo_", "dblink",
    "query_to_", "table_to_", "cursor_to_", "schema_to_", "database_to_",
    "pg_advisory", "pg_try_advisory", "pg_create_", "pg_drop_", "pg_logical_",
    "pg_replication_", "pg_switch_", "pg_backup_", "pg_wal_", "pg_log_", "pg_copy_",
    # pgstattuple, pg_visibility, pg_buffercache, pg_freespacemap, pg_walinspect,
    # pageinspect, amcheck, pg_prewarm
    "pgstat", "pg_visibility", "pg_check_", "pg_buffercache", "pg_freespace",
    "pg_get_wal_", "bt_", "brin_", "gin_", "gist_page_", "hash_page_", "heap_page_",
    "heap_tuple_", "verify_heapam", "pg_prewarm", "autoprewarm",
)
DENIED_NAMES = frozenset({
    # sizes; in relayed SQL the core ones are neutralised first (neutralise.py)
    "pg_relation_size", "pg_total_relation_size", "pg_table_size", "pg_indexes_size",
    "pg_database_size", "pg_tablespace_size", "pg_column_size", "pg_relpages",
    # statistics and sequence positions (a serial's last value counts inserted rows)
    "pg_mcv_list_items", "pg_get_statisticsobjdef_expressions", "pg_sequence_last_value",
    # large objects whose names lack the lo_ prefix
    "loread", "lowrite",
    # page inspection without a common prefix
    "get_raw_page", "page_header", "page_checksum", "tuple_data_split",
    "fsm_page_contents", "hash_bitmap_info", "hash_metapage_info",
    "pg_truncate_visibility_map",
    # run SQL text given as an argument
    "ts_stat", "ts_rewrite",
    # sleep, change settings or sequences, signal or notify other sessions
    "pg_sleep", "pg_sleep_for", "pg_sleep_until", "set_config", "pg_terminate_backend",
    "pg_cancel_backend", "pg_reload_conf", "pg_rotate_logfile", "pg_current_logfile",
    "pg_notify", "pg_promote", "pg_export_snapshot", "pg_import_system_collations",
    "nextval", "setval", "xmlparse", "pg_get_object_address",
})

# Expression nodes allowed when evaluated on private rows. Every one of them is total
# on its inputs (cannot raise an error that depends on the data), which keeps the
# presence of an error from telling anything about a row.
ROW_SAFE_NODES: tuple[type[exp.Expression], ...] = (
    exp.Column, exp.Identifier, exp.Literal, exp.Boolean, exp.Null, exp.Paren,
    exp.And, exp.Or, exp.Not, exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE,
    exp.Is, exp.In, exp.Between, exp.Like, exp.ILike, exp.Case, exp.If, exp.Coalesce,
    exp.Lower, exp.Upper, exp.Length, exp.Trim, exp.Extract, exp.Var,
    exp.Tuple, exp.Star, exp.DPipe, exp.Concat, exp.Where, exp.Parameter,
    exp.Placeholder, exp.NullSafeEQ, exp.NullSafeNEQ, exp.DataType,
    exp.Greatest, exp.Least, exp.Nullif,
    exp.CurrentDate, exp.CurrentTimestamp, exp.Interval, exp.Any, exp.All, exp.Array,
    # clauses of a derived table, checked item by item
    exp.Order, exp.Ordered, exp.Group, exp.Limit, exp.Offset,
)


# Placeholders of values dpgate computes before the query runs (see constants.py).
RESERVED_PREFIX = "__dpgate_"

# abs() and unary minus are missing above: they overflow on the smallest integer.
# date_trunc too: it fails on dates before year 1 or after 10,000 after truncation; on rows
# dpgate evaluates it guarded (arithmetic.total_trunc). The nodes below are total only with
# some arguments, which `row_failure` checks.
# Fields extract() takes from a date, a timestamp and a timestamptz alike (hour would fail
# on a date, and only when a row reaches it).
EXTRACT_UNITS = frozenset({
    "century", "day", "decade", "dow", "doy", "epoch", "isodow", "isoyear", "julian",
    "millennium", "month", "quarter", "week", "year",
})
TRUNC_UNITS = frozenset({
    "microseconds", "milliseconds", "second", "minute", "hour", "day", "week", "month",
    "quarter", "year", "decade", "century", "millennium",
})


# The shape of a query over private tables: these nodes evaluate nothing themselves (set
# operations compare whole rows of types PostgreSQL checks when it plans, never per row).
STRUCTURE_NODES: tuple[type[exp.Expression], ...] = (
    exp.Select, exp.From, exp.Join, exp.Table, exp.TableAlias, exp.Alias, exp.With, exp.CTE,
    exp.Subquery, exp.Union, exp.Intersect, exp.Except, exp.Distinct, exp.Having, exp.Exists,
)
# Aggregates dpgate itself answers (released.py and choice.py check their arguments).
AGGREGATE_NODES: tuple[type[exp.Expression], ...] = (
    exp.Count, exp.Sum, exp.Avg, exp.Min, exp.Max, exp.WithinGroup, exp.PercentileCont,
    exp.PercentileDisc, exp.Median, exp.Mode, exp.Filter,
)
# Operators that can fail (overflow, division by zero, a bad cast), allowed only on
# constants written in the statement: PostgreSQL folds an immutable expression of literals
# while planning, so its error comes before any row is read, whatever the rows hold.
FOLDED_NODES: tuple[type[exp.Expression], ...] = (
    exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod, exp.Neg, exp.Cast, exp.Pow,
)
# A bound parameter counts as a literal: dpgate plans with the values bound (a custom
# plan, EXPLAIN included) before the charge, so PostgreSQL folds it like one.
_LITERAL_LEAVES = (exp.Literal, exp.Null, exp.Boolean, exp.DataType, exp.Var, exp.Interval,
                   exp.Paren, exp.Tuple, exp.DPipe, exp.Parameter) + FOLDED_NODES


def is_literal_constant(node: exp.Expression) -> bool:
    """Whether `node` is built of literals and immutable operators only (folded when planned)."""
    return all(isinstance(n, _LITERAL_LEAVES) for n in node.walk())


def node_failure(node: exp.Expression) -> str | None:
    """Why `node` must not be evaluated on or because of private rows, or None.

    Every allowed node is total on its inputs: it cannot raise an error for some rows only,
    so neither the presence of an error nor its absence tells anything about a row.
    """
    if isinstance(node, ROW_SAFE_NODES):
        return row_failure(node)
    if isinstance(node, FOLDED_NODES) and is_literal_constant(node):
        return None
    what = function_name(node) or node.key.upper()
    if isinstance(node, exp.Window):
        return "window functions are not allowed over private rows: they see other rows"
    if isinstance(node, FOLDED_NODES):
        return (f"{what} is not allowed on private rows or on values computed when a row is "
                "read: it could fail for some rows only")
    return f"{what} is not allowed in a query over private tables"


def row_failure(node: exp.Expression) -> str | None:
    """Why an allowed node could still fail on some rows only (its arguments), or None."""
    if isinstance(node, (exp.Like, exp.ILike)):
        pattern = node.expression
        if not (isinstance(pattern, exp.Literal) and pattern.is_string):
            return "a LIKE pattern on private rows must be a string written in the statement"
        if (len(pattern.this) - len(pattern.this.rstrip("\\"))) % 2:
            return "a LIKE pattern ending in its escape character fails on every row it meets"
    if isinstance(node, exp.Extract):
        return _unit_failure("extract", node.this, EXTRACT_UNITS)
    if isinstance(node, (exp.TimestampTrunc, exp.DateTrunc)):
        if node.args.get("zone") is not None:
            return "date_trunc on private rows takes no time zone argument"
        return _unit_failure("date_trunc", node.args.get("unit"), TRUNC_UNITS)
    if isinstance(node, exp.Identifier) and node.name.startswith(RESERVED_PREFIX):
        return f"names starting with {RESERVED_PREFIX} are reserved by dpgate"
    if isinstance(node, (exp.Array, exp.DPipe)) and node.find(exp.Column) is not None:
        # ARRAY[…] of arrays and || of arrays fail when dimensions or lengths differ, and
        # a CASE chooses the shape row by row. Array columns are caught with their types
        # (row_checks.py); constants of fixed shape are folded when planned.
        operands = node.expressions if isinstance(node, exp.Array) else \
            [node.this, node.expression]
        if any(may_be_array(operand) for operand in operands):
            return ("arrays of arrays and || of arrays can fail on some rows only (their "
                    "dimensions differ)")
    return None


# Nodes whose value is one of their operands, chosen row by row.
_CHOICES = (exp.Paren, exp.Case, exp.If, exp.Coalesce, exp.Nullif, exp.Greatest, exp.Least,
            exp.DPipe)


def may_be_array(node: exp.Expression,
                 is_array_column: Callable[[exp.Column], bool] = lambda column: False) -> bool:
    """Whether `node` could be an array: an array constructor, a cast to an array type, a
    parameter or computed value (of a type known only at run time), an array column, or a
    choice among such values."""
    if isinstance(node, (exp.Array, exp.Parameter, exp.Placeholder)):
        return True
    if isinstance(node, exp.Cast):
        return node.to.is_type(exp.DataType.Type.ARRAY) or "[" in node.to.sql("postgres")
    if isinstance(node, exp.Column):
        return is_array_column(node)
    if isinstance(node, _CHOICES):
        if isinstance(node, exp.Case):
            results = [case.args.get("true") for case in node.args.get("ifs") or []]
            results.append(node.args.get("default"))
        elif isinstance(node, exp.If):
            results = [node.args.get("true"), node.args.get("false")]
        elif isinstance(node, exp.Nullif):
            results = [node.this]
        else:
            results = [node.this, node.args.get("expression"), *node.expressions]
        return any(may_be_array(result, is_array_column) for result in results
                   if isinstance(result, exp.Expression))
    return False


def _unit_failure(function: str, unit: exp.Expression | None, units: frozenset[str]
                  ) -> str | None:
    if isinstance(unit, (exp.Var, exp.Literal)) and unit.name.lower() in units:
        return None
    return f"{function} on private rows takes one of: {', '.join(sorted(units))}"


def function_name(node: exp.Expr) -> str | None:
    """The lower-case SQL name of a function call node, or None if it is not a call."""
    if isinstance(node, exp.Anonymous):
        # `name`, not `this`: a quoted name ("pg_relation_size") must match like a bare one.
        return node.name.lower()
    if isinstance(node, exp.Func) and not isinstance(node, exp.Connector):
        return node.sql_name().lower()
    return None


# Volatile functions (pg_proc.provolatile = 'v') that only draw random numbers or read the
# clock: allowed in a private statement, where every other volatile function is refused.
DRAWS_OR_CLOCK = frozenset({
    "random", "random_normal", "gen_random_uuid", "uuidv4", "uuidv7", "clock_timestamp",
    "timeofday",
})
def reads_alike(tree: exp.Expr) -> bool:
    """Whether two reads of the statement's rows in one statement give the same rows: it
    calls none of DRAWS_OR_CLOCK (by PostgreSQL's name or sqlglot's node), samples no
    table, and no query inside it depends on the order a scan meets rows in — a LIMIT,
    OFFSET or FETCH (which rows), DISTINCT ON (which row of each) or an aggregate (a
    float sum's last digits): that order differs between two scans (a synchronised
    sequential scan starts where the last one was; parallel workers). Every other
    volatile function is refused on private rows, and one statement reads one snapshot."""
    if any(isinstance(node, _DRAWS_OR_SAMPLES) or function_name(node) in DRAWS_OR_CLOCK
           for node in tree.find_all(exp.Func, exp.TableSample)):
        return False
    return not any(_depends_on_order(query) for query in tree.find_all(exp.Query)
                   if query is not tree)


def _depends_on_order(query: exp.Query) -> bool:
    distinct = query.args.get("distinct")
    return any(query.args.get(clause) is not None for clause in ("limit", "offset", "fetch")) \
        or (distinct is not None and distinct.args.get("on") is not None) \
        or (isinstance(query, exp.Select) and query.find(exp.AggFunc) is not None)


# sqlglot's own nodes for random() (Rand), gen_random_uuid() (Uuid) and their kin.
_DRAWS_OR_SAMPLES = (exp.Rand, exp.Randn, exp.Randstr, exp.Uuid, exp.TableSample)

# Marked stable, yet they give the transaction an id for good (state that outlives it).
STATE_CHANGING_STABLE = frozenset({"txid_current", "pg_current_xact_id"})


def changes_state(name: str, volatile: frozenset[str]) -> bool:
    """Whether a function (lower-case name) may change the state of a connection or of the
    database: PostgreSQL marks it volatile (`volatile`, read from pg_proc) and it does more
    than draw random numbers or read the clock, or it assigns a transaction id."""
    return name in STATE_CHANGING_STABLE or (name in volatile and name not in DRAWS_OR_CLOCK)


# Releases only the session's own advisory locks: asyncpg's pool runs it on every release.
ALLOWED_NAMES = frozenset({"pg_advisory_unlock_all"})


def is_denied(name: str) -> bool:
    """Whether a function (lower-case name) must never run through dpgate."""
    if name in ALLOWED_NAMES:
        return False
    return name in DENIED_NAMES or name.startswith(DENIED_PREFIXES)
