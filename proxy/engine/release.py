"""Turn the backend's true aggregates into the rows an analyst receives.

Every part gets noise at the scale the calibration fixed, shifted by the analyst's secret
location μ_u; key selection drops groups whose noisy count misses the threshold;
then HAVING, ORDER BY and LIMIT run on the noisy rows, never on true values. A plan of
choices (mode, quantiles) instead gets one row chosen by the exponential mechanism.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import cast

from mechanisms.accuracy import (
    discrete_gaussian_bound,
    real_noise_bound,
    shifted_laplace_bound,
)
from mechanisms.gaussian import gaussian_count
from mechanisms.laplace import laplace_scale, sample_discrete_laplace
from mechanisms.names import Mechanism
from mechanisms.random_source import RandomSource
from mechanisms.reals import (
    RealNoise,
    calibrate_real_gaussian,
    calibrate_real_laplace,
    noisy_real,
)
from rewriter.calibrate import Calibration, PartCalibration
from rewriter.plan import Comparison, Condition, OutputColumn, OutputKind, PrivateAggregate

from ..config import PrivacySettings
from ..pgwire import wire
from ..pgwire.backend import Row
from .choices import choice_bound, choice_type, choose


@dataclass(frozen=True)
class Release:
    columns: list[tuple[str, int]]  # (name, type OID)
    rows: list[list[str | None]]
    # visible noisy column -> accuracy bound (pure path only); for a choice, the bound
    # with its unit and the mechanism that answered
    bounds: dict[str, int | str]


def shift_for(draw: float, scale: float, settings: PrivacySettings) -> float:
    """The analyst's location μ_u in answer units."""
    return draw * scale if settings.shift_unit == "scale" else draw


def release(plan: PrivateAggregate, calibration: Calibration,
            key_types: list[int], true_rows: list[Row], shift_draw: float,
            settings: PrivacySettings, rng: RandomSource,
            columns: list[tuple[str, int]] | None = None) -> Release:
    """Noise every part of every row, select groups, then apply HAVING/ORDER BY/LIMIT.

    `columns` are the names and types PostgreSQL gives the statement as written; the
    released values are written in those types (an integer SUM as an integer).
    """
    columns = columns if columns is not None else result_columns(plan, key_types)
    if plan.parts and all(part.choice for part in plan.parts):
        chosen = choose(plan, calibration, key_types, true_rows, rng)
        rows = _post_process(plan, key_types,
                             [[_output_value(o, [], cast(list[int | float], chosen))
                               for o in plan.outputs]])
        return _released(plan, columns, rows, _choice_bounds(
            plan, calibration, len(true_rows), 1 - settings.confidence))
    noisers = _noisers(plan, calibration, shift_draw, settings, rng)
    rows = []
    for true_row in true_rows:
        keys = [None if v is None else v.decode() for v in true_row[:plan.keys]]
        drawn = [noise(raw) for noise, raw in zip(noisers, true_row[plan.keys:], strict=True)]
        unshifted = [plain for plain, _ in drawn]
        noisy = [released for _, released in drawn]
        if calibration.threshold is not None:
            assert plan.grouping is not None and plan.grouping.selection_part is not None
            # Decided on the unshifted noisy count: τ was derived for unshifted noise, and
            # the shift is a data-independent constant added afterwards.
            if unshifted[plan.grouping.selection_part] <= calibration.threshold:
                continue
        rows.append([_output_value(o, keys, noisy) for o in plan.outputs])
    if plan.occupied_by is not None:  # decided on released counts only (docs/queries.md)
        rows = [row for row in rows if row[plan.occupied_by] > 0]
    if plan.post_sql is not None:  # every output, for the statement's own expressions
        return Release(columns, [[_text(value, type_oid) for value, (_, type_oid)
                                  in zip(row, columns, strict=True)] for row in rows],
                       _bounds(plan, calibration, settings))
    return _released(plan, columns, _post_process(plan, key_types, rows),
                     _bounds(plan, calibration, settings))


def _released(plan: PrivateAggregate, columns: list[tuple[str, int]], rows: list[list],
              bounds: dict[str, int | str]) -> Release:
    visible = [i for i, o in enumerate(plan.outputs) if not o.hidden]
    types = [type_oid for _, type_oid in columns]
    text_rows = [[_text(row[i], type_oid) for i, type_oid in zip(visible, types, strict=True)]
                 for row in rows]
    return Release(columns, text_rows, bounds)


def result_columns(plan: PrivateAggregate, key_types: list[int]) -> list[tuple[str, int]]:
    """(name, type OID) of the columns sent: keys keep their type, counts are int8."""
    return [(output.name, _type_oid(output, key_types)) for output in plan.visible]


def _number(raw: bytes | None, integer: bool) -> int | Fraction:
    # An empty SUM is NULL; releasing NULL would tell that no row matched.
    if raw is None:
        return 0 if integer else Fraction(0)
    return int(raw) if integer else Fraction(Decimal(raw.decode()))


Noiser = Callable[[bytes | None], tuple[int | float, int | float]]


def _noisers(plan: PrivateAggregate, calibration: Calibration, shift_draw: float,
             settings: PrivacySettings, rng: RandomSource) -> list[Noiser]:
    """One function per part, (true text value) -> (unshifted noisy, released); the noise
    parameters are derived once per answer, not once per row."""
    shifted = calibration.mechanism == Mechanism.SHIFTED_LAPLACE
    noisers = []
    for part, calibrated in zip(plan.parts, calibration.parts, strict=True):
        shift = shift_for(shift_draw, calibrated.shift_scale, settings) if shifted else 0.0
        if part.integer:
            noisers.append(_count_noiser(calibrated, calibration.mechanism, round(shift), rng))
        else:
            noisers.append(_real_noiser(calibrated, calibration, shift, rng))
    return noisers


def _count_noiser(part: PartCalibration, mechanism: str, shift: int, rng: RandomSource
                  ) -> Noiser:
    """Exact discrete Laplace or Gaussian noise; key selection looks at the unshifted value."""
    laplace = laplace_scale(part.scale, 1.0) if part.scale and mechanism != Mechanism.GAUSSIAN \
        else None

    def noise(raw: bytes | None) -> tuple[int, int]:
        value = _number(raw, integer=True)
        if part.scale == 0:  # only public tables: nothing to protect
            plain = int(value)
        elif laplace is None:
            assert part.variance is not None
            plain = gaussian_count(int(value), part.variance, 0.0, rng)
        else:
            plain = int(value) + sample_discrete_laplace(laplace, rng)
        return plain, plain + shift
    return noise


def _real_noiser(part: PartCalibration, calibration: Calibration, shift: float,
                 rng: RandomSource) -> Noiser:
    grid = real_noise(part, calibration) if part.scale else None

    def noise(raw: bytes | None) -> tuple[float, float]:
        value = Fraction(_number(raw, integer=False))
        released = float(value) if grid is None else noisy_real(value, grid, shift, rng)
        return released, released
    return noise


def real_noise(part: PartCalibration, calibration: Calibration) -> RealNoise:
    """Grid noise for a real answer (floating-point safe, mechanisms/reals.py)."""
    if calibration.mechanism == Mechanism.GAUSSIAN:
        return calibrate_real_gaussian(part.l2_sensitivity, part.epsilon, part.delta)
    sensitivity = part.elastic_sensitivity if calibration.pure else part.smooth_sensitivity
    return calibrate_real_laplace(sensitivity, part.scale)


def _output_value(output: OutputColumn, keys: list[str | None], noisy: list[int | float]
                  ) -> str | int | float | None:
    if output.kind == OutputKind.KEY:
        return keys[output.parts[0]]
    if output.kind == OutputKind.COMPUTED:
        return None
    if output.aggregate == "avg":
        total, count = (noisy[i] for i in output.parts)
        assert output.bounds is not None
        lo, hi = output.bounds
        # Post-processing of two noisy values; a tiny or negative count says little.
        return min(max(total / count, lo), hi) if count >= 1 else None
    return noisy[output.parts[0]]


def _post_process(plan: PrivateAggregate, key_types: list[int], rows: list[list]
                  ) -> list[list]:
    post = plan.post
    if post.having is not None:
        rows = [row for row in rows if _holds(post.having, row)]
    for index, descending in reversed(post.order):
        output = plan.outputs[index]
        # Keys arrive as text: numeric ones must sort as numbers (2 before 10).
        numeric = output.kind == OutputKind.KEY and key_types[output.parts[0]] in wire.NUMBER_OIDS
        # NULLs sort last ascending and first descending, as in PostgreSQL.
        rows.sort(key=functools.partial(_sort_key_of, index, numeric), reverse=descending)
    end = None if post.limit is None else post.offset + post.limit
    return rows[post.offset:end]


def _sort_key_of(index: int, numeric: bool, row: list) -> tuple:
    return _sort_key(row[index], numeric)


def _sort_key(value: object, numeric: bool) -> tuple:
    if value is None:
        return (True, False, 0)
    if not numeric:
        return (False, False, value)
    number = Decimal(value)  # type: ignore[arg-type]
    # PostgreSQL sorts NaN above every number; comparing a Decimal NaN would raise.
    return (False, number.is_nan(), 0 if number.is_nan() else number)


def _holds(condition: Condition | Comparison, row: list) -> bool:
    if isinstance(condition, Condition):
        results = [_holds(item, row) for item in condition.items]
        if condition.op == "not":
            return not results[0]
        return all(results) if condition.op == "and" else any(results)
    left = row[int(condition.left)] if condition.left_is_column else condition.left
    right = row[int(condition.right)] if condition.right_is_column else condition.right
    if left is None or right is None:
        return False
    try:
        left, right = _comparable(left, right)
    except ValueError:
        return False
    return {"=": left == right, "<>": left != right, "<": left < right, "<=": left <= right,
            ">": left > right, ">=": left >= right}[condition.op]


def _comparable(left: object, right: object) -> tuple:
    if isinstance(left, (int, float)) or isinstance(right, (int, float)):
        return float(left), float(right)  # type: ignore[arg-type]
    return str(left), str(right)


def _type_oid(output: OutputColumn, key_types: list[int]) -> int:
    if output.kind == OutputKind.KEY:
        return key_types[output.parts[0]]
    if output.kind == OutputKind.CHOICE:
        return choice_type(output, key_types)
    if output.kind == OutputKind.COMPUTED:
        return wire.TEXT_OID
    return wire.INT8_OID if output.aggregate in ("count", "count_distinct") else wire.NUMERIC_OID


def _text(value: object, type_oid: int) -> str | None:
    """A released value in the text form of its column's type."""
    if value is None:
        return None
    if isinstance(value, (int, float)) and type_oid in wire.INTEGER_OIDS:
        return str(round(value))
    if isinstance(value, float) and type_oid not in wire.FLOAT_OIDS:
        return repr(round(value, 6))
    return str(value) if not isinstance(value, float) else repr(value)


def _choice_bounds(plan: PrivateAggregate, calibration: Calibration, candidates: int,
                   beta: float) -> dict[str, int | str]:
    """The exponential mechanism's bounds: in count for a mode, in rank for a quantile."""
    bounds: dict[str, int | str] = {}
    for output in plan.visible:
        bound = choice_bound(plan, calibration, output, candidates, beta)
        if bound is not None:
            bounds[output.name] = bound
    return bounds


def _bounds(plan: PrivateAggregate, calibration: Calibration,
            settings: PrivacySettings) -> dict[str, int | str]:
    """Accuracy bounds at the configured confidence, for counts and sums on the pure path.

    On the smooth path the scale depends on the data, so it is not shown. The bound uses
    the widest shift the configuration allows, never the analyst's own.
    """
    if not calibration.pure:
        return {}
    shifted = calibration.mechanism == Mechanism.SHIFTED_LAPLACE
    widest_draw = max(abs(x) for x in settings.shift_interval) if shifted else 0.0
    beta = 1 - settings.confidence
    bounds: dict[str, int | str] = {}
    for output in plan.visible:
        if output.kind != OutputKind.NOISY or output.aggregate == "avg":
            continue
        part = calibration.parts[output.parts[0]]
        widest = shift_for(widest_draw, part.shift_scale, settings)
        if part.scale == 0:
            bound = 0.0
        elif plan.parts[output.parts[0]].aggregate == "sum":
            bound = real_noise_bound(real_noise(part, calibration), widest, beta)
        elif calibration.mechanism == Mechanism.GAUSSIAN:
            assert part.variance is not None
            bound = discrete_gaussian_bound(part.variance, 0.0, beta)
        else:
            bound = shifted_laplace_bound(part.scale, widest, beta)
        bounds[output.name] = math.ceil(bound)
    return bounds
