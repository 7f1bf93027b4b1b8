"""The admin console: the database "dpgate", open to the accounts in server.admin_users,
answering PgBouncer-style SHOW commands as ordinary result sets (psql, any driver).

    SHOW ANALYSTS | SHOW SESSIONS | SHOW STATS | SHOW CHARGES [analyst] | SHOW GLOBAL
    SHOW HELP

It speaks the simple and the extended protocol (drivers such as psycopg prepare every
statement), text format only, and runs nothing on PostgreSQL: its tables come from the
ledger and from what this process saw. SET and RESET are accepted and ignored, as a
driver may send them at connect time.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable

from accounting import Ledger
from rewriter.sqlstate import SqlState

from ..engine.workers import Workers
from ..pgwire import wire
from ..pgwire.codes import Frontend, Target, TransactionStatus
from ..pgwire.errors import StatementError
from . import views
from .hub import Operations

CONSOLE_DATABASE = "dpgate"
_SHOW = re.compile(r"^\s*show\s+(\w+)(?:\s+(\"[^\"]+\"|\w+))?\s*$", re.IGNORECASE)
_SET = re.compile(r"^\s*(set|reset)\b", re.IGNORECASE)
COMMANDS = ("ANALYSTS", "SESSIONS", "STATS", "CHARGES [analyst]", "GLOBAL", "HELP")
# Server parameters a client expects after authentication (psql reads server_version).
PARAMETERS = {"server_version": "16.0 (dpgate console)", "server_encoding": "UTF8",
              "client_encoding": "UTF8", "DateStyle": "ISO, MDY", "TimeZone": "UTC",
              "integer_datetimes": "on", "standard_conforming_strings": "on",
              "application_name": ""}


class Console:
    """One console connection: reads messages, answers SHOW commands."""

    def __init__(self, ops: Operations, ledger: Ledger, workers: Workers,
                 send: Callable[[bytes], None]):
        self.ops, self.ledger, self.workers, self.send = ops, ledger, workers, send
        self.prepared: dict[str, str] = {}
        self.portals: dict[str, tuple[str, views.Table | str | None]] = {}
        self.skipping = False  # after an error in the extended protocol: until Sync

    def greet(self) -> None:
        """What follows AuthenticationOk."""
        for name, value in PARAMETERS.items():
            self.send(wire.parameter_status(name, value))
        self.send(wire.backend_key_data(0, 0))  # nothing to cancel: no CancelRequest
        self.send(wire.ready_for_query(TransactionStatus.IDLE))

    async def answer(self, sql: str) -> views.Table | str | None:
        """A command's table, or the tag of a command without rows (SET), or None for
        an empty query."""
        text = sql.strip().rstrip(";").strip()
        if not text:
            return None
        if _SET.match(text):
            return _SET.match(text).group(1).upper()  # type: ignore[union-attr]
        match = _SHOW.match(text)
        if match is None:
            raise StatementError(SqlState.SYNTAX_ERROR,
                               "the dpgate console answers SHOW commands only",
                               hint="SHOW " + ", SHOW ".join(COMMANDS))
        what, argument = match.group(1).upper(), match.group(2)
        read = self.workers.ledger_read
        if what == "ANALYSTS":
            return views.analysts(self.ops, await read(self.ledger.budgets))
        if what == "SESSIONS":
            return views.sessions(self.ops)
        if what == "STATS":
            return views.stats(self.ops)
        if what == "GLOBAL":
            budgets = await read(self.ledger.budgets)
            return views.global_loss([e for e in budgets if e.name not in self.ops.admins])
        if what == "CHARGES":
            name = argument.strip('"') if argument else None
            return views.charges(await read(self.ledger.charges, name))
        if what == "HELP":
            return views.Table([("command", wire.TEXT_OID)],
                               [["SHOW " + command] for command in COMMANDS])
        raise StatementError(SqlState.SYNTAX_ERROR, f"unknown console command SHOW {what}",
                           hint="SHOW " + ", SHOW ".join(COMMANDS))

    def _send_table(self, result: views.Table | str | None, describe: bool = True) -> None:
        if result is None:
            self.send(wire.empty_query_response())
        elif isinstance(result, str):
            self.send(wire.command_complete(result))
        else:
            if describe:
                self.send(wire.row_description(result.columns))
            for row in result.rows:
                self.send(wire.data_row(row))
            self.send(wire.command_complete(f"SHOW {len(result.rows)}"))

    async def simple_query(self, sql: str) -> None:
        """A Query message: each ;-separated command in turn, the first error ends it."""
        commands = [part for part in sql.split(";") if part.strip()] or [""]
        try:
            for command in commands:
                self._send_table(await self.answer(command))
        except StatementError as error:
            self.send(error.to_response())
        self.send(wire.ready_for_query(TransactionStatus.IDLE))

    async def extended(self, kind: bytes, payload: bytes) -> None:
        """Parse/Bind/Describe/Execute/Close/Sync/Flush of a driver."""
        if kind == Frontend.SYNC:
            self.skipping = False
            self.send(wire.ready_for_query(TransactionStatus.IDLE))
            return
        if self.skipping or kind == Frontend.FLUSH:
            return
        try:
            await self._extended(kind, payload)
        except StatementError as error:
            self.send(error.to_response())
            self.skipping = True

    async def _extended(self, kind: bytes, payload: bytes) -> None:
        if kind == Frontend.PARSE:
            parse = wire.read_parse(payload)
            if parse.parameter_types or "$1" in parse.query:
                raise StatementError(SqlState.FEATURE_NOT_SUPPORTED, "console commands take no "
                                   "parameters")
            self.prepared[parse.statement] = parse.query
            self.send(wire.PARSE_COMPLETE)
        elif kind == Frontend.BIND:
            bind = wire.read_bind(payload)
            if any(bind.result_formats):
                raise StatementError(SqlState.INVALID_PARAMETER_VALUE,
                                   "the console answers in text format only")
            self.portals[bind.portal] = (self._statement(bind.statement), None)
            self.send(wire.BIND_COMPLETE)
        elif kind == Frontend.DESCRIBE:
            target, name = wire.read_target(payload)
            if target == Target.STATEMENT:
                self.send(wire.parameter_description([]))
                result = await self.answer(self._statement(name))
            else:
                result = await self._portal_result(name)
            self.send(wire.row_description(result.columns)
                      if isinstance(result, views.Table) else wire.NO_DATA)
        elif kind == Frontend.EXECUTE:
            name, _ = wire.read_execute(payload)
            self._send_table(await self._portal_result(name), describe=False)
        elif kind == Frontend.CLOSE:
            target, name = wire.read_target(payload)
            (self.prepared if target == Target.STATEMENT else self.portals).pop(name, None)
            self.send(wire.CLOSE_COMPLETE)
        else:
            raise StatementError(SqlState.FEATURE_NOT_SUPPORTED,
                               "the console does not take this message")

    def _statement(self, name: str) -> str:
        if name not in self.prepared:
            raise StatementError(SqlState.INVALID_SQL_STATEMENT_NAME,
                               f'prepared statement "{name}" does not exist')
        return self.prepared[name]

    async def _portal_result(self, name: str) -> views.Table | str | None:
        """The portal's answer, computed once (at Describe or Execute) and kept, so that
        both show the same rows."""
        if name not in self.portals:
            raise StatementError(SqlState.INVALID_CURSOR_NAME, f'portal "{name}" does not exist')
        sql, result = self.portals[name]
        if result is None:
            result = await self.answer(sql)
            self.portals[name] = (sql, result)
        return result


async def serve_console(console: Console, reader: asyncio.StreamReader,
                        drain: Callable[[], Awaitable[None]], max_size: int) -> None:
    """Answer the console's messages until the client leaves."""
    console.greet()
    await drain()
    while True:
        kind, payload = await wire.read_message(reader, max_size)
        if kind == Frontend.TERMINATE:
            return
        if kind == Frontend.QUERY:
            sql, _ = wire.cstring(payload)
            await console.simple_query(sql)
        else:
            await console.extended(kind, payload)
        await drain()
