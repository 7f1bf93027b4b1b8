"""The two backend roles dpgate connects as (DESIGN.md, "Backends and clients").

`dpgate_reader` reads private tables and runs only rewritten private aggregates;
`dpgate_relay` runs relayed catalog and session traffic and cannot read private rows, so
PostgreSQL itself stops what the classifier might miss. REFERENCES keeps private tables
and their columns visible in information_schema, which BI tools need.
"""

from __future__ import annotations

import psycopg
from psycopg import sql

READER = "dpgate_reader"
RELAY = "dpgate_relay"


def prepare_roles(
    conninfo: str,
    private_tables: list[str],
    public_tables: list[str],
    reader_password: str,
    relay_password: str,
) -> None:
    """Create or update both roles and their grants in the database at conninfo (as owner)."""
    with psycopg.connect(conninfo, autocommit=True) as connection:
        database = connection.info.dbname
        for role, password in ((READER, reader_password), (RELAY, relay_password)):
            exists = connection.execute(
                "SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)
            ).fetchone()
            verb = "ALTER" if exists else "CREATE"
            connection.execute(sql.SQL("{} ROLE {} LOGIN PASSWORD {}").format(
                sql.SQL(verb), sql.Identifier(role), sql.Literal(password)))
            connection.execute(sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(
                sql.Identifier(database), sql.Identifier(role)))
            connection.execute(sql.SQL("GRANT USAGE ON SCHEMA public TO {}").format(
                sql.Identifier(role)))
        for table in private_tables + public_tables:
            connection.execute(sql.SQL("GRANT SELECT ON {} TO {}").format(
                sql.Identifier(table), sql.Identifier(READER)))
        for table in private_tables:
            connection.execute(sql.SQL("REVOKE ALL ON {} FROM {}").format(
                sql.Identifier(table), sql.Identifier(RELAY)))
            connection.execute(sql.SQL("GRANT REFERENCES ON {} TO {}").format(
                sql.Identifier(table), sql.Identifier(RELAY)))
        for table in public_tables:
            connection.execute(sql.SQL("GRANT SELECT ON {} TO {}").format(
                sql.Identifier(table), sql.Identifier(RELAY)))
