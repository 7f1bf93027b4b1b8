"""A session's prepared statements and portals (extended protocol). The session drops them
when DEALLOCATE or DISCARD ALL ran; when its relay connection was renewed, the relayed
statements are prepared again on the new connection under the client's names, so that a
driver that prepared `_pg3_0` before a PostgreSQL restart can go on using it."""

from __future__ import annotations

from dataclasses import dataclass, field

from rewriter.plan import Plan, Relay

from ..pgwire import wire
from ..pgwire.backend import BackendConnection, Parameters
from ..pgwire.codes import Backend


@dataclass
class Prepared:
    """A parsed statement. Relayed ones exist on the backend; the others only here."""

    text: str
    plan: Plan
    # Relayed: the types the client's Parse gave; dpgate's: those Describe found.
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

    async def prepare_again(self, relay: BackendConnection) -> list[str]:
        """On a new relay connection, prepare the relayed statements again as the client
        prepared them (Parse, Sync each: one failing does not stop the others). Portals
        stay: outside a transaction only the one being bound now can exist, and one of a
        lost transaction is unknown to PostgreSQL, which says so (34000). Returns the
        names of those PostgreSQL refused now (a table dropped meanwhile): they are
        forgotten, as PostgreSQL would have (26000 when used). dpgate's own statements
        live here and need nothing."""
        relayed = [(name, prepared) for name, prepared in self.statements.items()
                   if isinstance(prepared.plan, Relay)]
        for name, prepared in relayed:
            assert isinstance(prepared.plan, Relay)
            relay.send(wire.parse_message(name, prepared.plan.text, prepared.parameter_types))
            relay.send(wire.SYNC)
        await relay.flush()
        refused = []
        for name, _ in relayed:
            failed = False
            while (kind := (await relay.read())[0]) != Backend.READY_FOR_QUERY:
                failed = failed or kind == Backend.ERROR_RESPONSE
            if failed:
                refused.append(name)
                del self.statements[name]
        return refused
