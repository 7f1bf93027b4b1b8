"""The data owner's policy: which tables are private, and what may be said of their columns.

A column may carry:
- `domain`: its public set of values (a list, an integer or date range, or a column of a
  public table). Only such a column is *releasable* as a GROUP BY key; its histogram is
  released over the whole domain.
- `key_selection = true`: may be grouped without a domain, releasing only the groups whose
  noisy count passes a threshold (τ-thresholding, which costs δ).
- `bounds = [lo, hi]`: values are clamped to this range for SUM and AVG.
- `max_freq`: a declared maximum frequency that replaces the measured one (FLEX metric).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .privacy_unit import PrivacyUnit, UnitPath, check_unit_paths, privacy_unit_from_dict, unit_path

CATALOG_SCHEMAS = frozenset({"pg_catalog", "information_schema"})
DEFAULT_MAX_CELLS = 10_000

DomainValue = int | float | str | bool | dt.date


@dataclass(frozen=True)
class ValuesDomain:
    values: tuple[DomainValue, ...]

    @property
    def size(self) -> int:
        return len(self.values)


@dataclass(frozen=True)
class RangeDomain:
    """Integers or dates from `low` to `high` inclusive; a date step counts days."""

    low: int | dt.date
    high: int | dt.date
    step: int = 1

    @property
    def size(self) -> int:
        if isinstance(self.low, dt.date):
            assert isinstance(self.high, dt.date)  # both ends are dates, or both numbers
            span = (self.high - self.low).days
        else:
            assert not isinstance(self.high, dt.date)
            span = int(self.high) - int(self.low)
        return max(0, span // self.step + 1)


@dataclass(frozen=True)
class ColumnDomain:
    """The distinct values of a column of a public table."""

    table: str  # "schema.name"
    column: str

    @property
    def size(self) -> int | None:
        return None  # known only to the database


Domain = ValuesDomain | RangeDomain | ColumnDomain


@dataclass(frozen=True)
class ColumnPolicy:
    domain: Domain | None = None
    key_selection: bool = False
    bounds: tuple[float, float] | None = None
    max_freq: int | None = None


@dataclass(frozen=True)
class TablePolicy:
    schema: str
    name: str
    private: bool
    columns: Mapping[str, ColumnPolicy] = field(default_factory=dict)
    unit: UnitPath | None = None  # how its rows reach the privacy unit

    @property
    def key(self) -> str:
        return f"{self.schema}.{self.name}"


_NO_COLUMN_POLICY = ColumnPolicy()


@dataclass(frozen=True)
class Policy:
    """Tables keyed by "schema.name" (lower case).

    A table the policy does not name is private: a forgotten table must never leak.
    `max_cells` caps the number of bins of a histogram over declared domains.
    """

    tables: Mapping[str, TablePolicy] = field(default_factory=dict)
    default_schema: str = "public"
    max_cells: int = DEFAULT_MAX_CELLS
    # The privacy unit; None: row-level FLEX privacy.
    unit: PrivacyUnit | None = None

    def unit_path(self, table: str) -> UnitPath | None:
        """How rows of the table "schema.name" reach the unit (None: no declared path)."""
        table_policy = self.tables.get(table)
        path = table_policy.unit if table_policy is not None else None
        if path is None and self.unit is not None and table == self.unit.table:
            return UnitPath(self.unit.column)
        return path

    def resolve(self, schema: str | None, name: str) -> tuple[str, str]:
        """The schema a table reference means: unqualified pg_* names are catalogs."""
        if schema:
            return schema.lower(), name.lower()
        if name.lower().startswith("pg_"):
            return "pg_catalog", name.lower()
        return self.default_schema, name.lower()

    def is_catalog(self, schema: str | None, name: str) -> bool:
        return self.resolve(schema, name)[0] in CATALOG_SCHEMAS

    def is_private(self, schema: str | None, name: str) -> bool:
        resolved = self.resolve(schema, name)
        if resolved[0] in CATALOG_SCHEMAS:
            return False
        table = self.tables.get(".".join(resolved))
        return table is None or table.private

    def column(self, table: str, column: str) -> ColumnPolicy:
        """What the policy says of `column` of the table "schema.name" (maybe nothing)."""
        table_policy = self.tables.get(table)
        if table_policy is None:
            return _NO_COLUMN_POLICY
        return table_policy.columns.get(column.lower(), _NO_COLUMN_POLICY)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Policy:
        """Build from the `[policy]` TOML table (see dpgate.toml for every key)."""
        default_schema = str(data.get("default_schema", "public")).lower()
        tables: dict[str, TablePolicy] = {}
        for key, spec in dict(data.get("tables", {})).items():
            schema, _, name = key.lower().rpartition(".")
            schema = schema or default_schema
            if "private" not in spec:
                raise ValueError(f"policy for table {key!r} must say private = true or false")
            unknown = set(spec) - {"private", "columns", "unit"}
            if unknown:
                raise ValueError(f"policy for table {key!r}: unknown key(s) {sorted(unknown)}")
            columns = {
                column.lower(): _column_policy(f"{key}.{column}", column_spec, default_schema)
                for column, column_spec in dict(spec.get("columns", {})).items()
            }
            path = unit_path(f"[tables.{key}] unit", spec["unit"], default_schema) \
                if "unit" in spec else None
            tables[f"{schema}.{name}"] = TablePolicy(schema, name, bool(spec["private"]), columns,
                                                     path)
        unit = privacy_unit_from_dict(data, default_schema)
        check_unit_paths(unit, {k: t.unit for k, t in tables.items()},
                         {k: t.private for k, t in tables.items()})
        policy = cls(tables=tables, default_schema=default_schema,
                     max_cells=int(data.get("max_cells", DEFAULT_MAX_CELLS)), unit=unit)
        policy._check_column_domains()
        return policy

    def _check_column_domains(self) -> None:
        # A domain read from a private table would publish that table's values.
        for table in self.tables.values():
            for name, column in table.columns.items():
                domain = column.domain
                if isinstance(domain, ColumnDomain) and self.is_private(*domain.table.split(".")):
                    raise ValueError(f"policy for column {table.key}.{name}: the domain table "
                                     f"{domain.table} is not declared public")


def _column_policy(where: str, spec: Mapping[str, Any], default_schema: str) -> ColumnPolicy:
    unknown = set(spec) - {"domain", "key_selection", "bounds", "max_freq"}
    if unknown:
        raise ValueError(f"policy for column {where}: unknown key(s) {sorted(unknown)}")
    bounds = spec.get("bounds")
    if bounds is not None:
        # Numbers only: a string such as "1930-01-01" would reach the clamp as text.
        if not isinstance(bounds, list) or len(bounds) != 2 or not all(
                isinstance(b, (int, float)) and not isinstance(b, bool) for b in bounds) \
                or not bounds[0] <= bounds[1]:
            raise ValueError(f"policy for column {where}: bounds must be two numbers [lo, hi] "
                             f"with lo <= hi, not {bounds!r}")
        bounds = (float(bounds[0]), float(bounds[1]))
    max_freq = spec.get("max_freq")
    if max_freq is not None and int(max_freq) < 0:
        raise ValueError(f"policy for column {where}: max_freq must be >= 0")
    domain = spec.get("domain")
    return ColumnPolicy(
        domain=None if domain is None else _domain(where, domain, default_schema),
        key_selection=bool(spec.get("key_selection", False)),
        bounds=bounds,
        max_freq=None if max_freq is None else int(max_freq),
    )


def _domain(where: str, spec: Any, default_schema: str) -> Domain:
    """`[v, …]`, `{range = [lo, hi], step = n}` or `{table = "t", column = "c"}`."""
    if isinstance(spec, list):
        if not spec:
            raise ValueError(f"policy for column {where}: an empty domain")
        return ValuesDomain(tuple(spec))
    if isinstance(spec, Mapping) and "range" in spec:
        low, high = spec["range"]
        step = int(spec.get("step", 1))
        if type(low) is not type(high) or not isinstance(low, (int, dt.date)) or step < 1:
            raise ValueError(f"policy for column {where}: a range is two integers or two "
                             "dates, with a positive integer step")
        return RangeDomain(low, high, step)
    if isinstance(spec, Mapping) and "table" in spec and "column" in spec:
        schema, _, name = str(spec["table"]).lower().rpartition(".")
        return ColumnDomain(f"{schema or default_schema}.{name}", str(spec["column"]).lower())
    raise ValueError(f"policy for column {where}: domain must be a list, "
                     "{range = [lo, hi], step = n} or {table = …, column = …}")
