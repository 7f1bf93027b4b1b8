"""Turn the backend's true aggregates into the rows an analyst receives.

Every part gets noise at the scale the calibration fixed, shifted by the analyst's secret
location μ_u; key selection drops groups whose noisy count misses the threshold;
then HAVING, ORDER BY and LIMIT run on the noisy rows, never on true values. A plan of
choices (mode, quantiles) instead gets one row chosen by the exponential mechanism.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal
from fractions import Fraction

from mechanisms.accuracy import real_noise_bound
from mechanisms.gaussian import gaussian_count
from mechanisms.laplace import laplace_scale, sample_discrete_laplace
from mechanisms.names import Mechanism
from mechanisms.random_source import RandomSource
from mechanisms.reals import noisy_real
from rewriter.plan import Comparison, Condition, OutputColumn, OutputKind, PrivateAggregate
from rewriter.release.error_bars import average_interval, noise_bound, real_noise
from rewriter.sensitivity.calibrate import Calibration, PartCalibration

from ..config import PrivacySettings
from ..pgwire import wire
from ..pgwire.backend import Row
from .bounded_sums import Drawn, Noiser, bounded_sum_noiser
from .choices import choice_bound, choice_type, choose
from .chosen_bound import (
    CountAtBound,
    count_at_bound,
    count_bound,
    count_ends,
    count_note,
    scaled_to_total,
    shape_bound,
    truncation_allowance,
)
from .computed_errors import computed_bounds
from .weighted_sums import sums_at_bound, weights_note


@dataclass(frozen=True)
class Release:
    columns: list[tuple[str, int]]  # (name, type OID)
    rows: list[list[str | None]]
    # visible column's label (plan.labels) -> accuracy bound (pure path only); for a
    # choice, the bound with its unit and the mechanism that answered
    bounds: dict[str, int | str]
    # A unit-mode count answered at a τ of its own: what the NOTICE says of τ.
    unit_note: str | None = None


# PostgreSQL's FirstNormalObjectId: the OIDs of types made in the database (enums…).
_FIRST_USER_OID = 16384

# PostgreSQL's SUM and AVG over no value are NULL: here when the noisy count of the values
# (before the analyst's shift, a data-independent constant, as key selection) is below
# this. One rule for both, so a SUM and an AVG sharing one count agree.
PRESENT = 0.5


def shift_for(draw: float, scale: float, settings: PrivacySettings) -> float:
    """The analyst's location μ_u in answer units."""
    return draw * scale if settings.shift_unit == "scale" else draw


def release(plan: PrivateAggregate, calibration: Calibration,
            key_types: list[int], true_rows: Sequence[Row], shift_draw: float,
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
                             [[chosen[o.parts[0]] if o.kind == OutputKind.CHOICE else None
                               for o in plan.outputs]])
        return _released(plan, columns, rows, _choice_bounds(
            plan, calibration, len(true_rows), 1 - settings.confidence))
    count = None
    if plan.unit is not None and plan.unit.counts_cap is not None:
        count = count_at_bound(plan, calibration, true_rows, settings, rng)
    elif plan.unit is not None and plan.unit.weights_cap is not None:
        count = sums_at_bound(plan, calibration, true_rows, settings, rng)
    if count is not None:
        true_rows, calibration = count.rows, count.calibration
    noisers = _noisers(plan, calibration, shift_draw, settings, rng, true_rows,
                       count.resolution if count is not None else 1)
    errors = _RowErrors.of(plan, calibration, settings, count)
    draws = [[noise(raw) for noise, raw in zip(noisers, true_row[plan.keys:], strict=True)]
             for true_row in true_rows]
    shape: list[float] | None = None
    if count is not None and count.total is not None:  # the shape cells, then × total
        shape = errors.shape = [drawn[0].plain for drawn in draws]
        draws = [[Drawn(round(value), round(value) + drawn[0].released - drawn[0].plain)]
                 for value, drawn in zip(scaled_to_total(count, shape), draws, strict=True)]
    rows, drawn_rows = [], []
    for true_row, drawn in zip(true_rows, draws, strict=True):
        keys = [None if v is None else v.decode() for v in true_row[:plan.keys]]
        if calibration.threshold is not None:
            assert plan.grouping is not None and plan.grouping.selection_part is not None
            # Decided on the unshifted noisy count: τ was derived for unshifted noise, and
            # the shift is a data-independent constant added afterwards.
            if drawn[plan.grouping.selection_part].plain <= calibration.threshold:
                continue
        row = [_output_value(o, keys, drawn, calibration) for o in plan.outputs]
        errors.widen(row, drawn)
        rows.append(row)
        drawn_rows.append(drawn)
    pairs = list(zip(rows, drawn_rows, strict=True))
    if plan.grouping is not None and (occupied := plan.grouping.occupied_by) is not None:
        # released counts only (queries.md)
        pairs = [(row, drawn) for row, drawn in pairs if row[occupied] > 0]
        rows = [row for row, _ in pairs]
    bounds = _bounds(plan, calibration, settings, count) | errors.bounds()
    if count is not None and shape is not None:  # each visible count (its one part)
        bar = shape_bound(count, shape, widest_shift(calibration, 0, settings),
                          1 - settings.confidence)
        bounds |= {label: bar for o, label in zip(plan.visible, plan.labels, strict=True)
                   if o.kind == OutputKind.NOISY}
    if plan.post_sql is not None:  # every output, for the statement's own expressions
        bounds |= computed_bounds(plan, pairs, errors.interval, 1 - settings.confidence,
                                  _rounded_up,
                                  [type_oid in wire.INTEGER_OIDS for _, type_oid in columns])
        answer = Release(columns, [[_text(value, type_oid) for value, (_, type_oid)
                                    in zip(row, columns, strict=True)] for row in rows],
                         bounds)
    else:
        answer = _released(plan, columns, _post_process(plan, key_types, rows), bounds)
    if count is None:
        return answer
    return replace(answer, unit_note=weights_note(plan, count) if plan.unit is not None and
                   plan.unit.weights_cap is not None else count_note(plan, count))


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


def _noisers(plan: PrivateAggregate, calibration: Calibration, shift_draw: float,
             settings: PrivacySettings, rng: RandomSource, true_rows: Sequence[Row],
             resolution: int = 1) -> list[Noiser]:
    """One function per part, (true text value) -> Drawn; the noise parameters are derived
    once per answer, not once per row (a sum with bounds chosen at release: its bounds
    once, from all of `true_rows`' buckets together, then its noise per row).
    Counts given in steps of 1/`resolution` (a chosen histogram's cells) are noised in
    those steps and released rounded to whole rows."""
    shifted = calibration.mechanism == Mechanism.SHIFTED_LAPLACE
    # Rows listed whatever the data (a declared domain's keys, or one): how many groups a
    # choice of clamping bounds weighs its noise for; under key selection, which groups
    # exist is private, so it weighs one.
    groups = 1 if plan.grouping is not None and plan.grouping.key_selection else \
        max(len(true_rows), 1)
    noisers = []
    for index, (part, calibrated) in enumerate(zip(plan.parts, calibration.parts,
                                                   strict=True)):
        shift = shift_for(shift_draw, calibrated.shift_scale, settings) if shifted else 0.0
        if part.edges is not None:
            noisers.append(bounded_sum_noiser(
                part, calibrated, calibration, shift, settings.bounds_share,
                1 - settings.confidence, rng, [row[plan.keys + index] for row in true_rows],
                groups))
        elif part.integer:
            noisers.append(_count_noiser(calibrated, calibration.mechanism, round(shift),
                                          rng, resolution))
        else:
            noisers.append(_real_noiser(calibrated, calibration, shift, rng))
    return noisers


def _count_noiser(part: PartCalibration, mechanism: str, shift: int, rng: RandomSource,
                  resolution: int = 1) -> Noiser:
    """Exact discrete Laplace or Gaussian noise; key selection looks at the unshifted value.
    At a resolution Q > 1 the value and the noise are in steps of 1/Q (the noise's scale
    Q·b), and their sum is rounded to whole rows: post-processing."""
    laplace = laplace_scale(part.scale * resolution, 1.0) \
        if part.scale and mechanism != Mechanism.GAUSSIAN else None

    def noise(raw: bytes | None) -> Drawn:
        value = _number(raw, integer=True)
        if part.scale == 0:  # only public tables: nothing to protect
            plain = int(value)
        elif laplace is None:
            assert part.variance is not None
            plain = gaussian_count(int(value), part.variance, 0.0, rng)
        else:
            plain = int(value) + sample_discrete_laplace(laplace, rng)
            if resolution > 1:
                plain = round(Fraction(plain, resolution))
        return Drawn(plain, plain + shift)
    return noise


def _real_noiser(part: PartCalibration, calibration: Calibration, shift: float,
                 rng: RandomSource) -> Noiser:
    grid = real_noise(part, calibration) if part.scale else None

    def noise(raw: bytes | None) -> Drawn:
        value = Fraction(_number(raw, integer=False))
        released = float(value) if grid is None else noisy_real(value, grid, shift, rng)
        return Drawn(released if grid is None else released - shift, released)
    return noise


def _output_value(output: OutputColumn, keys: list[str | None], drawn: list[Drawn],
                  calibration: Calibration) -> str | int | float | None:
    if output.kind == OutputKind.KEY:
        return keys[output.parts[0]]
    if output.kind == OutputKind.COMPUTED:
        return None
    if output.aggregate == "avg":
        total, count = (drawn[i] for i in output.parts)
        assert output.bounds is not None
        lo, hi = output.bounds
        # Post-processing of two noisy values: the sum is of x − m, m the midpoint of the
        # bounds (declared, or chosen at release), so a noisy sum far off moves the answer
        # from m, not from 0; a tiny or negative count says little. Dividing by at least
        # the count's noise scale keeps a noisy count near 0 from throwing the mean to a
        # bound: the answer shrinks towards m instead (a larger count is unaffected).
        if count.plain < PRESENT:
            return None
        floor = calibration.parts[output.parts[1]].scale
        mean = _centre(output, total) + total.released / max(count.released, floor)
        return min(max(mean, lo), hi)
    if output.aggregate in ("count", "count_distinct"):
        # No count is negative: 0 is closer to the truth than any noisy value below it.
        return max(drawn[output.parts[0]].released, 0)
    if output.present is not None and drawn[output.present].plain < PRESENT:
        return None
    return drawn[output.parts[0]].released


def _centre(output: OutputColumn, total: Drawn) -> float:
    """The m an AVG's noisy sum of x − m is centred on."""
    if total.chosen is not None:
        return float(total.chosen.centre)
    assert output.bounds is not None
    return (output.bounds[0] + output.bounds[1]) / 2


def _post_process(plan: PrivateAggregate, key_types: list[int], rows: list[list]
                  ) -> list[list]:
    post = plan.post
    ranks = {index: _first_seen(rows, index) for index, _ in post.order
             if _in_backend_order(plan, key_types, index)}
    if post.having is not None:
        rows = [row for row in rows if _holds(post.having, row)]
    for index, descending in reversed(post.order):
        output = plan.outputs[index]
        # Keys arrive as text: numeric ones must sort as numbers (2 before 10).
        numeric = output.kind == OutputKind.KEY and key_types[output.parts[0]] in wire.NUMBER_OIDS
        # NULLs sort last ascending and first descending, as in PostgreSQL.
        key = functools.partial(_rank_of, index, ranks[index]) if index in ranks else \
            functools.partial(_sort_key_of, index, numeric)
        rows.sort(key=key, reverse=descending)
    end = None if post.limit is None else post.offset + post.limit
    return rows[post.offset:end]


def _in_backend_order(plan: PrivateAggregate, key_types: list[int], index: int) -> bool:
    """Whether output `index` is a key of a type made in the database (an enum), listed
    from its declared domain: such a type sorts in its own order, not its labels', and the
    backend lists a domain's keys in that order (rewrite.py's ORDER BY)."""
    output = plan.outputs[index]
    return (output.kind == OutputKind.KEY and key_types[output.parts[0]] >= _FIRST_USER_OID
            and not (plan.grouping is not None and plan.grouping.key_selection))


def _first_seen(rows: list[list], index: int) -> dict[object, int]:
    """Each value of column `index` by where it first appears: the keys' order when the
    rows are every combination of the domains' keys, sorted (rewrite.py)."""
    ranks: dict[object, int] = {}
    for row in rows:
        ranks.setdefault(row[index], len(ranks))
    return ranks


def _rank_of(index: int, ranks: dict[object, int], row: list) -> tuple:
    return (row[index] is None, ranks[row[index]])


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
    for output, label in zip(plan.visible, plan.labels, strict=True):
        bound = choice_bound(plan, calibration, output, candidates, beta)
        if bound is not None:
            bounds[label] = bound
    return bounds


def _bounds(plan: PrivateAggregate, calibration: Calibration,
            settings: PrivacySettings, count: CountAtBound | None = None
            ) -> dict[str, int | str]:
    """Accuracy bounds at the configured confidence, for counts and sums on the pure path.

    On the smooth path the scale depends on the data, so it is not shown. The bound uses
    the widest shift the configuration allows, never the analyst's own.
    """
    if not calibration.pure:
        return {}
    beta = 1 - settings.confidence
    bounds: dict[str, int | str] = {}
    for output, label in zip(plan.visible, plan.labels, strict=True):
        if output.kind != OutputKind.NOISY or _per_row(plan, output):
            continue  # _RowErrors
        widest = widest_shift(calibration, output.parts[0], settings)
        if count is not None and plan.unit is not None and plan.unit.weights_cap is not None:
            # β/2 for the noise, β/2 for the rows beyond τ (none at a fixed τ: not released)
            rows = truncation_allowance(count, beta / 2)
            noise = noise_bound(plan, calibration, output.parts[0], widest,
                                beta / 2 if count.chosen else beta)
            bounds[label] = math.ceil(noise + rows * _magnitude(output))
            continue
        if count is not None and calibration.mechanism != Mechanism.GAUSSIAN:
            assert plan.unit is not None and plan.unit.counts_cap is not None
            bounds[label] = count_bound(count, widest, beta)
            continue
        bounds[label] = math.ceil(
            noise_bound(plan, calibration, output.parts[0], widest, beta))
    return bounds


def widest_shift(calibration: Calibration, index: int, settings: PrivacySettings) -> float:
    """The widest analyst shift the configuration allows, in part `index`'s units."""
    if calibration.mechanism != Mechanism.SHIFTED_LAPLACE:
        return 0.0
    widest_draw = max(abs(x) for x in settings.shift_interval)
    return shift_for(widest_draw, calibration.parts[index].shift_scale, settings)


@dataclass
class _RowErrors:
    """Error bars that depend on each row (pure path): an AVG's (its interval,
    error_bars.average_interval, from the released noisy sum and count), a sum's whose
    bounds were chosen at release (its row's noise and the bias of the chosen bounds),
    and any noisy output's interval at a given β, for the statement's own expressions
    over them (computed_errors.py). The NOTICE gives the widest distance from a released
    value to its interval's ends."""

    plan: PrivateAggregate
    calibration: Calibration
    settings: PrivacySettings
    outputs: list[tuple[int, str, OutputColumn]]  # visible AVGs and bucketed sums, labelled
    widths: dict[str, float]
    count: CountAtBound | None = None
    noises: dict[tuple[int, float], float] = field(default_factory=dict)
    # The shape × total estimator's shape cells (chosen_bound.py), once drawn.
    shape: list[float] | None = None

    @classmethod
    def of(cls, plan: PrivateAggregate, calibration: Calibration,
           settings: PrivacySettings, count: CountAtBound | None = None) -> _RowErrors:
        visible = [index for index, output in enumerate(plan.outputs) if not output.hidden]
        outputs = [(index, label, plan.outputs[index])
                   for index, label in zip(visible, plan.labels, strict=True)
                   if calibration.pure and plan.outputs[index].kind == OutputKind.NOISY and
                   _per_row(plan, plan.outputs[index])]
        return cls(plan, calibration, settings, outputs, {}, count)

    @property
    def _weighed(self) -> bool:
        """Weighted unit mode at a chosen τ: half of each β goes to the rows beyond τ the
        interval allows for, the other half to the noise as before."""
        count, unit = self.count, self.plan.unit
        return count is not None and count.chosen and unit is not None and \
            unit.weights_cap is not None

    def _beyond(self, beta: float) -> float:
        if not self._weighed:
            return 0.0
        assert self.count is not None
        return truncation_allowance(self.count, beta / 2)

    def widen(self, row: list, drawn: list[Drawn]) -> None:
        """Take in one released row (plan.outputs' values) and its drawn parts."""
        beta = 1 - self.settings.confidence
        share = 1 / 2 if self._weighed else 1.0
        for index, label, output in self.outputs:
            released = row[index]
            if released is None:
                continue
            if output.aggregate == "avg":
                low, high = self._average(output, drawn, beta)
                width = max(released - low, high - released, 0.0)
            else:
                width = self._sum(output.parts[0], drawn[output.parts[0]], beta * share / 2) \
                    + self._beyond(beta) * _magnitude(output)
            self.widths[label] = max(self.widths.get(label, 0.0), width)

    def interval(self, output: OutputColumn, released: object, drawn: list[Drawn],
                 beta: float) -> tuple[float, float] | None:
        """Where the truth of a noisy output lies with probability ≥ 1 − β, given its
        released value: the noise (and, at a chosen τ, the rows beyond it, each within
        the value's bounds), clipped to the signs the bounds allow (a count is ≥ 0)."""
        if released is None or not self.calibration.pure:
            return None
        if output.aggregate == "avg":
            return self._average(output, drawn, beta)
        value, index = float(released), output.parts[0]  # type: ignore[arg-type]
        share = 1 / 2 if self._weighed else 1.0
        widest = widest_shift(self.calibration, index, self.settings)
        unit = self.plan.unit
        if self.plan.parts[index].edges is not None:
            below = above = self._sum(index, drawn[index], beta * share / 2)
        elif self.count is not None and self.count.total is not None:
            below = above = self._shape_bound(beta)
        elif self.count is not None and unit is not None and unit.counts_cap is not None \
                and self.calibration.mechanism != Mechanism.GAUSSIAN:
            below, above = count_ends(self.count, widest, beta)
        else:
            below = above = self._noise(index, beta * share)
        lo, hi = output.bounds if output.bounds is not None else (0.0, 1.0)
        beyond = self._beyond(beta)
        low, high = value - below + beyond * min(lo, 0.0), value + above + beyond * max(hi, 0.0)
        return (max(low, 0.0) if lo >= 0 else low), (min(high, 0.0) if hi <= 0 else high)

    def _average(self, output: OutputColumn, drawn: list[Drawn], beta: float
                 ) -> tuple[float, float]:
        total, count = output.parts
        share = 1 / 2 if self._weighed else 1.0
        # β/2 each for the sum and the count; with chosen bounds, half of that is the
        # sum's noise and the other half the count's, β/2 being the bounds' bias.
        share *= 1 / 4 if drawn[total].chosen is not None else 1 / 2
        count_bound = self._noise(count, beta * share)
        assert output.bounds is not None
        return average_interval(drawn[total].released, drawn[count].released,
                                self._sum(total, drawn[total], beta * share), count_bound,
                                output.bounds, _centre(output, drawn[total]),
                                self._beyond(beta))

    def _sum(self, index: int, drawn: Drawn, beta: float) -> float:
        """The error of a sum part at β, plus the bias of its chosen bounds."""
        if drawn.chosen is None:
            return self._noise(index, beta)
        widest = widest_shift(self.calibration, index, self.settings)
        noise = real_noise_bound(drawn.grid, widest, beta) if drawn.grid is not None else 0.0
        return noise + float(max(drawn.chosen.bias_low, drawn.chosen.bias_high))

    def _noise(self, index: int, beta: float) -> float:
        """Part `index`'s noise bound at β and the widest shift: the same for every row,
        so worked out once (a real grid calibrates each time it is asked)."""
        if (index, beta) not in self.noises:
            self.noises[index, beta] = noise_bound(
                self.plan, self.calibration, index,
                widest_shift(self.calibration, index, self.settings), beta)
        return self.noises[index, beta]

    def _shape_bound(self, beta: float) -> float:
        """A shape × total cell's widest half-width at β (the same for every cell)."""
        assert self.count is not None and self.shape is not None
        if (-1, beta) not in self.noises:  # -1: no part's own, the cells' together
            self.noises[-1, beta] = shape_bound(
                self.count, self.shape, widest_shift(self.calibration, 0, self.settings), beta)
        return self.noises[-1, beta]

    def bounds(self) -> dict[str, int | str]:
        return {name: _rounded_up(width) for name, width in self.widths.items()}


def _magnitude(output: OutputColumn) -> float:
    """The most one row moves the output's truth: 1 for a count, max(|lo|, |hi|) for a
    sum (the declared bounds: a row beyond τ may hold any value within them)."""
    if output.bounds is None:
        return 1.0
    return max(abs(output.bounds[0]), abs(output.bounds[1]))


def _per_row(plan: PrivateAggregate, output: OutputColumn) -> bool:
    """Whether the output's error bar depends on its row's released values."""
    return output.aggregate == "avg" or plan.parts[output.parts[0]].edges is not None


def _rounded_up(width: float) -> int | str:
    """A width for the NOTICE, rounded up: to an integer from 10, else to two digits."""
    if width >= 10:
        return math.ceil(width)
    if width == 0:
        return 0
    digits = 1 - math.floor(math.log10(width))
    return f"{math.ceil(width * 10**digits) / 10**digits:g}"
