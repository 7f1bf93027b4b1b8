"""`dpgate policy init` and `dpgate policy check`: the data owner's policy, drafted from the
catalog and checked against the database before anything is served."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import psycopg

from ..config import Config
from .cli_common import add_config_arguments, config_from_args

# The catalog reader and the checks (sqlglot, the rewriter) are imported by the commands
# that use them, so that registering these commands costs every other command nothing.


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Register `dpgate policy` on the `dpgate` parser."""
    policy = commands.add_parser(
        "policy", help="draft a policy from a database's catalog, check one against it"
    ).add_subparsers(dest="policy_command", required=True)
    init = policy.add_parser(
        "init", help="draft a commented policy file from the catalog (reads no row)",
        description="Read the catalog of --dsn (tables, columns, keys, enum types, CHECK "
        "constraints; never a row of a table) and write a policy: every table private "
        "unless named in --public, a proposed privacy unit with the foreign-key chains "
        "that reach it, domains the catalog proves, and TODOs for what only you decide.")
    init.add_argument("--dsn", required=True, help="a role that can read the catalog, e.g. "
                      "the owner's postgresql:// URL")
    init.add_argument("--schema", default="public", help="schema to read (default public)")
    init.add_argument("--public", default="", metavar="T1,T2",
                      help="tables that hold no one's data (lookups), relayed as they are")
    init.add_argument("--output", metavar="FILE", help="default: standard output")
    init.set_defaults(func=cmd_policy_init)
    check = policy.add_parser(
        "check", help="check the configured policy against the backend",
        description="Every table and column exists, every domain and bound has the "
        "column's type, every unit path joins, the reader can SELECT every private table "
        "and the relay role cannot. `dpgate serve` runs the same check and does not "
        "start when it fails. Exit status 1 on an error, 0 otherwise (warnings too).")
    add_config_arguments(check, ledger=False)
    check.set_defaults(func=cmd_policy_check)


def cmd_policy_init(args: argparse.Namespace) -> int:
    from .catalog_read import read_catalog
    from .policy_init import draft_policy

    try:
        tables = read_catalog(args.dsn, args.schema)
    except psycopg.Error as error:
        print(f"dpgate: cannot read the catalog: {error}", file=sys.stderr)
        return 1
    if not tables:
        print(f"dpgate: schema {args.schema} has no tables", file=sys.stderr)
        return 1
    text = draft_policy(tables, args.schema, [t.strip() for t in args.public.split(",")
                                               if t.strip()])
    if args.output:
        Path(args.output).write_text(text)
        print(f"policy for {len(tables)} tables written to {args.output}; read the TODOs, "
              "then run `dpgate policy check`", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def cmd_policy_check(args: argparse.Namespace) -> int:
    if not policy_passes(config_from_args(args)):
        return 1
    print("policy check passed")
    return 0


def policy_passes(config: Config) -> bool:
    """Check the policy, print each problem on stderr; False when one is an error."""
    from .policy_check import check_policy

    try:
        problems = check_policy(config)
    except psycopg.Error as error:
        print(f"dpgate: policy check: cannot connect to the backend: {error}".rstrip(),
              file=sys.stderr)
        return False
    for problem in problems:
        print(f"dpgate: policy {problem}", file=sys.stderr)
    return not any(problem.level == "error" for problem in problems)
