"""`dpgate policy check` (also run by `dpgate serve` before it listens): the policy against
the database it will serve, so that a mistake stops the operator instead of reaching an
analyst as a raw PostgreSQL error.

PostgreSQL is the judge of types: each domain, bound and unit path is written as the SQL
the rewriter would send and PREPAREd on the reader connection (parsed and typed, never
executed, so no row is read). Privileges are asked with has_table_privilege.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass

import psycopg
from psycopg import sql

from rewriter.aggregate.rewrite import domain_values_sql
from rewriter.policy.model import ColumnDomain, Domain, Policy
from rewriter.release.explain import explain
from rewriter.sensitivity.metrics import Metrics

from ..config import Config

_PREPARED = "dpgate_policy_check"


@dataclass(frozen=True)
class Problem:
    """One finding: the policy setting it concerns, what is wrong, and how to fix it.
    An error stops `serve`; a warning or a note (what a setting costs) does not."""

    setting: str
    message: str
    fix: str
    level: str = "error"

    def __str__(self) -> str:
        return f"{self.level}: {self.setting}: {self.message}\n  fix: {self.fix}"


def check_policy(config: Config) -> list[Problem]:
    """Every problem of the configured policy against the configured backend, then a note
    of the noise each bounded column's SUM gets."""
    if not config.backend.dsn:
        return [Problem("backend.dsn", "not set", "give the reader role's DSN in "
                        "[backend] dsn or DPGATE_BACKEND_DSN")]
    with ExitStack() as stack:
        reader = stack.enter_context(psycopg.connect(config.backend.dsn, autocommit=True))
        relay = (stack.enter_context(psycopg.connect(config.backend.relay_dsn, autocommit=True))
                 if config.backend.relay_dsn else None)
        problems = list(_Checker(config.policy, reader, relay).problems())
    return problems + list(_bound_notes(config))


class _Checker:
    def __init__(self, policy: Policy, reader: psycopg.Connection,
                 relay: psycopg.Connection | None) -> None:
        self.policy, self.reader, self.relay = policy, reader, relay
        self.columns: dict[str, dict[str, str]] = {}  # "schema.table" -> column -> type

    def problems(self) -> Iterator[Problem]:
        yield from self._tables()
        yield from self._unit()
        for key, table in self.policy.tables.items():
            if key not in self.columns:
                continue
            for column, spec in table.columns.items():
                where = f"[tables.{table.name}.columns.{column}]"
                if column not in self.columns[key]:
                    yield Problem(where, f"{key} has no column {column} (it has "
                                  f"{', '.join(self.columns[key])})",
                                  "use the column's name as PostgreSQL spells it")
                    continue
                if spec.domain is not None:
                    yield from self._domain(where, key, column, spec.domain)
                if spec.bounds is not None:
                    yield from self._prepared(
                        f"{where} bounds",
                        f"SELECT CAST({_id(column)} AS numeric) FROM {_qualified(key)}",
                        f"bounds clamp numbers; {column} is {self.columns[key][column]}: "
                        "remove bounds, or give them to a numeric column")
        yield from self._privileges()

    def _tables(self) -> Iterator[Problem]:
        database = self.reader.info.dbname
        for key, table in self.policy.tables.items():
            columns = self._read_columns(key)
            if columns is None:
                yield Problem(f"[tables.{table.name}]", f"no table {key} in database "
                              f"{database}", "correct the name (schema.table), or remove the "
                              "section")
            else:
                self.columns[key] = columns

    def _read_columns(self, key: str) -> dict[str, str] | None:
        rows = self.reader.execute(
            "SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a "
            "WHERE a.attrelid = to_regclass(%s) AND a.attnum > 0 AND NOT a.attisdropped "
            "ORDER BY a.attnum", (_qualified(key),)).fetchall()
        return {name: type_name for name, type_name in rows} or None

    def _unit(self) -> Iterator[Problem]:
        unit = self.policy.unit
        if unit is None:
            return
        columns = self.columns.get(unit.table) or self._read_columns(unit.table)
        if columns is None:
            yield Problem("privacy_unit", f"no table {unit.table}", "name the table of the "
                          "people you protect")
            return
        self.columns.setdefault(unit.table, columns)
        if unit.column not in columns:
            yield Problem("privacy_unit", f"{unit.table} has no column {unit.column}",
                          f"use one of {', '.join(columns)}")
            return
        for key in self._private_tables():
            path = self.policy.unit_path(key)
            name = key.split(".", 1)[1]
            if path is None:
                yield Problem(f"[tables.{name}] unit", f"{key} does not say how its rows "
                              f"reach {unit.label}; analysts' queries on it are refused",
                              'add unit = "column" or "column -> table.key -> table.value"',
                              level="warning")
                continue
            joins, previous = [], ("t0", path.column)
            for number, hop in enumerate(path.hops, 1):
                alias = f"t{number}"
                joins.append(f"JOIN {_qualified(hop.table)} {alias} ON "
                             f"{previous[0]}.{_id(previous[1])} = {alias}.{_id(hop.key)}")
                previous = (alias, hop.value)
            joins.append(f"JOIN {_qualified(unit.table)} u ON "
                         f"{previous[0]}.{_id(previous[1])} = u.{_id(unit.column)}")
            yield from self._prepared(
                f"[tables.{name}] unit", f"SELECT 1 FROM {_qualified(key)} t0 " + " ".join(joins),
                f"unit = {str(path)!r} must name existing columns whose types compare, "
                "ending at a value of the unit's column (a foreign-key chain)")

    def _domain(self, where: str, key: str, column: str, domain: Domain) -> Iterator[Problem]:
        if isinstance(domain, ColumnDomain) and self._read_columns(domain.table) is None:
            yield Problem(f"{where} domain", f"no table {domain.table}",
                          "name a public table of the database")
            return
        # The join a histogram over the domain makes (rewriter/aggregate/rewrite.py), an enum's
        # labels cast to its type as the proxy casts them (proxy/engine/knowledge.py).
        enum = self.reader.execute(
            "SELECT format('%%I.%%I', n.nspname, t.typname) FROM pg_attribute a "
            "JOIN pg_type t ON t.oid = a.atttypid JOIN pg_namespace n ON n.oid = t.typnamespace "
            "WHERE a.attrelid = to_regclass(%s) AND a.attname = %s AND t.typtype = 'e'",
            (_qualified(key), column)).fetchone()
        values = domain_values_sql(domain, "v", enum[0] if enum else None)
        statement = f"SELECT 1 FROM {_qualified(key)} q JOIN ({values}) d ON q.{_id(column)} = d.v"
        fix = (f"write the domain's values as {self.columns[key][column]} values (dates as "
               "2024-01-31, text in quotes)")
        problems = list(self._prepared(f"{where} domain", statement, fix))
        if enum and not problems:
            # PREPARE leaves the labels' cast to the run, where a label the enum lacks
            # fails: run the values alone (the policy's constants or a public table).
            problems = list(self._prepared(f"{where} domain", values, "write the enum's "
                                           "labels (\\dT+ in psql lists them)", run=True))
        yield from problems

    def _privileges(self) -> Iterator[Problem]:
        relay_role = self.relay.info.user if self.relay is not None else ""
        reader_role = self.reader.info.user
        if self.relay is None:
            yield Problem("backend.relay_dsn", "empty: relayed SQL runs as the reader, which "
                          "can read private rows, so only dpgate's classifier guards them",
                          "create a relay role (dpgate setup-roles) and set relay_dsn",
                          level="warning")
        named = set(self.columns)
        for key in self._private_tables():
            name = _shown(key)
            if not self._can(self.reader, "has_table_privilege(%s, 'SELECT')", key):
                yield Problem(f"[tables.{key.split('.', 1)[1]}]", f"the reader role "
                              f"{reader_role} cannot SELECT {key}: every answer on it fails",
                              f"GRANT SELECT ON {name} TO {reader_role}")
            if self.relay is not None and self._can(
                    self.relay, "has_any_column_privilege(%s, 'SELECT')", key):
                yield Problem(f"[tables.{key.split('.', 1)[1]}]", f"the relay role "
                              f"{relay_role} can SELECT private table {key}: relayed SQL "
                              "could read its rows", f"REVOKE SELECT ON {name} FROM "
                              f"{relay_role}; GRANT REFERENCES ON {name} TO {relay_role}")
        for key in sorted(named - set(self._private_tables())):
            if self.relay is not None and not self._can(
                    self.relay, "has_table_privilege(%s, 'SELECT')", key):
                yield Problem(f"[tables.{key.split('.', 1)[1]}]", f"public table {key} is "
                              f"not readable by the relay role {relay_role}: analysts' "
                              "queries on it fail", f"GRANT SELECT ON {_shown(key)} TO "
                              f"{relay_role}", level="warning")

    def _private_tables(self) -> list[str]:
        """The private tables that exist: those the policy names and those of its default
        schema that it does not name (a table the policy forgets is private)."""
        rows = self.reader.execute(
            "SELECT n.nspname || '.' || c.relname FROM pg_class c JOIN pg_namespace n "
            "ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind IN ('r', 'p', 'v', "
            "'m', 'f')", (self.policy.default_schema,)).fetchall()
        keys = set(self.columns) | {row[0] for row in rows}
        if self.policy.unit is not None and self.policy.unit.table in self.columns:
            keys.add(self.policy.unit.table)
        return sorted(key for key in keys if self.policy.is_private(*key.split(".", 1)))

    @staticmethod
    def _can(connection: psycopg.Connection, test: str, key: str) -> bool:
        row = connection.execute(f"SELECT {test}", (_qualified(key),)).fetchone()
        return bool(row and row[0])

    def _prepared(self, setting: str, statement: str, fix: str,
                  run: bool = False) -> Iterator[Problem]:
        """PostgreSQL's verdict on a statement, parsed and typed but not run (with `run`,
        run: only for a statement that reads no private row)."""
        try:
            self.reader.execute(statement if run else f"PREPARE {_PREPARED} AS {statement}")
        except psycopg.Error as error:
            message = (error.diag.message_primary or str(error)).strip()
            yield Problem(setting, f"PostgreSQL says: {message}", fix)
        else:
            if not run:
                self.reader.execute(f"DEALLOCATE {_PREPARED}")


def _bound_notes(config: Config) -> Iterator[Problem]:
    """Bounds look innocent but decide usefulness: the noise scale of a SUM over each
    bounded column at the default ε, as `dpgate explain` computes it (where it can
    without measured metrics)."""
    epsilon = config.privacy.default_epsilon
    for key, table in config.policy.tables.items():
        for column, spec in table.columns.items():
            if spec.bounds is None or not table.private:
                continue
            report = explain(f"SELECT sum({_id(column)}) FROM {_qualified(key)}", config.policy,
                             Metrics(), epsilon, config.privacy.default_delta,
                             sum_count_share=config.privacy.sum_count_share)
            if report.get("supported"):
                scale = report["columns"][0]["noise_scale"]
                low, high = spec.bounds
                yield Problem(f"[tables.{table.name}.columns.{column}] bounds",
                              f"sum({column}) gets noise of scale {scale:,.0f} at epsilon "
                              f"{epsilon:g} (bounds [{low:g}, {high:g}])",
                              "narrower bounds (or a smaller max_contributions) lower it",
                              level="note")


def _id(name: str) -> str:
    return sql.Identifier(name).as_string(None)


def _qualified(key: str) -> str:
    schema, _, name = key.partition(".")
    return f"{_id(schema)}.{_id(name)}"


def _shown(key: str) -> str:
    """A table's name as a fix prints it: quoted only where SQL needs it."""
    return ".".join(part if re.fullmatch(r"[a-z_][a-z0-9_]*", part) else _id(part)
                    for part in key.split(".", 1))
