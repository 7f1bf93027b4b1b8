"""What a client pays for dpgate, beside PostgreSQL and PgBouncer, in one run.

    .venv/bin/python bench/clients.py [--seconds 5] [--clients 4] [--runs 200]

(a) Passthrough: pgbench with a select-only custom script on the public table products
    (`SELECT name, price FROM products WHERE product_id = :id`, random id), in the simple
    and the extended protocol, straight to PostgreSQL, through PgBouncer and through dpgate.
(b) Private counts: median and p95 latency of distinct `SELECT count(*) FROM orders WHERE
    product_id = k` through dpgate (noise, a durable ledger charge each) beside the same
    raw count straight to PostgreSQL.

It starts everything itself in a temporary directory: an embedded PostgreSQL (pgserver)
with the demo dataset, dpgate (`dpgate serve`, a subprocess) and PgBouncer (the
`pgbouncer` binary, run as PostgreSQL's user when started as root), all on loopback, and stops them
at the end. Needs pgbench and pgbouncer on the PATH.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from accounting import SqliteLedger
from proxy.config import PrivacySettings
from proxy.demo.analysts import create_analyst
from proxy.demo.demo import DEMO_POLICY_FILE, prepare_database, start_embedded_postgres
from proxy.demo.roles import READER, RELAY

DATABASE = "bench"
ANALYST, PASSWORD = "bench", "bench-pw"
SCRIPT = "\\set id random(1, 1000)\nSELECT name, price FROM products WHERE product_id = :id;\n"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for_port(port: int, process: subprocess.Popen, name: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{name} exited early (code {process.returncode})")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{name} did not start listening on {port}")


def stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()


def demo_backend(directory: Path, stack: ExitStack) -> tuple[str, dict[str, str]]:
    """An embedded PostgreSQL in `directory` (stopped with `stack`) with the demo dataset:
    its admin URI and the DSNs of dpgate's roles."""
    directory.chmod(0o755)
    print("starting an embedded PostgreSQL and loading the demo dataset…", flush=True)
    server, admin_uri = start_embedded_postgres(directory / "pgdata")
    stack.callback(server.cleanup)
    return admin_uri, prepare_database(admin_uri, DATABASE)


def start_dpgate(directory: Path, dsns: dict[str, str], stack: ExitStack,
                 analysts: dict[str, str] | None = None, server: str = "",
                 root: Path | None = None, policy: Path = DEMO_POLICY_FILE,
                 environment: dict[str, str] | None = None) -> tuple[int, subprocess.Popen]:
    """`dpgate serve` on loopback over `policy` (the demo's by default), with a SQLite
    ledger holding `analysts` (name: password; default the benchmark's analyst), created
    in-process (faster than one `dpgate user add` each). `server` adds lines to [server];
    `root` runs another checkout's dpgate; `environment` adds variables to its own.
    Returns the port and the process (stopped with `stack`)."""
    port = free_port()
    ledger_path = directory / "ledger" / "ledger.sqlite3"
    config = directory / "dpgate.toml"
    config.write_text(f"""
[server]
listen_host = "127.0.0.1"
listen_port = {port}
{server}
[backend]
dsn = "{dsns[READER]}"
relay_dsn = "{dsns[RELAY]}"

[ledger]
path = "{ledger_path}"

[policy]
file = "{policy}"
""")
    ledger = SqliteLedger(ledger_path)
    for name, password in (analysts or {ANALYST: PASSWORD}).items():
        create_analyst(ledger, name, password, 1e9, 1e-3, PrivacySettings())
    process = subprocess.Popen([sys.executable, "-m", "proxy", "serve", "--config", str(config)],
                               cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               env={**os.environ, **(environment or {})})
    stack.callback(stop, process)
    wait_for_port(port, process, "dpgate")
    return port, process


def time_fresh_questions(port: int, database: str, questions: dict[str, str], runs: int,
                         warm: int) -> dict[str, list[float]]:
    """Seconds of each question (its `{k}` filled with 1…runs, so never a stored answer),
    asked by the benchmark's analyst taking turns question by question, after one round
    at k = `warm` for plans, pools and the catalog."""
    times: dict[str, list[float]] = {kind: [] for kind in questions}
    dsn = f"postgresql://{ANALYST}:{PASSWORD}@127.0.0.1:{port}/{database}"
    with psycopg.connect(dsn, autocommit=True) as connection:
        for sql in questions.values():
            connection.execute(sql.format(k=warm)).fetchall()
        for k in range(1, runs + 1):
            for kind, sql in questions.items():
                start = time.perf_counter()
                connection.execute(sql.format(k=k)).fetchall()
                times[kind].append(time.perf_counter() - start)
    return times


def start_pgbouncer(directory: Path, admin: dict[str, str], run_as: str | None,
                    stack: ExitStack, session_database: str | None = None
                    ) -> tuple[int, subprocess.Popen]:
    """PgBouncer on loopback in front of the same PostgreSQL (its unix socket): DATABASE
    in transaction pooling and, when named, `session_database` in session pooling."""
    port = free_port()
    home = directory / "pgbouncer"
    home.mkdir()
    home.chmod(0o777)  # written by run_as
    (home / "userlist.txt").write_text(f'"{admin["user"]}" ""\n')
    ini = home / "pgbouncer.ini"
    backend = f'host={admin["host"]} port={admin.get("port", 5432)} user={admin["user"]}'
    session = (f"{session_database} = {backend} dbname={DATABASE} pool_mode=session\n"
               if session_database else "")
    ini.write_text(f"""
[databases]
{DATABASE} = {backend} dbname={DATABASE}
{session}
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {home / "userlist.txt"}
pool_mode = transaction
default_pool_size = 8
max_client_conn = 100
ignore_startup_parameters = extra_float_digits
logfile = {home / "pgbouncer.log"}
pidfile = {home / "pgbouncer.pid"}
""")
    for path in home.iterdir():
        path.chmod(0o644)
    # PgBouncer refuses to run as root: then it runs as the user that runs PostgreSQL,
    # which may open its socket.
    switch = ["-u", run_as] if run_as and os.geteuid() == 0 else []
    process = subprocess.Popen(["pgbouncer", *switch, str(ini)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    stack.callback(stop, process)
    wait_for_port(port, process, "pgbouncer")
    return port, process


def pgbench_tps(target: dict[str, str], mode: str, args: argparse.Namespace,
                script: Path) -> float:
    command = ["pgbench", "-n", "-M", mode, "-c", str(args.clients), "-j", "2",
               "-T", str(args.seconds), "-f", str(script), "-h", target["host"],
               "-U", target["user"], DATABASE]
    if "port" in target:
        command[-1:-1] = ["-p", target["port"]]
    env = {**os.environ, "PGPASSWORD": target.get("password", "")}
    result = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    match = re.search(r"tps = ([\d.]+)", result.stdout)
    if result.returncode != 0 or not match:
        raise RuntimeError(f"pgbench failed against {target['name']}:\n{result.stderr[-2000:]}")
    return float(match.group(1))


def count_latencies(conninfo: str, products: range) -> list[float]:
    with psycopg.connect(conninfo, autocommit=True) as connection:
        connection.execute(f"SELECT count(*) FROM orders WHERE product_id = {products.stop}")
        timings = []
        for product in products:
            started = time.perf_counter()
            connection.execute(f"SELECT count(*) FROM orders WHERE product_id = {product}"
                               ).fetchone()
            timings.append(time.perf_counter() - started)
    return timings


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=5, help="pgbench duration per run")
    parser.add_argument("--clients", type=int, default=4, help="pgbench clients")
    parser.add_argument("--runs", type=int, default=200, help="private counts (at most 999)")
    args = parser.parse_args()
    args.runs = min(args.runs, 999)
    for tool in ("pgbench", "pgbouncer"):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} is not on the PATH (apt-get install postgresql-client pgbouncer)")

    with tempfile.TemporaryDirectory(prefix="dpgate-bench-") as temporary, ExitStack() as stack:
        directory = Path(temporary)
        directory.chmod(0o755)
        print("starting an embedded PostgreSQL and loading the demo dataset…", flush=True)
        server, admin_uri = start_embedded_postgres(directory / "pgdata")
        stack.callback(server.cleanup)
        dsns = prepare_database(admin_uri, DATABASE)
        admin = conninfo_to_dict(admin_uri)
        admin_dsn = make_conninfo(admin_uri, dbname=DATABASE)
        with psycopg.connect(admin_dsn, autocommit=True) as connection:
            connection.execute("VACUUM ANALYZE")
        print("starting dpgate and PgBouncer…", flush=True)
        dpgate_port, _ = start_dpgate(directory, dsns, stack)
        bouncer_port, _ = start_pgbouncer(directory, admin, server.system_user, stack)
        script = directory / "select.sql"
        script.write_text(SCRIPT)

        targets = [
            {"name": "direct", "host": admin["host"], "user": admin["user"]},
            {"name": "pgbouncer", "host": "127.0.0.1", "port": str(bouncer_port),
             "user": admin["user"]},
            {"name": "dpgate", "host": "127.0.0.1", "port": str(dpgate_port),
             "user": ANALYST, "password": PASSWORD},
        ]
        tps: dict[tuple[str, str], float] = {}
        for mode in ("simple", "extended"):
            for target in targets:
                print(f"pgbench -M {mode} → {target['name']} ({args.seconds} s)…", flush=True)
                tps[mode, target["name"]] = pgbench_tps(target, mode, args, script)

        print(f"{args.runs} private counts, direct and through dpgate…", flush=True)
        products = range(1, args.runs + 1)
        direct = count_latencies(admin_dsn, products)
        proxied = count_latencies(
            f"postgresql://{ANALYST}:{PASSWORD}@127.0.0.1:{dpgate_port}/{DATABASE}", products)

    print(f"\n(a) passthrough, pgbench {args.clients} clients × {args.seconds} s, "
          "SELECT name, price FROM products WHERE product_id = :id")
    print(f"{'protocol':<10}{'direct tps':>12}{'pgbouncer tps':>15}{'dpgate tps':>12}"
          f"{'dpgate/direct':>15}{'dpgate/pgbouncer':>18}")
    for mode in ("simple", "extended"):
        row = [tps[mode, name] for name in ("direct", "pgbouncer", "dpgate")]
        print(f"{mode:<10}{row[0]:>12,.0f}{row[1]:>15,.0f}{row[2]:>12,.0f}"
              f"{row[2] / row[0]:>15.2f}{row[2] / row[1]:>18.2f}")
    print(f"\n(b) private count latency, {args.runs} distinct "
          "SELECT count(*) FROM orders WHERE product_id = k")
    print(f"{'':<22}{'median ms':>10}{'p95 ms':>10}")
    for name, timings in (("direct (raw count)", direct), ("dpgate (noisy count)", proxied)):
        print(f"{name:<22}{statistics.median(timings) * 1e3:>10.2f}{p95(timings) * 1e3:>10.2f}")
    print(f"{'dpgate / direct':<22}{statistics.median(proxied) / statistics.median(direct):>10.1f}"
          f"{p95(proxied) / p95(direct):>10.1f}")


if __name__ == "__main__":
    main()
