"""A session's prepared statements and portals (extended protocol). The session drops them
when DEALLOCATE or DISCARD ALL ran; when its relay connection was renewed, the relayed
statements are prepared again on the new connection under the client's names, so that a
driver that prepared `_pg3_0` before a PostgreSQL restart can go on using it. A portal of
dpgate's own statement is bound here (`own_portal`) and keeps its encoded answer, sent in
parts when Execute gives a row limit (`Portal.next_rows`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from rewriter.plan import Plan, Relay, ShowDpSetting
from rewriter.sqlstate import SqlState

from ..pgwire import wire
from ..pgwire.backend import BackendConnection, Parameters
from ..pgwire.codes import Backend
from ..pgwire.errors import StatementError


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

    def next_rows(self, limit: int) -> list[bytes]:
        """Execute's messages: the next `limit` encoded rows (0: all that are left), then
        PortalSuspended if rows remain, else CommandComplete."""
        rows = self.rows or []
        end = len(rows) if not limit else min(len(rows), self.sent + limit)
        messages = rows[self.sent:end]
        count, self.sent = end - self.sent, end
        if limit and end < len(rows):
            return [*messages, wire.PORTAL_SUSPENDED]
        show = isinstance(self.prepared.plan, ShowDpSetting)
        return [*messages, wire.command_complete("SHOW" if show else f"SELECT {count}")]


def own_portal(prepared: Prepared, bind: wire.BindMessage) -> Portal:
    """The portal a Bind makes of dpgate's own statement: its values checked against the
    statement's parameters, each format code expanded to one per value."""
    expected = len(prepared.parameter_types)
    if len(bind.values) != expected:
        raise StatementError(SqlState.PROTOCOL_VIOLATION,
                             f"bind message supplies {len(bind.values)} parameters, but "
                             f'prepared statement "{bind.statement}" requires {expected}')
    parameters = Parameters(prepared.parameter_types,
                            _formats(bind.parameter_formats, expected, "parameter"),
                            bind.values)
    return Portal(prepared, parameters, _formats(bind.result_formats, len(prepared.columns),
                                                 "result"))


def _formats(codes: tuple[int, ...], count: int, what: str) -> tuple[int, ...]:
    """Bind's format codes expanded to one per value: none is text, one applies to all."""
    if any(code not in (0, 1) for code in codes):
        raise StatementError(SqlState.PROTOCOL_VIOLATION,
                             f"unsupported format code in {what} formats")
    if not codes:
        return (0,) * count
    if len(codes) == 1:
        return codes * count
    if len(codes) != count:
        raise StatementError(SqlState.PROTOCOL_VIOLATION,
                             f"bind message has {len(codes)} {what} formats but {count} "
                             f"{what}s")
    return codes


@dataclass
class PreparedStatements:
    """Prepared statements and portals by name."""

    statements: dict[str, Prepared] = field(default_factory=dict)
    portals: dict[str, Portal] = field(default_factory=dict)

    def statement(self, name: str) -> Prepared:
        prepared = self.statements.get(name)
        if prepared is None:
            raise StatementError(SqlState.INVALID_SQL_STATEMENT_NAME,
                                 f'prepared statement "{name}" does not exist')
        return prepared

    def portal(self, name: str) -> Portal:
        portal = self.portals.get(name)
        if portal is None:
            raise StatementError(SqlState.INVALID_CURSOR_NAME, f'portal "{name}" does not exist')
        return portal

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
