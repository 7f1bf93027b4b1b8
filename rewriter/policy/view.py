"""`SHOW dp.policy`: what the data owner's policy says of every column of every table, so
that an analyst sees from SQL which columns can be grouped, summed or joined, and how."""

from __future__ import annotations

from collections.abc import Mapping

from .model import ColumnDomain, Domain, Policy, RangeDomain, ValuesDomain

POLICY_COLUMNS = ("table_name", "column_name", "private", "domain", "bounds",
                  "key_selection", "max_freq", "answers")


def policy_rows(policy: Policy, catalog: Mapping[str, tuple[str, ...]]
                ) -> list[list[str | None]]:
    """One row per column of the tables the catalog or the policy knows (catalogs left
    out), in text form."""
    tables = sorted(set(catalog) | set(policy.tables))
    rows: list[list[str | None]] = []
    for table in tables:
        schema, name = table.split(".", 1)
        if policy.is_catalog(schema, name):
            continue
        private = policy.is_private(schema, name)
        known = policy.tables.get(table)
        names = catalog.get(table) or tuple(known.columns if known else ())
        for column in names:
            rule = policy.column(table, column)
            rows.append([
                table, column, "true" if private else "false",
                describe_domain(rule.domain), _bounds(rule.bounds),
                "true" if rule.key_selection else "false",
                None if rule.max_freq is None else str(rule.max_freq),
                _answers(private, rule.domain, rule.key_selection, rule.bounds),
            ])
    return rows


def describe_domain(domain: Domain | None) -> str | None:
    if isinstance(domain, ValuesDomain):
        return "[" + ", ".join(str(v) for v in domain.values) + "]"
    if isinstance(domain, RangeDomain):
        step = f" step {domain.step}" if domain.step != 1 else ""
        return f"{domain.low} .. {domain.high}{step}"
    if isinstance(domain, ColumnDomain):
        return f"values of {domain.table}.{domain.column}"
    return None


def _bounds(bounds: tuple[float, float] | None) -> str | None:
    return None if bounds is None else f"[{bounds[0]:g}, {bounds[1]:g}]"


def _answers(private: bool, domain: Domain | None, key_selection: bool,
             bounds: tuple[float, float] | None) -> str:
    """What an analyst can ask of the column, in words."""
    if not private:
        return "anything (public table)"
    uses = ["count, count(DISTINCT), WHERE"]
    if domain is not None:
        uses.append("GROUP BY over the whole domain (also date_trunc/extract/CASE of it)")
    elif key_selection:
        uses.append("GROUP BY with key selection (groups above a noisy threshold, costs delta)")
    if bounds is not None:
        uses.append("sum, avg, var/stddev, min/max, percentiles (clamped to the bounds)")
    return "; ".join(uses)


def column_note(policy: Policy, table: str, column: str | None) -> str:
    """One line on a private table's column for its comment (comments.py); `column` None:
    any column the policy does not list."""
    rule = policy.column(table, column) if column is not None else policy.column(table, "")
    parts = ["dpgate: private"]
    if (domain := describe_domain(rule.domain)) is not None:
        parts.append(f"domain {domain}")
    if rule.bounds is not None:
        parts.append(f"bounds {_bounds(rule.bounds)}")
    if rule.key_selection:
        parts.append("key selection")
    parts.append("answers: " + _answers(True, rule.domain, rule.key_selection, rule.bounds))
    return "; ".join(parts)
