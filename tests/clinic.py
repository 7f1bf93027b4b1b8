"""A clinic database in a PostgreSQL of its own (an embedded pgserver): the data owner's
schema of tests/test_policy_tools.py and tests/test_onboarding.py, not the demo's.

Its own server, because `dpgate setup-roles` sets the passwords of the cluster-wide roles
dpgate_reader and dpgate_relay, which the session's demo database uses too."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from proxy.demo.roles import READER, RELAY, prepare_roles

CLINIC_SQL = Path(__file__).with_name("data") / "clinic.sql"
DATABASE = "clinic"
PRIVATE = ["patients", "visits", "prescriptions"]
PUBLIC = ["doctors"]
PASSWORDS = {READER: "reader-pw", RELAY: "relay-pw"}


@dataclass(frozen=True)
class Clinic:
    owner_dsn: str  # the clinic database, as its owner (a superuser)

    def dsn(self, user: str, password: str) -> str:
        params = {k: v for k, v in conninfo_to_dict(self.owner_dsn).items()
                  if k not in ("user", "password")}
        return make_conninfo(**params, user=user, password=password)

    @property
    def reader_dsn(self) -> str:
        return self.dsn(READER, PASSWORDS[READER])

    @property
    def relay_dsn(self) -> str:
        return self.dsn(RELAY, PASSWORDS[RELAY])

    def execute(self, statement: str) -> None:
        with psycopg.connect(self.owner_dsn, autocommit=True) as connection:
            connection.execute(statement)


def clinic_server(directory: Path, roles: bool = True) -> Iterator[Clinic]:
    """Start PostgreSQL in `directory`, create and fill the clinic database (and, with
    `roles`, grant dpgate's two roles as `dpgate setup-roles` would); stop it afterwards."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR")
        import pgserver
    server = pgserver.get_server(directory, cleanup_mode="stop")
    try:
        with psycopg.connect(server.get_uri(), autocommit=True) as connection:
            connection.execute(f"CREATE DATABASE {DATABASE}")
        owner = make_conninfo(server.get_uri(), dbname=DATABASE)
        with psycopg.connect(owner, autocommit=True) as connection:
            connection.execute(CLINIC_SQL.read_text())  # type: ignore[arg-type]
        if roles:
            prepare_roles(owner, PRIVATE, PUBLIC, PASSWORDS[READER], PASSWORDS[RELAY])
        yield Clinic(owner)
    finally:
        server.cleanup()
