"""The privacy unit of a policy: whom the guarantee protects, and how far.

    privacy_unit = { table = "customers", column = "customer_id" }
    max_contributions = 10        # τ: rows one unit may contribute to an answer
    max_groups = 5                # κ: groups one unit may contribute to in a GROUP BY
    max_group_contributions = 10  # τ_g: rows one unit may contribute to one group
    contributions_limit = 100     # a count's τ is chosen per query, privately, up to this
    row_level_fallback = false    # joins that mix units: answer at row level, or refuse
    shape_times_total = false     # histograms as the units' shape × their total (opt-in)

    [tables.orders]
    private = true
    unit = "customer_id"                                       # a direct column
    [tables.order_items]
    private = true
    unit = "order_id -> orders.order_id -> orders.customer_id"  # a foreign-key chain

A chain reads: the table's column `order_id` equals `orders.order_id`, whose row gives
the unit in `orders.customer_id` (a foreign key: each key names at most one row). The unit
table's own path defaults to the unit column. A private table without a path is refused in
unit mode, with a message naming this setting.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# Defaults that keep the noise of a count at 10/ε while a typical person (a handful of
# rows per question) is counted in full; a policy should set them from its own data.
DEFAULT_MAX_CONTRIBUTIONS = 10
DEFAULT_MAX_GROUPS = 5


@dataclass(frozen=True)
class Hop:
    """One foreign-key step: the current value equals `table.key`; go on with `table.value`."""

    table: str  # "schema.name"
    key: str
    value: str


@dataclass(frozen=True)
class UnitPath:
    """How a private table's rows reach the unit: its own `column`, then `hops`."""

    column: str
    hops: tuple[Hop, ...] = ()

    def __str__(self) -> str:
        steps = [self.column]
        for hop in self.hops:
            name = hop.table.split(".", 1)[1]
            steps += [f"{name}.{hop.key}", f"{name}.{hop.value}"]
        return " -> ".join(steps)


@dataclass(frozen=True)
class PrivacyUnit:
    """The unit and its contribution bounds: τ rows, κ groups, τ_g rows per group."""

    table: str  # "schema.name"
    column: str
    max_contributions: int = DEFAULT_MAX_CONTRIBUTIONS
    max_groups: int = DEFAULT_MAX_GROUPS
    max_group_contributions: int = DEFAULT_MAX_CONTRIBUTIONS
    row_level_fallback: bool = False
    # A count's τ is chosen per query from its rows (mechanisms/contribution_bound.py), up
    # to this limit; False once the session fixes τ (SET dp.max_contributions).
    contributions_limit: int = DEFAULT_MAX_CONTRIBUTIONS
    choose_contributions: bool = True
    # The session's noise is Gaussian: a count histogram's cells then keep whole rows of
    # each unit (⌊m·τ/n⌋, L2 ≤ τ), so the backend returns them by unit (session.py).
    whole_cells: bool = False
    # A count histogram over keys read from the rows may be answered as the units' shape
    # times their total (proxy/engine/chosen_bound.py). Its interval holds only if each
    # unit's rows fall in the cells as all rows do, which the data owner must judge: off
    # unless the policy turns it on.
    shape_times_total: bool = False

    @property
    def label(self) -> str:
        return f"{self.table}.{self.column}"


UNIT_KEYS = frozenset({"privacy_unit", "max_contributions", "max_groups",
                       "max_group_contributions", "contributions_limit",
                       "row_level_fallback", "shape_times_total"})


def privacy_unit_from_dict(data: Mapping[str, Any], default_schema: str) -> PrivacyUnit | None:
    """The [policy] settings of the unit, checked; None when the policy names no unit."""
    spec = data.get("privacy_unit")
    if spec is None:
        stray = sorted(UNIT_KEYS & set(data) - {"privacy_unit"})
        if stray:
            raise ValueError(f"policy setting(s) {stray} need privacy_unit = "
                             "{ table = …, column = … }")
        return None
    if not isinstance(spec, Mapping) or set(spec) != {"table", "column"}:
        raise ValueError("policy setting privacy_unit must be { table = \"…\", column = \"…\" }")
    tau = _positive(data, "max_contributions", DEFAULT_MAX_CONTRIBUTIONS)
    fallback, shape = data.get("row_level_fallback", False), data.get("shape_times_total", False)
    for name, value in (("row_level_fallback", fallback), ("shape_times_total", shape)):
        if not isinstance(value, bool):
            raise ValueError(f"policy setting {name} must be true or false")
    return PrivacyUnit(
        table=_qualified(str(spec["table"]), default_schema),
        column=str(spec["column"]).lower(),
        max_contributions=tau,
        max_groups=_positive(data, "max_groups", DEFAULT_MAX_GROUPS),
        max_group_contributions=min(tau, _positive(data, "max_group_contributions", tau)),
        row_level_fallback=fallback,
        contributions_limit=_positive(data, "contributions_limit", tau),
        shape_times_total=shape,
    )


def unit_path(where: str, text: Any, default_schema: str) -> UnitPath:
    """Parse a table's `unit` setting: "column" or "column -> t.key -> t.value …"."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"policy setting {where}: unit must be a column name or a chain "
                         "\"column -> table.key -> table.value\"")
    steps = [step.strip().lower() for step in text.split("->")]
    column, rest = steps[0], steps[1:]
    if not column or "." in column or len(rest) % 2:
        raise ValueError(f"policy setting {where}: unit {text!r} must start with a column of "
                         "the table, then pairs table.key -> table.value")
    hops = []
    for key, value in zip(rest[::2], rest[1::2], strict=True):
        key_table, _, key_column = key.rpartition(".")
        value_table, _, value_column = value.rpartition(".")
        if not key_table or key_table != value_table or not key_column or not value_column:
            raise ValueError(f"policy setting {where}: in unit {text!r}, {key} -> {value} "
                             "must name two columns of one table")
        hops.append(Hop(_qualified(key_table, default_schema), key_column, value_column))
    return UnitPath(column, tuple(hops))


def check_unit_paths(unit: PrivacyUnit | None, paths: Mapping[str, UnitPath | None],
                     private: Mapping[str, bool]) -> None:
    """A table's `unit` needs a privacy unit, and the unit table must be private."""
    if unit is None:
        named = sorted(table for table, path in paths.items() if path is not None)
        if named:
            raise ValueError(f"policy setting unit of {named[0]} needs privacy_unit = "
                             "{ table = …, column = … }")
        return
    if not private.get(unit.table, True):  # a table the policy does not name is private
        raise ValueError(f"policy setting privacy_unit: the table {unit.table} is declared "
                         "public; the unit must be a private table")


def _positive(data: Mapping[str, Any], name: str, default: int) -> int:
    value = data.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"policy setting {name} must be a whole number >= 1, not {value!r}")
    return value


def _qualified(table: str, default_schema: str) -> str:
    schema, _, name = table.lower().rpartition(".")
    return f"{schema or default_schema}.{name}"
