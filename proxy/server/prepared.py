"""A session's prepared statements and portals (extended protocol). The session drops them
when DEALLOCATE or DISCARD ALL ran, or when its relay connection was renewed."""

from __future__ import annotations

from dataclasses import dataclass, field

from rewriter.plan import Plan, Relay

from ..pgwire.backend import Parameters


@dataclass
class Prepared:
    """A parsed statement. Relayed ones exist on the backend; the others only here."""

    text: str
    plan: Plan
    parameter_types: tuple[int, ...] = ()
    columns: tuple[tuple[str, int], ...] = ()  # result columns; none: NoData

    @property
    def relayed(self) -> bool:
        """Whether PostgreSQL holds it (under the client's name) rather than dpgate."""
        return isinstance(self.plan, Relay)


@dataclass
class Portal:
    """A bound statement; a private one keeps its encoded answer to resume after a limit."""

    prepared: Prepared
    parameters: Parameters | None = None
    formats: tuple[int, ...] = ()  # result format of each column
    rows: list[bytes] | None = None
    sent: int = 0

    @property
    def relayed(self) -> bool:
        """Whether its statement is relayed."""
        return self.prepared.relayed


@dataclass
class PreparedStatements:
    """Prepared statements and portals by name."""

    statements: dict[str, Prepared] = field(default_factory=dict)
    portals: dict[str, Portal] = field(default_factory=dict)

    def forget(self, statement: str | None) -> None:
        """DEALLOCATE or DISCARD ran: drop one statement (None: all, and every portal)."""
        if statement is None:
            self.statements.clear()
            self.portals.clear()
        else:
            self.statements.pop(statement, None)
