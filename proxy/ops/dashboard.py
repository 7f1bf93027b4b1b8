"""The data owner's dashboard: one read-only page on server.dashboard_port, behind HTTP
basic authentication against the ledger's SCRAM verifiers of the server.admin_users
accounts (the password is checked as SCRAM would, never stored).

It shows each analyst's budget and spend over time, the global loss if all collude,
refusals of the last hour by reason and answers per minute, as tables and as plots drawn
on the server (plots.py). Every number comes from the ledger (budgets, charges) or from
this process's statement decisions: no released or private value is on the page.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import multiprocessing
import re
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from html import escape

import psycopg.errors
from aiohttp import BasicAuth, web

from accounting import AnalystBudget, ChargeRecord, GlobalLoss, Ledger, as_text

from ..engine.workers import Workers
from .decision import ANSWERED, FAILED, REFUSED, REPEATED, Decision, now
from .hub import Operations

CACHE_SECONDS = 5.0  # a page younger than this is served again
WINDOW = timedelta(hours=1)  # refusals and answers per minute over this much time
RECENT_REFUSALS = 20
REALM = 'Basic realm="dpgate dashboard", charset="UTF-8"'
# The page needs nothing from elsewhere: inline styles and SVG only.
HEADERS = {"Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
           "img-src data:", "Cache-Control": "no-store", "X-Content-Type-Options": "nosniff",
           "Referrer-Policy": "no-referrer"}


def check_password(ledger: Ledger, admins: frozenset[str], user: str, password: str) -> bool:
    """Whether `user` is an operator and `password` is theirs (SCRAM-SHA-256's StoredKey
    from the password, compared with the ledger's in constant time)."""
    analyst = ledger.analyst(user) if user in admins else None
    if analyst is None:
        return False
    verifier = analyst.verifier
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), verifier.salt,
                                 verifier.iterations)
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    return hmac.compare_digest(hashlib.sha256(client_key).digest(), verifier.stored_key)


def reason(decision: Decision) -> str:
    """Why a statement was refused, in words: dpgate's reason (naming the policy setting
    that decided), else the SQLSTATE's condition in words (psycopg's table of codes)."""
    if decision.reason:
        return decision.reason
    sqlstate = decision.sqlstate
    try:
        name = psycopg.errors.lookup(sqlstate).__name__
    except KeyError:
        return sqlstate or "relayed error"
    return f"{re.sub(r'(?<!^)(?=[A-Z])', ' ', name).lower()} ({sqlstate})"


@dataclass(frozen=True)
class Snapshot:
    """What the page shows, read at one moment: plain data, sent to the drawing process."""

    at: datetime
    budgets: list[AnalystBudget]
    charges: list[ChargeRecord]
    recent: list[Decision]
    admins: frozenset[str]
    sessions: dict[str, int]  # open sessions per analyst

    @classmethod
    def read(cls, ops: Operations, budgets: list[AnalystBudget],
             charges: list[ChargeRecord]) -> Snapshot:
        return cls(now(), budgets, charges, ops.recent(), ops.admins,
                   dict(Counter(info.analyst for info in ops.sessions)))


def _spend_series(charges: list[ChargeRecord]) -> dict[str, tuple[list[datetime], list[float]]]:
    series: dict[str, tuple[list[datetime], list[float]]] = {}
    for charge in charges:
        times, spent = series.setdefault(charge.analyst, ([], []))
        times.append(datetime.fromisoformat(charge.at))
        spent.append((spent[-1] if spent else 0.0) + charge.epsilon)
    return series


def _per_minute(decisions: list[Decision], at: datetime) -> tuple[list[str], list[float]]:
    start = (at - WINDOW).replace(second=0, microsecond=0)
    minutes = int(WINDOW.total_seconds() // 60) + 1
    counts = Counter(int((d.at - start).total_seconds() // 60) for d in decisions
                     if d.outcome in (ANSWERED, REPEATED) and d.kind == "private")
    labels = [(start + timedelta(minutes=i)).strftime("%H:%M") for i in range(minutes)]
    values = [float(counts.get(i, 0)) for i in range(minutes)]
    # Label every tenth minute only: sixty labels would overlap.
    return [label if i % 10 == 0 else "" for i, label in enumerate(labels)], values


def render(snapshot: Snapshot) -> str:
    """The page's HTML (plots inline). matplotlib takes a good part of a second here, so
    this runs in a process of its own, not on a thread holding the proxy's GIL; imported
    here, so that only the drawing process loads it."""
    from . import plots

    admins = snapshot.admins
    active = [entry for entry in snapshot.budgets if entry.active]
    analysts = [entry for entry in active if entry.name not in admins]
    # Operator accounts cannot query: their token allocation is not the analysts'.
    loss = GlobalLoss.of([e for e in snapshot.budgets if e.name not in admins])
    sessions = snapshot.sessions
    since = snapshot.at - WINDOW
    recent = [d for d in snapshot.recent if d.at >= since]
    refusals = [d for d in recent if d.outcome in (REFUSED, FAILED)]
    by_reason = Counter(reason(d) for d in refusals).most_common()
    minute_labels, minute_values = _per_minute(recent, snapshot.at)

    def cell(name: str, field: str, value: str) -> str:
        return f'<td data-analyst="{escape(name)}" data-field="{field}">{escape(value)}</td>'

    rows = "".join(
        f"<tr><th>{escape(e.name)}</th>"
        + cell(e.name, "epsilon_total", as_text(e.budget.epsilon_total))
        + cell(e.name, "epsilon_spent", as_text(e.budget.epsilon_spent))
        + cell(e.name, "epsilon_left", as_text(e.budget.epsilon_left))
        + cell(e.name, "delta_total", as_text(e.budget.delta_total))
        + cell(e.name, "delta_spent", as_text(e.budget.delta_spent))
        + cell(e.name, "queries", str(e.budget.queries))
        + cell(e.name, "sessions", str(sessions.get(e.name, 0))) + "</tr>"
        for e in analysts)
    reasons = "".join(f'<tr><td>{escape(name)}</td><td data-reason="{escape(name)}">{count}'
                      "</td></tr>" for name, count in by_reason) or \
        '<tr><td colspan="2">none in the last hour</td></tr>'
    latest = "".join(
        f"<tr><td>{d.at:%H:%M:%S}</td><td>{escape(d.analyst)}</td>"
        f"<td>{escape(reason(d))}</td><td>{escape(d.kind)}</td>"
        f"<td><code>{escape(d.fingerprint[:16])}</code></td></tr>"
        for d in reversed(refusals[-RECENT_REFUSALS:])) or \
        '<tr><td colspan="5">none in the last hour</td></tr>'
    spend_plot = plots.spend_over_time(
        {name: series for name, series in _spend_series(snapshot.charges).items()
         if name not in admins},
        {e.name: e.budget.epsilon_total for e in analysts}, snapshot.at)
    budget_plot = plots.budget_bars([e.name for e in analysts],
                                    [e.budget.epsilon_spent for e in analysts],
                                    [e.budget.epsilon_left for e in analysts])
    minute_plot = plots.bars(minute_labels, minute_values, "private answers per minute",
                             "no answer in the last hour")
    reason_plot = plots.bars([name for name, _ in by_reason],
                             [float(count) for _, count in by_reason],
                             "refusals (last hour)", "no refusal in the last hour", "#c0504d")
    return PAGE.format(
        at=f"{snapshot.at:%Y-%m-%d %H:%M:%S} UTC", rows=rows,
        epsilon_spent=as_text(loss.epsilon_spent), delta_spent=as_text(loss.delta_spent),
        epsilon_allocated=as_text(loss.epsilon_allocated),
        delta_allocated=as_text(loss.delta_allocated), analysts=len(analysts),
        answers=int(sum(minute_values)), refusals=len(refusals), reasons=reasons,
        latest=latest, spend_plot=spend_plot, budget_plot=budget_plot,
        minute_plot=minute_plot, reason_plot=reason_plot)


def dashboard_app(ops: Operations, ledger: Ledger, workers: Workers) -> web.Application:
    """GET / (the page) behind basic authentication; nothing can be changed here."""
    # Password checks (PBKDF2, 4096 rounds) on a thread of their own: a flood of wrong
    # passwords slows this page down, not the analysts' logins on the ledger's threads.
    checks = ThreadPoolExecutor(1, thread_name_prefix="dpgate-dashboard")

    @web.middleware
    async def authenticate(request: web.Request, handler):
        header = request.headers.get("Authorization", "")
        try:
            credentials = BasicAuth.decode(header) if header else None
        except ValueError:
            credentials = None
        if credentials is None or not await asyncio.get_running_loop().run_in_executor(
                checks, check_password, ledger, ops.admins, credentials.login,
                credentials.password):
            return web.Response(status=401, text="dpgate dashboard: log in as an operator "
                                "(server.admin_users)\n", headers={"WWW-Authenticate": REALM})
        response = await handler(request)
        response.headers.update(HEADERS)
        return response

    # The page is drawn in a process of its own (spawned: a fork would copy the proxy's
    # threads and sockets), at most once per CACHE_SECONDS however many operators look.
    drawing = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
    cached: list[tuple[float, str]] = []
    lock = asyncio.Lock()

    async def page(_: web.Request) -> web.Response:
        async with lock:
            if not cached or time.monotonic() - cached[0][0] > CACHE_SECONDS:
                snapshot = Snapshot.read(ops, await workers.ledger_read(ledger.budgets),
                                         await workers.ledger_read(ledger.charges))
                html = await asyncio.get_running_loop().run_in_executor(
                    drawing, render, snapshot)
                cached[:] = [(time.monotonic(), html)]
            html = cached[0][1]
        return web.Response(text=html, content_type="text/html")

    async def stop_checks(_: web.Application) -> None:
        checks.shutdown(wait=False, cancel_futures=True)
        drawing.shutdown(wait=True, cancel_futures=True)  # quick: at most one page drawn

    app = web.Application(middlewares=[authenticate])
    app.router.add_get("/", page)
    app.on_cleanup.append(stop_checks)
    return app


PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="refresh" content="30">
<title>dpgate — data owner's dashboard</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 1.5em; color: #222; max-width: 1100px; }}
h1 {{ font-size: 1.4em; margin-bottom: 0.2em; }}
h2 {{ font-size: 1.1em; margin-top: 1.6em; border-bottom: 1px solid #ccc; }}
table {{ border-collapse: collapse; margin: 0.5em 0; }}
th, td {{ padding: 0.25em 0.8em; border-bottom: 1px solid #eee; text-align: right; }}
th:first-child, td:first-child {{ text-align: left; }}
.tiles {{ display: flex; gap: 1em; flex-wrap: wrap; }}
.tile {{ border: 1px solid #ccc; border-radius: 6px; padding: 0.6em 1em; min-width: 10em; }}
.tile b {{ display: block; font-size: 1.6em; }}
.plots {{ display: flex; flex-wrap: wrap; gap: 1em; }}
.plots > div {{ flex: 1 1 480px; }}
svg {{ max-width: 100%; height: auto; }}
.note {{ color: #666; font-size: 0.9em; }}
</style></head><body>
<h1>dpgate — data owner's dashboard</h1>
<p class="note">Read at {at}; refreshed every 30 s. Budgets and charges come from the
privacy ledger; no released or private value is shown here.</p>
<div class="tiles">
<div class="tile">global ε spent if all collude<b id="global-epsilon-spent">{epsilon_spent}</b>
of {epsilon_allocated} allocated</div>
<div class="tile">global δ spent<b id="global-delta-spent">{delta_spent}</b>
of {delta_allocated} allocated</div>
<div class="tile">analysts<b id="analysts">{analysts}</b></div>
<div class="tile">private answers, last hour<b id="answers-last-hour">{answers}</b></div>
<div class="tile">refusals, last hour<b id="refusals-last-hour">{refusals}</b></div>
</div>
<h2>Budgets</h2>
<table id="budgets"><thead><tr><th>analyst</th><th>ε total</th><th>ε spent</th>
<th>ε left</th><th>δ total</th><th>δ spent</th><th>queries</th><th>sessions</th></tr></thead>
<tbody>{rows}</tbody></table>
<div class="plots"><div><h2>ε spent over time</h2>{spend_plot}</div>
<div><h2>Budget spent and left</h2>{budget_plot}</div></div>
<div class="plots"><div><h2>Private answers per minute (last hour)</h2>{minute_plot}</div>
<div><h2>Refusals by reason (last hour)</h2>{reason_plot}</div></div>
<h2>Refusals by reason</h2>
<table id="refusal-reasons"><thead><tr><th>SQLSTATE</th><th>statements</th></tr></thead>
<tbody>{reasons}</tbody></table>
<h2>Latest refusals</h2>
<table id="latest-refusals"><thead><tr><th>time (UTC)</th><th>analyst</th><th>reason</th>
<th>kind</th><th>statement fingerprint</th></tr></thead><tbody>{latest}</tbody></table>
</body></html>
"""
