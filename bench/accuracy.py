"""Accuracy of unit mode beside row-level FLEX and the truth, on the demo data.

For each shape, ≥ 200 distinct queries (one per product) are planned twice: with the demo
policy's privacy unit (customers, τ = 10, κ = 5) and at row level (FLEX).
PostgreSQL runs each rewritten query once for its pre-noise answer, and the statement as
written for the true answer; noise is then drawn in process with dpgate's own release()
from a seeded source, without the analyst shift (whose mean an analyst can learn and
subtract; docs/mechanisms.md), at ε = 0.1 and 1 (δ = 1e-8 where FLEX needs one). The
error of an answer is |released − true| per noisy cell, so unit mode's error includes
its truncation bias. The script prints the median absolute errors and their ratio.

    .venv/bin/python bench/accuracy.py [--dsn postgresql://…] [--queries 200]
        [--cost-rows 1000000] [--cost-only] [--explain] [--work-mem 64MB] [--cpu]

A second table (issue 29) measures person-level counts at ε = 0.1 against PostgreSQL's
untruncated answer: before (τ fixed at the policy's 10, as SET dp.max_contributions = 10)
and after (τ chosen per query, the default), beside row-level FLEX, with the coverage of
the interval the NOTICE states, each printed with its target. A third times, at
--cost-rows orders (a scaled copy of the demo in a database of its own), the rewritten SQL
of a total count, a histogram and a grouped sum against the statement run directly.
Between them, bench/accuracy_chain.py's second schema (a unit through two foreign keys).

With --kinds it measures instead the coverage of the error bar of every column kind (count,
sum, avg, variance, stddev, a ratio, a quantile, a histogram cell; bench/accuracy_kinds.py).

With --coverage it measures instead how often the error bar each answer states (the
NOTICE's ±) covers PostgreSQL's exact answer, per shape (count, sum, avg, avg per category),
at row level and in unit mode, and the median relative error.

Without --dsn it starts an embedded PostgreSQL (pgserver) with the demo dataset. With
--smartnoise PATH (a Python with smartnoise-sql installed, see bench/README.md) it also
runs SmartNoise SQL on the single-table shapes at the same ε.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.accuracy_chain import covered  # noqa: E402
from bench.accuracy_chain import run as chain  # noqa: E402
from bench.accuracy_kinds import run_kinds  # noqa: E402
from mechanisms.seeded_source import SeededRandomSource  # noqa: E402
from proxy.config import PrivacySettings  # noqa: E402
from proxy.engine.chosen_bound import CountAtBound, count_at_bound  # noqa: E402
from proxy.engine.release import release  # noqa: E402
from rewriter.aggregate.private import plan_private_aggregate  # noqa: E402
from rewriter.analysis.classify import parse_query  # noqa: E402
from rewriter.analysis.constants import evaluation_sql, substitute  # noqa: E402
from rewriter.policy.session import with_session_bounds  # noqa: E402
from rewriter.sensitivity.calibrate import calibrate  # noqa: E402
from tests.unit_support import demo_policy, measured_metrics  # noqa: E402

EPSILONS = (0.1, 1.0)
DELTA = 1e-8
NO_SHIFT = PrivacySettings(shift_interval=(0.0, 0.0))
US = "address LIKE '%United States%'"
SHAPES = {
    "count": "SELECT count(*) FROM orders WHERE product_id = {n}",
    "join count": ("SELECT count(*) FROM orders JOIN customers USING (customer_id) "
                   f"WHERE product_id = {{n}} AND {US}"),
    "histogram (10 cells)": ("SELECT quantity, count(*) FROM orders WHERE product_id = {n} "
                             "GROUP BY quantity"),
    "sum": "SELECT sum(order_cost) FROM orders WHERE product_id = {n}",
    "avg": "SELECT avg(quantity) FROM orders WHERE product_id = {n}",
    "join histogram": ("SELECT o.quantity, count(*) FROM orders o JOIN customers c "
                       "ON o.customer_id = c.customer_id WHERE o.product_id = {n} "
                       f"AND c.{US} GROUP BY o.quantity"),
}
SINGLE_TABLE = ("count", "histogram (10 cells)", "sum", "avg")  # SmartNoise's


@dataclass
class Answer:
    """One query in one mode: its plan, the pre-noise rows and the true answer by key."""

    plan: object
    rows: list[list[bytes | None]]
    key_types: list[int]
    truth: dict[tuple, float]


def _prepared(connection: psycopg.Connection, sql: str, policy, metrics) -> Answer:
    plan = plan_private_aggregate(parse_query(sql), policy, 0, metrics)
    rewritten = plan.sql
    if plan.constants:  # computed first, as the proxy does (a time bucket's mapping)
        literals = connection.execute(evaluation_sql(plan.constants)).fetchone()
        rewritten = substitute(rewritten, plan.constants, list(literals),
                               max(1, len(plan.checks.reads)))
    cursor = connection.execute(rewritten)
    rows = [[None if v is None else _as_text(v) for v in row] for row in cursor.fetchall()]
    key_types = [column.type_code for column in cursor.description[:plan.keys]]
    truth = {}
    for row in connection.execute(sql).fetchall():
        truth[tuple(str(k) for k in row[:-1])] = float(row[-1] or 0)
    return Answer(plan, rows, key_types, truth)


def _as_text(value: object) -> bytes:
    """A value as PostgreSQL's text form (an array of a bucketed sum as {…})."""
    if isinstance(value, list):
        return ("{" + ",".join(str(v) for v in value) + "}").encode()
    return str(value).encode()


def _errors(answer: Answer, epsilon: float, rng: SeededRandomSource, draws: int
            ) -> list[float]:
    """|released − true| of every noisy cell, for `draws` independent releases."""
    calibration = calibrate(answer.plan, epsilon, DELTA)
    keys = answer.plan.keys
    errors = []
    for _ in range(draws):
        released = release(answer.plan, calibration, answer.key_types, answer.rows, 0.0,
                           NO_SHIFT, rng)
        for row in released.rows:
            value = float(Decimal(row[keys])) if row[keys] is not None else 0.0
            errors.append(abs(value - answer.truth.get(tuple(row[:keys]), 0.0)))
    return errors


def _smartnoise(python: str, dsn: str, queries: dict[str, list[str]], epsilon: float,
                draws: int, max_ids: int = 10, row_privacy: bool = False
                ) -> dict[str, dict[str, list[float]]]:
    """SmartNoise SQL's errors per shape, {"absolute": […], "relative": […]} over every
    released cell (run by its own interpreter: bench/accuracy_smartnoise.py)."""
    script = Path(__file__).with_name("accuracy_smartnoise.py")
    payload = json.dumps({"dsn": dsn, "epsilon": epsilon, "queries": queries,
                          "draws": draws, "max_ids": max_ids, "row_privacy": row_privacy})
    result = subprocess.run([python, str(script)], input=payload, capture_output=True,
                            text=True, check=True, timeout=3600)
    return json.loads(result.stdout.strip().splitlines()[-1])


def run(dsn: str, count: int, draws: int, smartnoise: str | None) -> None:
    metrics = measured_metrics(dsn)
    # "unit τ=1": the same policy after SET dp.max_contributions = 1 (per-product questions
    # rarely need more: 86% of the rows of a (customer, product) pair are its first).
    modes = {"unit": demo_policy(), "flex": demo_policy(unit=False),
             "unit1": with_session_bounds(demo_policy(), {"dp.max_contributions": "1"})}
    rng = SeededRandomSource(20261125)
    medians: dict[tuple[str, float, str], float] = {}
    queries = {shape: [template.format(n=n) for n in range(1, count + 1)]
               for shape, template in SHAPES.items()}
    with psycopg.connect(dsn) as connection:
        for shape, texts in queries.items():
            print(f"{shape}: {len(texts)} queries", file=sys.stderr, flush=True)
            for mode, policy in modes.items():
                answers = [_prepared(connection, text, policy, metrics) for text in texts]
                for epsilon in EPSILONS:
                    errors = [e for a in answers for e in _errors(a, epsilon, rng, draws)]
                    medians[(shape, epsilon, mode)] = statistics.median(errors)
            truths = [v for text in texts for v in
                      (float(r[-1] or 0) for r in connection.execute(text).fetchall())]
            medians[(shape, 0.0, "truth")] = statistics.median(truths)
    if smartnoise:
        for epsilon in EPSILONS:
            for shape, errors in _smartnoise(smartnoise, dsn, {s: queries[s] for s in
                                                              SINGLE_TABLE}, epsilon,
                                                  draws).items():
                medians[(shape, epsilon, "smartnoise")] = statistics.median(errors["absolute"])
    print(f"median absolute error over {count} queries per shape, {draws} draws each "
          "(per cell for histograms); unit: the demo policy (tau = 10; a count chooses its tau), "
          "unit1: tau = 1")
    header = f"{'shape':22} {'eps':>4} {'median true':>11} {'unit':>10} {'FLEX':>10} " \
             f"{'FLEX/unit':>9} {'unit1':>8} {'FLEX/unit1':>10}"
    if smartnoise:
        header += f" {'SmartNoise':>10} {'unit/SN':>7}"
    print(header)
    for shape in SHAPES:
        for epsilon in EPSILONS:
            unit, flex = medians[(shape, epsilon, "unit")], medians[(shape, epsilon, "flex")]
            one = medians[(shape, epsilon, "unit1")]
            line = (f"{shape:22} {epsilon:>4g} {medians[(shape, 0.0, 'truth')]:>11.1f} "
                    f"{unit:>10.2f} {flex:>10.2f} {_ratio(flex, unit):>9.1f} {one:>8.2f} "
                    f"{_ratio(flex, one):>10.1f}")
            if (shape, epsilon, "smartnoise") in medians:
                other = medians[(shape, epsilon, "smartnoise")]
                line += f" {other:>10.2f} {_ratio(unit, other):>7.2f}"
            print(line, flush=True)


# Error-bar coverage (issue 29): the NOTICE's bound against PostgreSQL's exact answer.
COVERAGE_SHAPES = {
    "count": "SELECT count(*) FROM orders WHERE product_id = {n}",
    "sum": "SELECT sum(order_cost) FROM orders WHERE product_id = {n}",
    "avg": "SELECT avg(order_cost) FROM orders WHERE product_id = {n}",
    "avg per category": ("SELECT p.category, avg(o.order_cost) FROM orders o JOIN products p "
                         "ON o.product_id = p.product_id WHERE o.product_id % 50 = {n} % 50 "
                         "GROUP BY p.category"),
    # issue 29's question over all orders: one statement, answered `queries` times
    "avg per category, all": ("SELECT p.category, avg(o.order_cost) FROM orders o JOIN "
                              "products p ON o.product_id = p.product_id GROUP BY p.category"),
    "sum per category, all": ("SELECT p.category, sum(o.order_cost) FROM orders o JOIN "
                              "products p ON o.product_id = p.product_id GROUP BY p.category"),
}


def _coverage(answer: Answer, epsilon: float, rng: SeededRandomSource, draws: int
              ) -> tuple[int, int, int, list[float], list[float]]:
    """(cells covered, cells, NULL answers, relative errors, the interval's relative
    half-widths) over `draws` releases: a cell is covered when |released − true| <= the
    bound the NOTICE states for it."""
    calibration = calibrate(answer.plan, epsilon, DELTA)
    keys = answer.plan.keys
    name = answer.plan.visible[keys].name
    covered = cells = nulls = 0
    relative, widths = [], []
    for _ in range(draws):
        released = release(answer.plan, calibration, answer.key_types, answer.rows, 0.0,
                           NO_SHIFT, rng)
        below, above = _ends(released.bounds.get(name))
        for row in released.rows:
            truth = answer.truth.get(tuple(row[:keys]))
            if truth is None:  # a key PostgreSQL does not list (an empty category)
                continue
            if row[keys] is None:
                nulls += 1
                continue
            error = truth - float(Decimal(row[keys]))
            cells += 1
            covered += below is not None and -below <= error <= above
            if truth:
                relative.append(abs(error) / abs(truth))
                if below is not None:
                    widths.append((below + above) / 2 / abs(truth))
    return covered, cells, nulls, relative, widths


def _ends(bound: int | str | None) -> tuple[float | None, float]:
    """How far below and above the released value the stated interval reaches: ±N, or
    a count's 'N (upper end +M)'."""
    if bound is None:
        return None, 0.0
    text = str(bound)
    if "(upper end +" in text:
        below, above = text.split(" (upper end +")
        return float(below), float(above.rstrip(")"))
    return float(text), float(text)


def run_coverage(dsn: str, count: int, draws: int, shapes: list[str]) -> None:
    """Coverage of the stated error bars at ε 0.1 and 1, row level and unit mode."""
    metrics = measured_metrics(dsn)
    modes = {"row": demo_policy(unit=False), "unit": demo_policy()}
    rng = SeededRandomSource(29)
    print(f"error-bar coverage over {count} queries per shape, {draws} draws each, "
          "against PostgreSQL's exact (untruncated) answer; unit: tau = 10")
    print(f"{'shape':22} {'mode':>5} {'eps':>4} {'cells':>7} {'covered':>8} {'NULL':>5} "
          f"{'median rel. error':>17} {'median ± / truth':>16}")
    with psycopg.connect(dsn) as connection:
        for shape, template in COVERAGE_SHAPES.items():
            if shapes and not any(part in shape for part in shapes):
                continue
            texts = [template.format(n=n) for n in range(1, count + 1)]
            for mode, policy in modes.items():
                prepared = {text: _prepared(connection, text, policy, metrics)
                            for text in dict.fromkeys(texts)}  # a repeated text: once
                answers = [prepared[text] for text in texts]
                for epsilon in EPSILONS:
                    covered = cells = nulls = 0
                    relative: list[float] = []
                    widths: list[float] = []
                    for answer in answers:
                        c, n, z, r, w = _coverage(answer, epsilon, rng, draws)
                        covered, cells, nulls = covered + c, cells + n, nulls + z
                        relative += r
                        widths += w
                    share = covered / cells if cells else float("nan")
                    median = statistics.median(relative) if relative else float("nan")
                    width = statistics.median(widths) if widths else float("nan")
                    print(f"{shape:22} {mode:>5} {epsilon:>4g} {cells:>7} {share:>8.1%} "
                          f"{nulls:>5} {median:>17.1%} {width:>16.1%}", flush=True)


TARGET_EPSILON = 0.1
FIXED = {"dp.max_contributions": "10"}


def _person_shapes(count: int) -> dict[str, list[str]]:
    """Shapes of issue 29: totals (200 WHERE windows of all orders), the US join (one
    question, released `count` times), one count per product, the monthly series, and
    avg(order_cost) per category over all orders (a join with public products)."""
    return {
        "total count": [f"SELECT count(*) FROM orders WHERE order_id > {50 * n}"
                        for n in range(count)],
        "US join count": [f"SELECT count(*) FROM orders JOIN customers USING (customer_id) "
                          f"WHERE {US}"] * count,
        "per-product count": [f"SELECT count(*) FROM orders WHERE product_id = {n}"
                              for n in range(1, count + 1)],
        "monthly series": ["SELECT date_trunc('month', order_date) AS m, count(*) FROM "
                           "orders GROUP BY 1"] * max(1, count // 25),
        "avg per category": [COVERAGE_SHAPES["avg per category, all"]] * max(1, count // 5),
    }


@dataclass
class Figures:
    """Errors of every released cell (absolute and relative) and interval coverage; with
    τ chosen per query, each cell's error decomposed: |truth − the cell at τ| (truncation
    bias) and |released − the cell at τ| (noise), the τ and the ε of the count itself."""

    absolute: list[float] = field(default_factory=list)
    relative: list[float] = field(default_factory=list)
    covered: list[bool] = field(default_factory=list)
    bias: list[float] = field(default_factory=list)
    noise: list[float] = field(default_factory=list)
    taus: list[int] = field(default_factory=list)
    answer_epsilon: list[float] = field(default_factory=list)

    def add(self, other: Figures) -> None:
        for name in self.__dataclass_fields__:
            getattr(self, name).extend(getattr(other, name))


def _person_figures(answer: Answer, rng: SeededRandomSource) -> Figures:
    calibration = calibrate(answer.plan, TARGET_EPSILON, DELTA)
    keys = answer.plan.keys
    # release() draws τ first, from the same stream: a copy of the stream shows which τ
    # and the cells' values there, before noise (the decomposition, not a second release)
    at_bound = _at_bound(answer, calibration, copy.deepcopy(rng))
    released = release(answer.plan, calibration, answer.key_types, answer.rows, 0.0,
                       NO_SHIFT, rng)
    figures = Figures()
    name = answer.plan.visible[-1].name
    for row in released.rows:
        value = float(Decimal(row[keys])) if row[keys] is not None else 0.0
        truth = answer.truth.get(tuple(row[:keys]), 0.0)
        figures.absolute.append(abs(value - truth))
        figures.relative.append(abs(value - truth) / truth if truth else 0.0)
        figures.covered.append(covered(value, truth, released.bounds.get(name)))
        if at_bound is not None:
            kept = at_bound[1].get(tuple(row[:keys]), 0.0)
            figures.bias.append(abs(truth - kept))
            figures.noise.append(abs(value - kept))
    if at_bound is not None:
        figures.taus.append(at_bound[0].tau)
        figures.answer_epsilon.append(at_bound[0].calibration.parts[0].epsilon)
    return figures


def _at_bound(answer: Answer, calibration, rng: SeededRandomSource
              ) -> tuple[CountAtBound, dict[tuple, float]] | None:
    """The unit-mode count's τ and each cell's value at it (before noise), or None."""
    unit = answer.plan.unit
    if unit is None or unit.counts_cap is None:
        return None
    count = count_at_bound(answer.plan, calibration, answer.rows, NO_SHIFT, rng)
    if count.total is not None:  # shape × total: no cells at a τ to split the error by
        return None
    keys = answer.plan.keys
    return count, {tuple(None if v is None else v.decode() for v in row[:keys]):
                   float(Decimal(row[keys].decode())) / count.resolution
                   for row in count.rows}


def person_level(dsn: str, count: int, draws: int, smartnoise: str | None = None) -> None:
    """Issue 29's figures (counts, averages per category) at ε = 0.1, before and after,
    with their targets, each query released `draws` times (a median over 200 releases
    moves by ~7% of itself from seed to seed, enough to swing a 1.5× ratio); with
    `smartnoise`, SmartNoise SQL's beside them on the shapes it answers."""
    metrics = measured_metrics(dsn)
    # "shaped": the policy's opt-in shape × total histograms (policy shape_times_total).
    unit = demo_policy().unit
    assert unit is not None
    modes = {"before": with_session_bounds(demo_policy(), FIXED), "after": demo_policy(),
             "shaped": dataclasses.replace(demo_policy(), unit=dataclasses.replace(
                 unit, shape_times_total=True)),
             "flex": demo_policy(unit=False)}
    rng = SeededRandomSource(29)
    results: dict[tuple[str, str], Figures] = {}
    with psycopg.connect(dsn) as connection:
        for shape, texts in _person_shapes(count).items():
            print(f"{shape}: {len(texts) * draws} releases", file=sys.stderr, flush=True)
            for mode, policy in modes.items():
                cache: dict[str, Answer] = {}
                figures = Figures()
                for text in texts:
                    if text not in cache:
                        cache[text] = _prepared(connection, text, policy, metrics)
                    for _ in range(draws):
                        figures.add(_person_figures(cache[text], rng))
                results[(shape, mode)] = figures
    print(f"\nperson-level answers at epsilon {TARGET_EPSILON:g}, errors against PostgreSQL's "
          "untruncated answer (before: tau = 10 fixed; after: tau chosen per query)")
    print(f"{'shape':18} {'mode':7} {'cells':>6} {'median rel':>10} {'mean abs':>9} "
          f"{'median abs':>10} {'coverage':>8}")
    for (shape, mode), figures in results.items():
        print(f"{shape:18} {mode:7} {len(figures.absolute):>6} "
              f"{statistics.median(figures.relative):>10.2%} "
              f"{statistics.fmean(figures.absolute):>9.1f} "
              f"{statistics.median(figures.absolute):>10.1f} "
              f"{statistics.fmean(figures.covered):>8.1%}")
    after = {shape: results[(shape, "after")] for shape, _ in results}
    decomposition(after)
    flex = statistics.median(results[("per-product count", "flex")].absolute)
    targets = [
        ("total count: median relative error", statistics.median(
            after["total count"].relative), 0.03, "{:.2%}"),
        ("monthly series: median relative error per cell", statistics.median(
            after["monthly series"].relative), 0.03, "{:.2%}"),
        ("monthly series, shape x total (opt-in)", statistics.median(
            results[("monthly series", "shaped")].relative), 0.03, "{:.2%}"),
        ("US join count: mean absolute error", statistics.fmean(
            after["US join count"].absolute), 800, "{:.0f}"),
        ("per product: median absolute error / FLEX's", statistics.median(
            after["per-product count"].absolute) / flex, 1.5, "{:.2f}"),
        ("avg per category: median relative error per cell", statistics.median(
            after["avg per category"].relative), 0.10, "{:.2%}"),
    ]
    print(f"\n{'target':50} {'after':>8} {'limit':>8}")
    for label, value, limit, style in targets:
        print(f"{label:50} {style.format(value):>8} {style.format(limit):>8} "
              f"{'met' if value <= limit else 'MISS'}")
    for shape, figures in after.items():
        coverage = statistics.fmean(figures.covered)
        print(f"{shape + ': interval coverage':50} {coverage:>8.1%} {'95%':>8} "
              f"{'met' if coverage >= 0.95 else 'MISS'}")
    if smartnoise:
        person_smartnoise(smartnoise, dsn, count, results)


def decomposition(after: dict[str, Figures]) -> None:
    """Where each shape's error comes from, τ chosen per query: the mean |truth − cell at
    τ| (truncation bias) and |released − cell at τ| (noise, after rounding), the τ chosen
    (median and the middle 80%), and the ε the count itself got of TARGET_EPSILON (the
    rest chose τ and released the rows beyond it)."""
    print("\nwhere the error comes from (after): mean abs. bias and noise per cell")
    print(f"{'shape':18} {'mean abs':>9} {'bias':>8} {'noise':>8} {'tau median':>10} "
          f"{'tau 10-90%':>10} {'answer eps':>10}")
    for shape, figures in after.items():
        if not figures.taus:
            continue
        taus = sorted(figures.taus)
        spread = f"{taus[len(taus) // 10]}-{taus[len(taus) * 9 // 10]}"
        print(f"{shape:18} {statistics.fmean(figures.absolute):>9.1f} "
              f"{statistics.fmean(figures.bias):>8.1f} {statistics.fmean(figures.noise):>8.1f} "
              f"{statistics.median(taus):>10g} {spread:>10} "
              f"{statistics.fmean(figures.answer_epsilon) / TARGET_EPSILON:>10.1%}")


# SmartNoise answers no join, and groups on EXTRACT, not date_trunc: the same 24 months.
SMARTNOISE_MONTHS = ("SELECT EXTRACT(YEAR FROM order_date) AS y, EXTRACT(MONTH FROM "
                     "order_date) AS m, count(*) FROM orders GROUP BY EXTRACT(YEAR FROM "
                     "order_date), EXTRACT(MONTH FROM order_date)")
# Person level: SmartNoise's max_ids is a fixed τ: the policy's τ, and the limit dpgate's
# chosen τ may reach (contributions_limit); at row level every row is its own id.
SMARTNOISE_MODES = {"SN max_ids=10": (10, False), "SN max_ids=100": (100, False),
                    "SN row-level": (1, True)}


def person_smartnoise(python: str, dsn: str, count: int,
                      results: dict[tuple[str, str], Figures]) -> None:
    """dpgate (τ chosen per query; FLEX at row level) beside SmartNoise SQL at ε = 0.1 on
    issue 29's single-table shapes, the same releases per shape: median relative error
    (median absolute for per-product counts, whose truths are small)."""
    shapes = {shape: texts for shape, texts in _person_shapes(count).items()
              if "join" not in shape and shape != "avg per category"}  # joins
    shapes["monthly series"] = [SMARTNOISE_MONTHS] * len(shapes["monthly series"])
    with ThreadPoolExecutor(len(SMARTNOISE_MODES)) as pool:  # three processes at once
        running = {mode: pool.submit(_smartnoise, python, dsn, shapes, TARGET_EPSILON, 1,
                                     max_ids, row)
                   for mode, (max_ids, row) in SMARTNOISE_MODES.items()}
        theirs = {mode: future.result() for mode, future in running.items()}
    print(f"\nbeside SmartNoise SQL at epsilon {TARGET_EPSILON:g} (person level: customer "
          "as private id; median relative error, per product median absolute)")
    print(f"{'shape':18} {'dpgate':>8} " + " ".join(f"{m:>14}" for m in SMARTNOISE_MODES) +
          f" {'dpgate/best SN':>14} {'FLEX':>8} {'FLEX/SN row':>11}")
    for shape in shapes:
        kind = "absolute" if shape == "per-product count" else "relative"
        style = "{:>8.1f}" if kind == "absolute" else "{:>8.2%}"
        mine = statistics.median(getattr(results[(shape, "after")], kind))
        flex = statistics.median(getattr(results[(shape, "flex")], kind))
        other = {mode: statistics.median(theirs[mode][shape][kind])
                 for mode in SMARTNOISE_MODES}
        best = min(other["SN max_ids=10"], other["SN max_ids=100"])
        print(f"{shape:18} {style.format(mine)} " + " ".join(
            f"{style.format(other[m]):>14}" for m in SMARTNOISE_MODES) +
            f" {_ratio(mine, best):>14.2f} {style.format(flex)} "
            f"{_ratio(flex, other['SN row-level']):>11.2f}")


def monthly_floor(dsn: str, draws: int = 2000) -> None:
    """The monthly series' error floor (docs/privacy-unit.md): per τ, its cells with each
    customer's rows kept in proportion (m·τ/n, as dpgate keeps them) plus Laplace noise of
    scale τ/ε, at the whole ε = 0.1 (τ chosen with hindsight, for free) and at the 0.08
    dpgate's cells get; the median relative error per cell over `draws` noise draws, its
    bias and noise parts; then cells at a small τ scaled to a total (ratio-corrected).
    A measurement (numpy's generator), not a release."""
    import numpy as np

    with psycopg.connect(dsn) as connection:
        rows = connection.execute(
            "SELECT date_trunc('month', order_date), customer_id, count(*) FROM orders "
            "GROUP BY 1, 2").fetchall()
    totals: dict[int, int] = {}
    for _, unit, m in rows:
        totals[unit] = totals.get(unit, 0) + m
    months = sorted({month for month, _, _ in rows})
    index = {month: i for i, month in enumerate(months)}
    truth = np.zeros(len(months))
    for month, _, m in rows:
        truth[index[month]] += m
    generator = np.random.default_rng(29)
    print(f"\nmonthly series floor: {len(months)} months, median {np.median(truth):,.0f} rows")
    print(f"{'eps':>5} {'tau':>4} {'median rel':>10} {'bias':>7} {'noise':>7}")
    for epsilon in (TARGET_EPSILON, 0.8 * TARGET_EPSILON):
        best = (0, float("inf"))
        for tau in range(12, 65, 2):
            kept = np.zeros(len(months))
            for month, unit, m in rows:
                n = totals[unit]
                kept[index[month]] += m if n <= tau else m * tau / n
            noise = generator.laplace(0, tau / epsilon, (draws, len(months)))
            error = float(np.median(np.abs(kept + noise - truth) / truth))
            best = min(best, (tau, error), key=lambda pair: pair[1])
            if tau % 8 == 0 or tau in (14, 18, 28):
                print(f"{epsilon:>5g} {tau:>4} {error:>10.2%} "
                      f"{float(np.median((truth - kept) / truth)):>7.2%} "
                      f"{float(np.median(np.abs(noise) / truth)):>7.2%}")
        print(f"{epsilon:>5g} best tau {best[0]}: {best[1]:.2%}")
    # Ratio-corrected cells: a small τ_c keeps the same share of every month (the heavy
    # customers' rows are spread over the months), so cells · total / Σ cells undoes most of
    # the truncation. With the exact total (an oracle) and with a noisy total at τ_T = the
    # largest customer (hindsight, no ε spent choosing it), ε split between the two.
    most = max(totals.values())
    total = sum(min(n, most) for n in totals.values())
    print(f"\nratio-corrected cells (total at tau {most}, the largest customer: hindsight)")
    print(f"{'tau_c':>5} {'cells eps':>9} {'exact total':>11} {'noisy total':>11}")
    for tau in (1, 2, 4, 8):
        kept = np.zeros(len(months))
        for month, unit, m in rows:
            n = totals[unit]
            kept[index[month]] += m if n <= tau else m * tau / n
        for cells_epsilon in (0.06, 0.07, 0.08):
            cells = kept + generator.laplace(0, tau / cells_epsilon, (draws, len(months)))
            exact = cells * (truth.sum() / cells.sum(axis=1, keepdims=True))
            noisy_total = total + generator.laplace(
                0, most / (TARGET_EPSILON - cells_epsilon), (draws, 1))
            noisy = cells * (noisy_total / cells.sum(axis=1, keepdims=True))
            print(f"{tau:>5} {cells_epsilon:>9g} "
                  f"{float(np.median(np.abs(exact - truth) / truth)):>11.2%} "
                  f"{float(np.median(np.abs(noisy - truth) / truth)):>11.2%}")


COST_SHAPES = {
    "total count": "SELECT count(*) FROM orders",
    "histogram": "SELECT quantity, count(*) FROM orders GROUP BY quantity",
    "grouped sum": "SELECT quantity, sum(order_cost) FROM orders GROUP BY quantity",
    "sum": "SELECT sum(order_cost) FROM orders",
    "grouped avg": "SELECT quantity, avg(order_cost) FROM orders GROUP BY quantity",
}


def cost(dsn: str, rows: int, runs: int = 7, explain: bool = False,
         work_mem: str | None = None, cpu: bool = False) -> None:
    """Milliseconds of each shape's rewritten SQL (before: τ = 10 by row_number(); after:
    the default plan) against the statement run directly, at `rows` orders: the demo's
    orders copied with fresh customer ids into a database of its own. With `explain`, the
    big nodes of each plan's EXPLAIN (ANALYZE, BUFFERS); with `work_mem`, every statement
    (the direct one too) runs at that work_mem; with `cpu`, the backend's CPU time instead
    of the wall clock, without parallel workers (the machine's load then hardly enters;
    PostgreSQL must run on this machine, as the embedded one does)."""
    copies = max(1, rows // 100_000)
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute("DROP DATABASE IF EXISTS dpgate_cost")
        connection.execute("CREATE DATABASE dpgate_cost")
    scaled = psycopg.conninfo.make_conninfo(dsn, dbname="dpgate_cost")
    with psycopg.connect(scaled, autocommit=True) as connection, \
            psycopg.connect(dsn) as source:
        connection.execute("CREATE TABLE customers (customer_id int PRIMARY KEY, name text, "
                           "address text); CREATE TABLE products (product_id int PRIMARY "
                           "KEY, name text, category text, price numeric); CREATE TABLE "
                           "orders (order_id int PRIMARY KEY, customer_id int, product_id "
                           "int, quantity int, order_cost numeric, order_date date); CREATE "
                           "TABLE recommendations (customer_id int, product_id int)")
        for table in ("customers", "products", "orders"):
            with source.cursor().copy(f"COPY {table} TO STDOUT") as out, \
                    connection.cursor().copy(f"COPY {table} FROM STDIN") as into:
                for data in out:
                    into.write(data)
        connection.execute(
            "INSERT INTO customers SELECT customer_id + k * 100000, name, address FROM "
            f"customers, generate_series(1, {copies - 1}) AS k")
        connection.execute(
            "INSERT INTO orders SELECT order_id + k * 1000000, customer_id + k * 100000, "
            "product_id, quantity, order_cost, order_date FROM orders, "
            f"generate_series(1, {copies - 1}) AS k")
        # VACUUM as autovacuum would: an index-only scan needs the visibility map.
        connection.execute("CREATE INDEX ON orders (customer_id)")
        connection.execute("VACUUM ANALYZE")
        metrics = measured_metrics(scaled)
        if work_mem is not None:
            connection.execute("SELECT set_config('work_mem', %s, false)", (work_mem,))
        if cpu:
            connection.execute("SET max_parallel_workers_per_gather = 0")
        (total,) = connection.execute("SELECT count(*) FROM orders").fetchone()
        (memory,) = connection.execute("SHOW work_mem").fetchone()
        print(f"\ncost at {total:,} orders, work_mem {memory}, "
              f"{'backend CPU, no parallel workers' if cpu else 'wall clock'}, load "
              f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}: median of {runs} runs, ms "
              "(ratio to direct)")
        print(f"{'shape':14} {'direct':>8} {'before':>16} {'after':>16}")
        for shape, sql in COST_SHAPES.items():
            timed = {"direct": sql}
            for mode, policy in (("before", with_session_bounds(demo_policy(), FIXED)),
                                 ("after", demo_policy())):
                timed[mode] = plan_private_aggregate(parse_query(sql), policy, 0,
                                                     metrics).sql
            times = {mode: _median_ms(connection, text, runs, cpu) for mode, text in timed.items()}
            direct = times["direct"]
            print(f"{shape:14} {direct:>8.1f} " + " ".join(
                f"{times[m]:>8.1f} ({times[m] / direct:>4.1f}x)" for m in ("before", "after")),
                flush=True)
            if explain:
                for mode in ("direct", "after"):
                    print(f"  {mode}: " + "\n  ".join(_big_nodes(connection, timed[mode])))
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute("DROP DATABASE dpgate_cost")


def _big_nodes(connection: psycopg.Connection, sql: str, share: float = 0.05) -> list[str]:
    """The nodes of `sql`'s EXPLAIN (ANALYZE, BUFFERS) that take at least `share` of its
    time by themselves (their own time, children's excluded, summed over the parallel
    workers, so a parallel node may exceed the statement's time), with their rows and
    the temporary blocks they wrote (a spill)."""
    (document,) = connection.execute(
        f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {sql}").fetchone()
    root = document[0]["Plan"]
    total = root["Actual Total Time"]
    nodes = []

    def visit(node: dict, depth: int) -> None:
        loops = node.get("Actual Loops", 1)
        children = node.get("Plans", [])
        own = node["Actual Total Time"] * loops - sum(
            c["Actual Total Time"] * c.get("Actual Loops", 1) for c in children
            if c.get("Parent Relationship") != "InitPlan")
        if own >= share * total:
            written = node.get("Temp Written Blocks", 0)
            nodes.append(f"{'  ' * depth}{node['Node Type']}: {own:,.0f} ms own, "
                         f"{node['Actual Rows'] * loops:,} rows" +
                         (f", {written * 8 // 1024:,} MB to temp" if written else "") +
                         (f" (workers {node['Workers Launched']})"
                          if "Workers Launched" in node else ""))
        for child in children:
            visit(child, depth + 1)

    visit(root, 0)
    return [f"{total:,.0f} ms in all"] + nodes


def _median_ms(connection: psycopg.Connection, sql: str, runs: int, cpu: bool = False
               ) -> float:
    """Median milliseconds of `sql` over `runs` runs after one to warm the cache: on the
    wall clock, or (`cpu`) of the backend process's CPU time, read from /proc."""
    clock = time.perf_counter
    if cpu:
        (pid,) = connection.execute("SELECT pg_backend_pid()").fetchone()
        tick = os.sysconf("SC_CLK_TCK")

        def clock() -> float:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / tick  # utime + stime

    connection.execute(sql).fetchall()  # warm the cache
    times = []
    for _ in range(runs):
        start = clock()
        connection.execute(sql).fetchall()
        times.append((clock() - start) * 1000)
    return statistics.median(times)


def _ratio(a: float, b: float) -> float:
    return a / b if b else float("inf")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", help="a PostgreSQL with the demo dataset (default: embedded)")
    parser.add_argument("--queries", type=int, default=200, help="distinct queries per shape")
    parser.add_argument("--draws", type=int, default=5,
                        help="noisy releases per query (a steadier median)")
    parser.add_argument("--smartnoise", help="a Python interpreter with smartnoise-sql")
    parser.add_argument("--coverage", action="store_true",
                        help="measure the error bars' coverage instead (issue 29)")
    parser.add_argument("--kinds", action="store_true",
                        help="measure instead the coverage of every column kind's error bar "
                        "(bench/accuracy_kinds.py)")
    parser.add_argument("--shape", action="append", default=[],
                        help="with --coverage: only the shapes whose name contains this")
    parser.add_argument("--cost-rows", type=int, default=1_000_000,
                        help="orders in the cost benchmark's scaled copy (0: skip it)")
    parser.add_argument("--floor", action="store_true",
                        help="only the monthly series' error floor per tau, and ratio-corrected")
    parser.add_argument("--only-person", action="store_true",
                        help="only the person-level counts and the cost (issue 29)")
    parser.add_argument("--cost-only", action="store_true",
                        help="only the cost benchmark (at --cost-rows orders)")
    parser.add_argument("--explain", action="store_true",
                        help="with the cost: the big nodes of each plan (EXPLAIN ANALYZE)")
    parser.add_argument("--cpu", action="store_true",
                        help="with the cost: the backend's CPU time, no parallel workers "
                        "(PostgreSQL on this machine)")
    parser.add_argument("--work-mem",
                        help="with the cost: run every statement, direct ones too, at this "
                        "work_mem (default: the server's)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        server = None
        dsn = args.dsn
        if dsn is None:
            import pgserver

            from proxy.demo.demo_data import load_demo_dataset

            server = pgserver.get_server(Path(directory) / "pgdata", cleanup_mode="stop")
            print("loading the demo dataset into an embedded PostgreSQL…", file=sys.stderr,
                  flush=True)
            load_demo_dataset(server.get_uri())
            dsn = server.get_uri()
        try:
            if args.floor:
                monthly_floor(dsn)
                return
            if args.coverage:
                run_coverage(dsn, args.queries, args.draws, args.shape)
                return
            if args.kinds:
                run_kinds(dsn, args.queries, args.draws)
                return
            if not args.cost_only:
                if not args.only_person:
                    run(dsn, args.queries, args.draws, args.smartnoise)
                person_level(dsn, args.queries, args.draws, args.smartnoise)
                chain(dsn, max(1, args.queries // 4), 4)
            if args.cost_rows:
                cost(dsn, args.cost_rows, explain=args.explain, work_mem=args.work_mem,
                     cpu=args.cpu)
        finally:
            if server is not None:
                server.cleanup()


if __name__ == "__main__":
    main()
