"""The dashboard's plots, drawn on the server with matplotlib as inline SVG (no script,
no external resource: the page works offline and under a strict Content-Security-Policy).

Figures are built with matplotlib's object API, not pyplot, so that threads drawing at
once share no state.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from datetime import datetime

import matplotlib

matplotlib.use("Agg")
from matplotlib.dates import AutoDateLocator, ConciseDateFormatter  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

WIDTH, HEIGHT = 7.5, 3.2  # inches, at matplotlib's 72 points per inch for SVG
matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text: readable, searchable


def _svg(figure: Figure) -> str:
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", bbox_inches="tight")
    text = buffer.getvalue()
    return text[text.index("<svg"):]  # drop the XML prolog and DOCTYPE: inline in HTML


def spend_over_time(series: dict[str, tuple[list[datetime], list[float]]],
                    budgets: dict[str, float], until: datetime) -> str:
    """Cumulative ε spent per analyst, a step at each charge, from 0 until `until`. A
    budget is drawn as a dashed line of the analyst's colour when it is near enough to
    show the spend beside it; otherwise the legend gives it."""
    figure = Figure(figsize=(WIDTH, HEIGHT))
    axes = figure.add_subplot()
    top = max((spent[-1] for _, spent in series.values()), default=0.0)
    for name, (times, spent) in sorted(series.items()):
        budget = budgets.get(name)
        near = budget is not None and budget <= 3 * top
        label = name if budget is None or near else f"{name} (budget {budget:g})"
        # Datetimes go through matplotlib's date converter, which its stubs do not know.
        line, = axes.step([times[0], *times, until],  # type: ignore[arg-type]
                          [0.0, *spent, spent[-1]], where="post", label=label, linewidth=1.8)
        if near and budget is not None:
            axes.axhline(budget, color=line.get_color(), linestyle="--", linewidth=0.9)
    if not series:
        axes.text(0.5, 0.5, "no charge yet", ha="center", va="center",
                  transform=axes.transAxes)
    else:
        locator = AutoDateLocator()
        axes.xaxis.set_major_locator(locator)
        axes.xaxis.set_major_formatter(ConciseDateFormatter(locator))
        axes.legend(loc="upper left", fontsize="small")
    axes.set_ylabel("ε spent")
    axes.set_ylim(bottom=0)
    axes.grid(alpha=0.3)
    return _svg(figure)


def bars(labels: Sequence[str], values: Sequence[float], ylabel: str, empty: str,
         color: str = "#4878a8") -> str:
    """A bar chart (answers per minute, refusals by reason)."""
    figure = Figure(figsize=(WIDTH, HEIGHT))
    axes = figure.add_subplot()
    if values:
        axes.bar(range(len(values)), values, color=color)
        axes.set_xticks(range(len(labels)), labels, rotation=45, ha="right",
                        fontsize="small")
    else:
        axes.text(0.5, 0.5, empty, ha="center", va="center", transform=axes.transAxes)
        axes.set_xticks([])
    axes.set_ylabel(ylabel)
    axes.grid(axis="y", alpha=0.3)
    return _svg(figure)


def budget_bars(names: Sequence[str], spent: Sequence[float], left: Sequence[float]) -> str:
    """Each analyst's budget as one horizontal bar: spent, then left."""
    figure = Figure(figsize=(WIDTH, max(1.6, 0.45 * len(names) + 0.9)))
    axes = figure.add_subplot()
    axes.barh(names, spent, color="#c0504d", label="spent")
    axes.barh(names, left, left=spent, color="#9bbb59", label="left")
    axes.set_xlabel("ε")
    axes.invert_yaxis()
    axes.legend(loc="lower right", fontsize="small")
    return _svg(figure)
