"""Answers of the exponential mechanism: a mode or a quantile chosen from the backend's
count per candidate (the rows are described on rewriter.plan.PrivateAggregate), their
type and their accuracy. Nothing is added to a number, so there is no shift."""

from __future__ import annotations

import math
from collections.abc import Sequence

from mechanisms.accuracy import mode_bound, quantile_rank_bound
from mechanisms.exponential import private_mode, quantile_from_counts
from mechanisms.random_source import RandomSource
from rewriter.plan import OutputColumn, PrivateAggregate
from rewriter.sensitivity.calibrate import Calibration, choice_epsilon

from ..pgwire import wire
from ..pgwire.backend import Row

# Answers that are values of the column in PostgreSQL (percentile_cont interpolates).
_VALUE_AGGREGATES = ("min", "max", "percentile_disc")


def choose(plan: PrivateAggregate, calibration: Calibration, key_types: list[int],
           true_rows: Sequence[Row], rng: RandomSource
           ) -> list[str | int | float | None]:
    """One chosen value per part, each with its own share of ε, from the secure source."""
    aggregates = {output.parts[0]: output.aggregate for output in plan.outputs}
    values: list[str | int | float | None] = []
    for index, (part, calibrated) in enumerate(zip(plan.parts, calibration.parts,
                                                   strict=True)):
        epsilon = choice_epsilon(calibrated.epsilon, part)
        if part.aggregate == "mode":
            counts = {_text(row[0]): int(_text(row[1])) for row in true_rows}
            # An empty domain is public knowledge (it is the policy's), so NULL tells nothing.
            values.append(private_mode(counts, epsilon, rng) if counts else None)
            continue
        assert part.grid is not None and part.level is not None
        cells = {int(_text(row[1])): int(_text(row[2])) for row in true_rows}
        value = quantile_from_counts(cells, part.level, part.grid, epsilon, rng)
        # Rounding the released point of an integer column is post-processing.
        integer = aggregates[index] in _VALUE_AGGREGATES and key_types[0] in wire.INTEGER_OIDS
        values.append(round(value) if integer else value)
    return values


def choice_type(output: OutputColumn, key_types: list[int]) -> int:
    """The type PostgreSQL would give the answer: the key's for a mode, float8 for
    percentile_cont (and median), the column's numeric type otherwise."""
    if output.aggregate == "mode":
        return key_types[0]
    # A number type is kept; others (a date, say) are released as NUMERIC.
    if output.aggregate in _VALUE_AGGREGATES and key_types[0] in wire.NUMBER_OIDS:
        return key_types[0]
    return wire.FLOAT8_OID if output.aggregate == "percentile_cont" else wire.NUMERIC_OID


def choice_bound(plan: PrivateAggregate, calibration: Calibration, output: OutputColumn,
                 candidates: int, beta: float) -> str | None:
    """The accuracy clause of the NOTICE, naming the mechanism that answered."""
    part = plan.parts[output.parts[0]]
    epsilon = choice_epsilon(calibration.parts[output.parts[0]].epsilon, part)
    if part.aggregate == "mode":
        if not candidates:
            return None
        gap = math.ceil(mode_bound(epsilon, candidates, beta))
        return (f"{gap} (exponential mechanism over {candidates} values: the count of the "
                f"value chosen is within {gap} of the largest)")
    assert part.grid is not None and part.level is not None
    ranks = math.ceil(quantile_rank_bound(epsilon, part.level, part.grid, beta))
    high = part.grid.value(part.grid.points - 1)
    # An interval in values would need the data (how far apart the values near that rank
    # lie): what is stated is the rank of the grid point released, the rows snapped to it.
    return (f"{ranks} in rank (exponential mechanism on {part.grid.points} grid points of "
            f"[{float(part.grid.lo):g}, {float(high):g}]): give or take half a grid step "
            f"({float(part.grid.step / 2):.3g}), the value released has p·n ± {ranks} of the "
            "n rows below it (rows equal to it counted either way); an interval in values "
            "would depend on the data, so none is stated")


def _text(raw: bytes | None) -> str:
    assert raw is not None, "candidates and their counts are never NULL"
    return raw.decode()
