"""The operator's tables: what the admin console answers and the dashboard shows.

Each is (columns, rows) with text values, computed from the ledger (budgets, charges)
and from what this process saw (sessions, decisions). No released or private value is
in any of them: decisions carry none, and the ledger's answers are never read here.
"""

from __future__ import annotations

from dataclasses import dataclass

from accounting import AnalystBudget, ChargeRecord, GlobalLoss, as_text

from ..pgwire import wire
from .hub import Operations

TEXT, INT8, FLOAT8 = wire.TEXT_OID, wire.INT8_OID, wire.FLOAT8_OID
OUTCOMES = ("answered", "repeated", "relayed", "refused", "failed", "local")


@dataclass(frozen=True)
class Table:
    columns: list[tuple[str, int]]
    rows: list[list[str | None]]


def analysts(ops: Operations, budgets: list[AnalystBudget]) -> Table:
    """SHOW ANALYSTS: every name in the ledger, its budget and its sessions now."""
    sessions: dict[str, int] = {}
    for info in ops.sessions:
        sessions[info.analyst] = sessions.get(info.analyst, 0) + 1
    columns = [("analyst", TEXT), ("epsilon_total", FLOAT8), ("epsilon_spent", FLOAT8),
               ("epsilon_left", FLOAT8), ("delta_total", FLOAT8), ("delta_spent", FLOAT8),
               ("queries", INT8), ("active", TEXT), ("admin", TEXT), ("sessions", INT8)]
    rows: list[list[str | None]] = [
            [entry.name, as_text(entry.budget.epsilon_total), as_text(entry.budget.epsilon_spent),
             as_text(entry.budget.epsilon_left), as_text(entry.budget.delta_total),
             as_text(entry.budget.delta_spent), str(entry.budget.queries),
             "yes" if entry.active else "no (removed)",
             "yes" if entry.name in ops.admins else "no", str(sessions.get(entry.name, 0))]
            for entry in budgets]
    return Table(columns, rows)


def sessions(ops: Operations) -> Table:
    """SHOW SESSIONS: each open analyst session (console sessions included)."""
    columns = [("analyst", TEXT), ("client", TEXT), ("database", TEXT),
               ("application_name", TEXT), ("connected_at", TEXT), ("state", TEXT),
               ("statements", INT8), ("epsilon_charged", FLOAT8), ("delta_charged", FLOAT8)]
    rows: list[list[str | None]] = [[info.analyst, info.client, info.database, info.application,
             info.connected_at.isoformat(timespec="seconds"),
             "active" if info.active else "idle", str(info.statements),
             as_text(info.epsilon), as_text(info.delta)] for info in ops.sessions]
    return Table(columns, rows)


def stats(ops: Operations) -> Table:
    """SHOW STATS: statements per analyst and outcome since this process started."""
    columns = [("analyst", TEXT), *[(name, INT8) for name in OUTCOMES],
               ("epsilon_charged", FLOAT8), ("delta_charged", FLOAT8),
               ("avg_duration_ms", FLOAT8)]
    rows: list[list[str | None]] = []
    for analyst in sorted(ops.counts):
        counts = ops.counts[analyst]
        epsilon, delta = ops.charged.get(analyst, [0.0, 0.0])
        total = sum(counts.values())
        average = ops.seconds.get(analyst, 0.0) * 1000 / total if total else 0.0
        rows.append([analyst, *[str(counts[name]) for name in OUTCOMES], as_text(epsilon),
                     as_text(delta), f"{average:.3f}"])
    return Table(columns, rows)


def charges(records: list[ChargeRecord]) -> Table:
    """SHOW CHARGES [analyst]: the ledger's charges, oldest first."""
    columns = [("id", INT8), ("at", TEXT), ("analyst", TEXT), ("epsilon", FLOAT8),
               ("delta", FLOAT8), ("mechanism", TEXT), ("sensitivity", FLOAT8),
               ("outcome", TEXT), ("fingerprint", TEXT), ("statement", TEXT)]
    rows: list[list[str | None]] = [
            [str(r.id), r.at, r.analyst, as_text(r.epsilon), as_text(r.delta), r.mechanism,
             repr(r.sensitivity), r.outcome, r.fingerprint, r.statement] for r in records]
    return Table(columns, rows)


def global_loss(budgets: list[AnalystBudget]) -> Table:
    """SHOW GLOBAL: the loss if every analyst colludes (spend summed, removed ones too;
    the caller leaves out operator accounts, which cannot query)."""
    loss = GlobalLoss.of(budgets)
    return Table([("epsilon_spent", FLOAT8), ("delta_spent", FLOAT8),
                  ("epsilon_allocated", FLOAT8), ("delta_allocated", FLOAT8)],
                 [[as_text(loss.epsilon_spent), as_text(loss.delta_spent),
                   as_text(loss.epsilon_allocated), as_text(loss.delta_allocated)]])
