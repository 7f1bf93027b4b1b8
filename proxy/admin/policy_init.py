"""`dpgate policy init`: a commented policy file drafted from a database's catalog.

The draft says only what the catalog proves (enum labels, CHECK constraints, booleans, keys
of public lookup tables, foreign-key chains) and marks with TODO what only the data owner
can decide: bounds, which tables are public, the contribution limits.
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Iterable, Mapping, Sequence

from .catalog_read import ForeignKey, TableInfo

NUMERIC_TYPES = ("smallint", "integer", "bigint", "numeric", "real", "double precision")
DATE_TYPES = ("date", "timestamp")
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def draft_policy(tables: Mapping[str, TableInfo], schema: str, public: Iterable[str]) -> str:
    """The policy file's text: every table private unless named in `public`."""
    public = {name.lower() for name in public}
    unknown = public - set(tables)
    if unknown:
        raise ValueError(f"--public names table(s) not in schema {schema}: "
                         f"{', '.join(sorted(unknown))}")
    private = [name for name in tables if name not in public]
    paths = {name: _paths_to(tables, private, name) for name in private
             if len(tables[name].primary_key) == 1}
    unit = _unit(tables, paths)
    lines = _header(schema, unit, tables)
    for name, table in tables.items():
        lines += ["", f"[tables.{_key(name)}]"]
        if name in public:
            lines += ["private = false  # relayed as it is: analysts read its rows"]
            continue
        lines += ["private = true"]
        if unit is not None and name != unit:
            path = paths[unit].get(name)
            lines += [f"unit = {json.dumps(path)}" if path is not None else
                      "# TODO unit: no foreign-key chain reaches the unit; name one "
                      "(\"column -> table.key -> table.value\") or queries on this table "
                      "are refused"]
        lines += _columns(table, public)
    return "\n".join(lines) + "\n"


def _header(schema: str, unit: str | None, tables: Mapping[str, TableInfo]) -> list[str]:
    lines = [
        "# dpgate policy drafted by `dpgate policy init` from the catalog (no row was read).",
        "# Check it with `dpgate policy check --config dpgate.toml`; dpgate.toml names it",
        "# with [policy] file = \"policy.toml\". Lines marked TODO need your decision.",
        "# Every table is private unless it says private = false: a table you forget here",
        "# stays private. TODO: a small lookup table that holds no one's data (codes, names",
        "# of departments) can be public: run again with --public t1,t2.",
    ]
    if schema != "public":
        lines += [f"default_schema = {json.dumps(schema)}"]
    if unit is None:
        return lines + [
            "# TODO privacy_unit: no private table is reached by foreign keys, so none is",
            "# proposed; without one every row is protected on its own (row level). Name the",
            "# table of the people you protect: privacy_unit = { table = \"…\", column = \"…\" }",
        ]
    column = tables[unit].primary_key[0]
    return lines + [
        "# The privacy unit: what one answer protects as a whole (every row of one",
        f"# {unit} row, reached through the foreign keys below). Proposed because the most",
        "# private tables reach it; change it if you protect someone else.",
        f"privacy_unit = {{ table = {json.dumps(unit)}, column = {json.dumps(column)} }}",
        "# TODO tau: rows one unit may add to an answer (more are left out; noise grows with",
        "# it). Choose from your data: a typical person's rows per question.",
        "max_contributions = 10",
        "# TODO kappa: groups one unit may add to in a GROUP BY.",
        "max_groups = 5",
        "row_level_fallback = false  # joins that mix units are refused",
    ]


def _paths_to(tables: Mapping[str, TableInfo], private: list[str], unit: str
              ) -> dict[str, str]:
    """The shortest foreign-key chain from each private table to `unit`'s key, as a policy
    `unit` setting ("column" or "column -> table.key -> table.value …")."""
    key = tables[unit].primary_key[0]
    found: dict[str, str] = {}
    for start in private:
        # Breadth first over (table, chain so far, the key by which the chain entered it).
        queue: deque[tuple[str, str, str]] = deque([(start, "", "")])
        seen = {start}
        while queue and start != unit and start not in found:
            table, chain, entry = queue.popleft()
            for fk in tables[table].foreign_keys:
                step = f"{chain} -> {table}.{entry} -> {table}.{fk.column}" if chain \
                    else fk.column
                if fk.table == unit and fk.key == key:
                    found[start] = step
                    break
                if fk.table in private and fk.table not in seen:
                    seen.add(fk.table)
                    queue.append((fk.table, step, fk.key))
    return found


def _unit(tables: Mapping[str, TableInfo], paths: Mapping[str, Mapping[str, str]]
          ) -> str | None:
    """The private table the most private tables reach; ties: the one that refers to
    fewest others (the people, not their events), then by name."""
    ranked = sorted((-len(reached), len(tables[name].foreign_keys), name)
                    for name, reached in paths.items() if reached)
    return ranked[0][2] if ranked else None


def _columns(table: TableInfo, public: set[str]) -> list[str]:
    lines: list[str] = []
    references = {fk.column: fk for fk in table.foreign_keys}
    for column, type_name in table.columns.items():
        settings, todos = _column_settings(table, column, type_name,
                                           references.get(column), public)
        header = f"[tables.{_key(table.name)}.columns.{_key(column)}]  # {type_name}"
        if settings:
            lines += ["", header, *settings, *todos]
        elif todos:
            # Commented out whole, so that uncommenting (or appending the section) is
            # all it takes: TOML forbids defining a table twice.
            lines += ["", f"# {header}", *todos]
    return lines


def _column_settings(table: TableInfo, column: str, type_name: str, fk: ForeignKey | None,
                     public: set[str]) -> tuple[list[str], list[str]]:
    """The settings the catalog proves for a column, and the TODO comments it cannot."""
    settings: list[str] = []
    todos: list[str] = []
    if column in table.values:
        settings.append(f"domain = {_array(table.values[column])}  # CHECK constraint")
    elif column in table.enums:
        settings.append(f"domain = {_array(table.enums[column])}  # the enum's labels")
    elif type_name == "boolean":
        settings.append("domain = [true, false]")
    elif fk is not None and fk.table in public:
        settings.append(f"domain = {{ table = {json.dumps(fk.table)}, "
                        f"column = {json.dumps(fk.key)} }}  # a public table's key")
    if column in table.ranges:
        low, high = table.ranges[column]
        if isinstance(low, int) and isinstance(high, int):
            settings.append(f"domain = {{ range = [{low}, {high}] }}  # CHECK constraint")
        settings.append(f"bounds = [{low}, {high}]  # CHECK constraint")
        todos.append("# TODO the noise of SUM and AVG grows with hi - lo: narrower bounds "
                     "are better")
    elif type_name.startswith(NUMERIC_TYPES) and fk is None and column not in table.primary_key:
        todos += ["# TODO bounds = [lo, hi]: values are clamped to them in SUM and AVG,",
                  "# and the noise grows with hi - lo: the narrowest range you can publish"]
    elif type_name.startswith(DATE_TYPES):
        todos.append("# TODO domain = { range = [YYYY-MM-DD, YYYY-MM-DD] } to group by it")
    return settings, todos


def _array(values: Sequence[str | int | float]) -> str:
    return "[" + ", ".join(json.dumps(value) for value in values) + "]"


def _key(name: str) -> str:
    return name if _BARE_KEY.fullmatch(name) else json.dumps(name)
