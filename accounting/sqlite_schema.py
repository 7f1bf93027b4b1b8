"""The SQLite ledger's schema: its versions, and how a file is brought up to date."""

from __future__ import annotations

import sqlite3

# Each entry moves the schema one version up; PRAGMA user_version says where a file is.
MIGRATIONS = (
    """
    CREATE TABLE analysts (
        name TEXT PRIMARY KEY,
        scram_salt BLOB NOT NULL,
        scram_stored_key BLOB NOT NULL,
        scram_server_key BLOB NOT NULL,
        scram_iterations INTEGER NOT NULL,
        epsilon_total REAL NOT NULL CHECK (epsilon_total >= 0),
        delta_total REAL NOT NULL CHECK (delta_total >= 0),
        shift REAL NOT NULL,
        created_at TEXT NOT NULL
    );
    CREATE TABLE charges (
        id INTEGER PRIMARY KEY,
        analyst TEXT NOT NULL,
        at TEXT NOT NULL,
        statement TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        epsilon REAL NOT NULL CHECK (epsilon >= 0),
        delta REAL NOT NULL CHECK (delta >= 0),
        mechanism TEXT NOT NULL,
        sensitivity REAL NOT NULL,
        outcome TEXT NOT NULL
    );
    CREATE INDEX charges_by_analyst ON charges (analyst);
    CREATE TABLE answers (
        analyst TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        charge_id INTEGER NOT NULL REFERENCES charges (id),
        rows TEXT NOT NULL,
        PRIMARY KEY (analyst, fingerprint)
    );
    """,
    # FLEX metrics: measured max frequency of a join column.
    """
    CREATE TABLE metrics (
        table_name TEXT NOT NULL,
        column_name TEXT NOT NULL,
        max_freq INTEGER NOT NULL CHECK (max_freq >= 0),
        measured_at TEXT NOT NULL,
        PRIMARY KEY (table_name, column_name)
    );
    """,
    # Answers of charges up to this id are never stored again: set when the analyst's
    # stored answers are forgotten, so a query in flight at that moment cannot put an
    # answer computed before it back into the cache.
    """
    ALTER TABLE analysts ADD COLUMN answers_after INTEGER NOT NULL DEFAULT 0;
    """,
    # What each analyst has spent, kept up to date in the charge's own transaction: summing
    # the charges at every check made a charge cost O(charges) (4 ms at 10,000).
    """
    ALTER TABLE analysts ADD COLUMN epsilon_spent REAL NOT NULL DEFAULT 0;
    ALTER TABLE analysts ADD COLUMN delta_spent REAL NOT NULL DEFAULT 0;
    ALTER TABLE analysts ADD COLUMN queries INTEGER NOT NULL DEFAULT 0;
    UPDATE analysts SET
        epsilon_spent = (SELECT coalesce(sum(epsilon), 0) FROM charges WHERE analyst = name),
        delta_spent = (SELECT coalesce(sum(delta), 0) FROM charges WHERE analyst = name),
        queries = (SELECT count(*) FROM charges WHERE analyst = name);
    """,
)


def migrate(connection: sqlite3.Connection) -> None:
    """Bring the file's schema up to the last version, in one transaction."""
    connection.execute("BEGIN IMMEDIATE")
    version = connection.execute("PRAGMA user_version").fetchone()[0]
    for number, script in enumerate(MIGRATIONS[version:], start=version + 1):
        for statement in filter(str.strip, script.split(";")):
            connection.execute(statement)
        connection.execute(f"PRAGMA user_version = {number}")
    connection.execute("COMMIT")
