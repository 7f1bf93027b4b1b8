"""The `dpgate` command line."""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import logging
import os
import signal
import socket
import sys
from pathlib import Path

from accounting import LedgerOutdated, LedgerUnavailable, UnknownAnalyst, as_text

from ..config import Config, default_data_dir, load_config
from ..demo.analysts import create_analyst, draw_shift
from . import cli_analysis, cli_experiment, cli_ledger, cli_policy
from .cli_common import (
    add_config_arguments,
    config_from_args,
    ledger_name,
    open_configured_ledger,
    open_existing_ledger,
)

DEMO_METRICS_PORT = 9632


async def _serve(config: Config, banner: str = "") -> None:
    # The server (with sqlglot and aiohttp) is imported only by the commands that serve:
    # `dpgate user add` and the tests that run it start in a fraction of the time.
    from ..server.event_loop import settled
    from ..server.health import start_health
    from ..server.server import Proxy

    ledger = open_configured_ledger(config)
    proxy = Proxy(config, ledger)
    server = await proxy.start()
    health = None
    if config.server.health_port:
        health = await start_health(proxy, config.server.health_host,
                                    config.server.health_port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    host, port = config.server.listen_host, config.server.listen_port
    print(f"dpgate listening on {host}:{port}", flush=True)
    print(banner or endpoints(config).rstrip(), flush=True)
    settled()  # after the message: whoever connects once the port answers finds it printed
    await stop.wait()
    server.close()  # before the message, so that whoever reads it finds the port closed
    print(f"dpgate shutting down: running statements get up to "
          f"{config.server.shutdown_grace:g} s", flush=True)
    await proxy.close()
    await server.wait_closed()
    if health is not None:
        await health.cleanup()


def cmd_serve(args: argparse.Namespace) -> int:
    from ..server import event_loop

    config = config_from_args(args)
    if not config.backend.dsn:
        print("dpgate: backend.dsn is not set (use --config, DPGATE_BACKEND_DSN, "
              "or `dpgate demo` for an embedded database)", file=sys.stderr)
        return 2
    # A policy that does not fit the database would reach analysts as raw errors.
    if not cli_policy.policy_passes(config):
        print("dpgate: not serving: fix the policy (dpgate policy check)", file=sys.stderr)
        return 1
    event_loop.run(_serve(config))
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from ..demo.demo import (
        DEMO_ADMIN,
        DEMO_ANALYSTS,
        DEMO_DATABASE,
        demo_config,
        demo_operations,
        ensure_demo_analysts,
        has_demo_data,
        prepare_database,
        start_embedded_postgres,
    )
    from ..server import event_loop

    data_dir = Path(args.data_dir)
    print(f"dpgate demo: starting PostgreSQL in {data_dir / 'pgdata'}", flush=True)
    server, admin = start_embedded_postgres(data_dir / "pgdata")
    try:
        print("dpgate demo: preparing database 'demo' (" + (
            "the data of the last start" if has_demo_data(admin, DEMO_DATABASE) else
            "first start: loading 111,000 rows") + ")", flush=True)
        dsns = prepare_database(admin, DEMO_DATABASE)
        config = demo_config(data_dir, args.host, args.port, dsns,
                             load_config(args.config) if args.config else Config())
        config = demo_operations(config, _free_or_off(args.host, args.metrics_port),
                                 args.dashboard_port)
        ensure_demo_analysts(config)
        lines = [f'  psql "postgresql://{name}:{password}@{args.host}:{args.port}/'
                 f'{DEMO_DATABASE}"' for name, password in DEMO_ANALYSTS.items()]
        banner = ("Connect as an analyst:\n" + "\n".join(lines) +
                  f"\n{endpoints(config, DEMO_ADMIN)}"
                  f"An analyst's budget: dpgate user show alice --ledger {config.ledger.path}\n"
                  "Press Ctrl-C to stop.")
        event_loop.run(_serve(config, banner))
    finally:
        server.cleanup()
    return 0


def endpoints(config: Config, login: tuple[str, str] | None = None) -> str:
    """Where the operator finds everything this proxy serves and writes (`login`: the
    demo's console account, printed with it)."""
    server = config.server
    console = f"{login[0]}:{login[1]}@" if login else "ADMIN@"
    lines = [f"Ledger: {ledger_name(config)}"]
    if server.admin_users or login:
        lines.append(f'Admin console: psql "postgresql://{console}{server.listen_host}:'
                     f'{server.listen_port}/dpgate" -c "SHOW ANALYSTS"')
    if server.metrics_port:
        lines.append(f"Metrics: http://{server.metrics_host}:{server.metrics_port}/metrics")
    if server.dashboard_port:
        lines.append(f"Dashboard: http://{server.dashboard_host}:{server.dashboard_port}/"
                     + (f" (user {login[0]}, password {login[1]})" if login else ""))
    if server.health_port:
        lines.append(f"Health: http://{server.health_host}:"
                     f"{server.health_port}/health")
    if server.audit_log:
        where = "standard output" if server.audit_log == "-" else server.audit_log
        lines.append(f"Audit log: {where}")
    return "".join(line + "\n" for line in lines)


def _free_or_off(host: str, port: int) -> int:
    """The demo's metrics port, or 0 (off) when something else listens there: a second
    demo, or the tests', should still start."""
    if not port:
        return 0
    with socket.socket() as probe:
        try:
            probe.bind((host, port))
        except OSError:
            print(f"dpgate demo: port {port} is busy, Prometheus metrics are off", flush=True)
            return 0
    return port


def _read_password(args: argparse.Namespace) -> str:
    if args.password_stdin or not sys.stdin.isatty():
        password = sys.stdin.readline().rstrip("\n")
    else:
        password = getpass.getpass(f"password for {args.name}: ")
        if password != getpass.getpass("again: "):
            raise SystemExit("dpgate: the passwords differ")
    if not password:
        raise SystemExit("dpgate: empty password")
    return password


def cmd_user_add(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    epsilon = args.epsilon if args.epsilon is not None else config.privacy.default_budget
    ledger = open_configured_ledger(config)
    try:
        create_analyst(ledger, args.name, _read_password(args), epsilon, args.delta,
                       config.privacy)
    except ValueError as error:
        print(f"dpgate: {error}", file=sys.stderr)
        return 1
    print(f"analyst {args.name} added with epsilon {as_text(epsilon)}, delta "
          f"{as_text(args.delta)}")
    return 0


def cmd_user_list(args: argparse.Namespace) -> int:
    ledger = open_existing_ledger(config_from_args(args))
    print(f"{'analyst':<20} {'epsilon':>10} {'spent':>10} {'left':>10} {'queries':>8}")
    for analyst in ledger.analysts():
        budget = ledger.budget(analyst.name)
        print(f"{analyst.name:<20} {as_text(budget.epsilon_total):>10} "
              f"{as_text(budget.epsilon_spent):>10} {as_text(budget.epsilon_left):>10} "
              f"{budget.queries:>8}")
    return 0


def cmd_user_show(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    ledger = open_existing_ledger(config)
    try:
        budget = ledger.budget(args.name)
    except UnknownAnalyst:
        print(f"dpgate: no analyst named {args.name} in the ledger {ledger_name(config)}",
              file=sys.stderr)
        return 1
    charges = ledger.charges(args.name)
    if args.json:
        print(json.dumps({
            "analyst": args.name, "epsilon_total": budget.epsilon_total,
            "epsilon_spent": budget.epsilon_spent, "epsilon_left": budget.epsilon_left,
            "delta_total": budget.delta_total, "delta_spent": budget.delta_spent,
            "charges": [charge.__dict__ for charge in charges],
        }, indent=2))
        return 0
    print(f"analyst {args.name}: epsilon {as_text(budget.epsilon_spent)} spent of "
          f"{as_text(budget.epsilon_total)} ({as_text(budget.epsilon_left)} left), "
          f"delta {as_text(budget.delta_spent)} of {as_text(budget.delta_total)}, "
          f"{budget.queries} queries")
    for charge in charges:
        print(f"  #{charge.id} {charge.at} epsilon {as_text(charge.epsilon)} {charge.mechanism} "
              f"{charge.outcome}: {' '.join(charge.statement.split())}")
    return 0


def cmd_user_remove(args: argparse.Namespace) -> int:
    try:
        open_existing_ledger(config_from_args(args)).remove_analyst(args.name)
    except UnknownAnalyst:
        print(f"dpgate: no analyst named {args.name}", file=sys.stderr)
        return 1
    print(f"analyst {args.name} removed (their charges stay in the ledger)")
    return 0


def cmd_user_rotate_shift(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    try:
        open_existing_ledger(config).rotate_shift(args.name, draw_shift(config.privacy))
    except UnknownAnalyst:
        print(f"dpgate: no analyst named {args.name}", file=sys.stderr)
        return 1
    print(f"analyst {args.name} has a new secret shift; their stored answers are forgotten "
          "(they carried the old one). Sessions already open keep the old shift until they "
          "reconnect.")
    return 0


def cmd_setup_roles(args: argparse.Namespace) -> int:
    from ..demo.demo_data import load_demo_dataset
    from ..demo.roles import prepare_roles

    config = config_from_args(args)
    admin = args.admin_dsn or os.environ.get("DPGATE_ADMIN_DSN", "")
    passwords = [os.environ.get("DPGATE_READER_PASSWORD", ""),
                 os.environ.get("DPGATE_RELAY_PASSWORD", "")]
    if not admin or not all(passwords):
        print("dpgate: need --admin-dsn (or DPGATE_ADMIN_DSN), DPGATE_READER_PASSWORD and "
              "DPGATE_RELAY_PASSWORD", file=sys.stderr)
        return 2
    tables = config.policy.tables.values()
    private = [t.name for t in tables if t.private]
    public = [t.name for t in tables if not t.private]
    if not private and not public:
        # The grants follow the policy: without one there is nothing to grant.
        print("dpgate: the policy names no table, so no grant would be made: give --config "
              "(or DPGATE_CONFIG) with the policy of the database", file=sys.stderr)
        return 2
    if args.load_demo_data and load_demo_dataset(admin):
        print("demo dataset loaded")
    prepare_roles(admin, private, public, *passwords)
    print(f"roles dpgate_reader and dpgate_relay are ready: dpgate_reader may SELECT "
          f"{', '.join(private + public)}; dpgate_relay may SELECT {', '.join(public) or 'none'}"
          f" and sees the columns of {', '.join(private)}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dpgate", description="A differential-privacy gateway for PostgreSQL.")
    parser.add_argument("--log-level", default="WARNING", help="logging level (default WARNING)")
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="run the proxy in front of a PostgreSQL")
    add_config_arguments(serve, ledger=False)
    serve.set_defaults(func=cmd_serve)

    demo = commands.add_parser("demo", help="embedded PostgreSQL + demo data + the proxy")
    demo.add_argument("--data-dir", default=str(default_data_dir()),
                      help=f"where the database and ledger live (default {default_data_dir()})")
    demo.add_argument("--host", default="127.0.0.1")
    demo.add_argument("--port", type=int, default=6432)
    demo.add_argument("--config", help="take [privacy] settings from this dpgate.toml")
    demo.add_argument("--metrics-port", type=int, default=DEMO_METRICS_PORT,
                      help="Prometheus metrics on http://HOST:PORT/metrics (default "
                      f"{DEMO_METRICS_PORT}; 0: off; a busy port turns them off)")
    demo.add_argument("--dashboard-port", type=int, default=0,
                      help="the data owner's dashboard on http://HOST:PORT/ (default off; "
                      "log in as admin/admin)")
    demo.set_defaults(func=cmd_demo)

    setup = commands.add_parser(
        "setup-roles", help="create the backend roles dpgate connects as (run as the owner)")
    setup.add_argument("--admin-dsn", help="owner's DSN (default $DPGATE_ADMIN_DSN)")
    setup.add_argument("--load-demo-data", action="store_true",
                       help="also load the demo dataset if it is not there")
    add_config_arguments(setup, ledger=False)
    setup.set_defaults(func=cmd_setup_roles)

    user = commands.add_parser("user", help="manage analysts").add_subparsers(
        dest="user_command", required=True)
    add = user.add_parser("add", help="create an analyst (password from a prompt or stdin)")
    add.add_argument("name")
    add.add_argument("--epsilon", type=float, help="total epsilon budget")
    add.add_argument("--delta", type=float, default=1e-6, help="total delta budget")
    add.add_argument("--password-stdin", action="store_true", help="read the password from stdin")
    add_config_arguments(add)
    add.set_defaults(func=cmd_user_add)
    listing = user.add_parser("list", help="every analyst and their budget")
    add_config_arguments(listing)
    listing.set_defaults(func=cmd_user_list)
    show = user.add_parser("show", help="an analyst's budget and query history")
    show.add_argument("name")
    show.add_argument("--json", action="store_true")
    add_config_arguments(show)
    show.set_defaults(func=cmd_user_show)
    remove = user.add_parser("remove", help="remove an analyst's access")
    remove.add_argument("name")
    add_config_arguments(remove)
    remove.set_defaults(func=cmd_user_remove)
    rotate = user.add_parser(
        "rotate-shift", help="draw a new secret shift for an analyst (forgets their answers)")
    rotate.add_argument("name")
    add_config_arguments(rotate)
    rotate.set_defaults(func=cmd_user_rotate_shift)
    for module in (cli_analysis, cli_ledger, cli_experiment, cli_policy):
        module.add_commands(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return args.func(args)
    except (ValueError, OSError, LedgerOutdated, LedgerUnavailable) as error:
        print(f"dpgate: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
