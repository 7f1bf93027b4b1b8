"""`dpgate demo`: an embedded PostgreSQL with the demo dataset, served through the proxy."""

from __future__ import annotations

import secrets
import warnings
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from accounting import SqliteLedger

from ..config import BackendSettings, Config, LedgerSettings, load_policy_file
from .analysts import create_analyst
from .demo_data import demo_tables_exist, load_demo_dataset
from .roles import READER, RELAY, prepare_roles

if TYPE_CHECKING:
    import pgserver

DEMO_DATABASE = "demo"
DEMO_ANALYSTS = {"alice": "alice", "bob": "bob"}
# The operator account of the admin console and the dashboard (not an analyst: it cannot
# query the data, so its budget is the smallest allowed).
DEMO_ADMIN = ("admin", "admin")
DEMO_BUDGET = 10.0
PRIVATE_TABLES = ["customers", "orders", "recommendations"]
PUBLIC_TABLES = ["products"]
DEMO_POLICY_FILE = Path(__file__).with_name("demo_policy.toml")


def start_embedded_postgres(pgdata: Path) -> tuple[pgserver.PostgresServer, str]:
    """Start (or reuse) the embedded server; return it and its superuser conninfo."""
    pgdata.mkdir(parents=True, exist_ok=True)
    # pgserver asks platformdirs for a runtime folder as it is imported, which warns on
    # every command where XDG_RUNTIME_DIR is unset (root, containers); dpgate never uses
    # that folder. Imported here, so that only the demo pays for loading it.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR")
        import pgserver
    server = pgserver.get_server(pgdata, cleanup_mode="stop")
    return server, server.get_uri()


def has_demo_data(admin_conninfo: str, database: str) -> bool:
    """Whether a previous start left the demo tables in `database`."""
    try:
        with psycopg.connect(make_conninfo(admin_conninfo, dbname=database)) as connection, \
                connection.cursor() as cursor:
            return demo_tables_exist(cursor)
    except psycopg.OperationalError:  # no such database yet
        return False


def prepare_database(admin_conninfo: str, database: str) -> dict[str, str]:
    """Create the database, load the dataset, set up the roles; return the backend DSNs."""
    with psycopg.connect(admin_conninfo, autocommit=True) as connection:
        if not connection.execute("SELECT 1 FROM pg_database WHERE datname = %s",
                                  (database,)).fetchone():
            connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
    conninfo = make_conninfo(admin_conninfo, dbname=database)
    load_demo_dataset(conninfo)
    passwords = {READER: secrets.token_urlsafe(18), RELAY: secrets.token_urlsafe(18)}
    prepare_roles(conninfo, PRIVATE_TABLES, PUBLIC_TABLES, passwords[READER], passwords[RELAY])
    params = conninfo_to_dict(conninfo)
    return {
        role: make_conninfo("", **{k: v for k, v in params.items()
                                   if k not in ("user", "password")}, user=role, password=password)
        for role, password in passwords.items()
    }


def demo_config(data_dir: Path, host: str, port: int, dsns: dict[str, str],
                base: Config) -> Config:
    """The demo's configuration: the caller's privacy settings, the demo's everything else."""
    return replace(
        base,
        server=replace(base.server, listen_host=host, listen_port=port),
        backend=BackendSettings(dsn=dsns[READER], relay_dsn=dsns[RELAY]),
        ledger=LedgerSettings(path=str(data_dir / "ledger.sqlite3")),
        policy=load_policy_file(DEMO_POLICY_FILE),
    )


def demo_operations(config: Config, metrics_port: int, dashboard_port: int) -> Config:
    """Metrics (and the dashboard if asked) on their own hosts, loopback unless configured
    otherwise, even when the demo serves analysts on every address; `admin` operates."""
    return replace(config, server=replace(
        config.server, metrics_port=metrics_port, dashboard_port=dashboard_port,
        admin_users=DEMO_ADMIN[0]))


def ensure_demo_analysts(config: Config) -> SqliteLedger:
    ledger = SqliteLedger(config.ledger.path)
    for name, password in DEMO_ANALYSTS.items():
        if ledger.analyst(name) is None:
            create_analyst(ledger, name, password, DEMO_BUDGET, 1e-6, config.privacy)
    name, password = DEMO_ADMIN
    if ledger.analyst(name) is None:
        create_analyst(ledger, name, password, config.privacy.min_epsilon, 0.0, config.privacy)
    return ledger
