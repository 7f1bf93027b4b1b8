"""Error bars of released columns: how far a released value may be from the truth.

Pure functions of public quantities (the calibration, the confidence, the widest shift the
configuration allows) and, for an average, of the released noisy sum and count: never of
the data itself. release.py puts them in the NOTICE and SHOW dp.last_answers; explain.py
reports them for a statement before it runs.
"""

from __future__ import annotations

from mechanisms.accuracy import discrete_gaussian_bound, real_noise_bound, shifted_laplace_bound
from mechanisms.names import Mechanism
from mechanisms.reals import RealNoise, calibrate_real_gaussian, calibrate_real_laplace

from ..plan import PrivateAggregate
from ..sensitivity.calibrate import Calibration, PartCalibration


def real_noise(part: PartCalibration, calibration: Calibration) -> RealNoise:
    """Grid noise for a real answer (floating-point safe, mechanisms/reals.py)."""
    if calibration.mechanism == Mechanism.GAUSSIAN:
        return calibrate_real_gaussian(part.l2_sensitivity, part.epsilon, part.delta)
    sensitivity = part.elastic_sensitivity if calibration.pure else part.smooth_sensitivity
    return calibrate_real_laplace(sensitivity, part.scale)


def noise_bound(plan: PrivateAggregate, calibration: Calibration, index: int,
                widest_shift: float, beta: float) -> float:
    """α with P(|released − true| > α) <= β for part `index` (pure path), whatever the
    analyst's shift within ±`widest_shift` (in the part's own units)."""
    part = calibration.parts[index]
    if part.scale == 0:
        return 0.0
    if plan.parts[index].aggregate == "sum" or plan.parts[index].weighted:
        return real_noise_bound(real_noise(part, calibration), widest_shift, beta)
    if calibration.mechanism == Mechanism.GAUSSIAN:
        assert part.variance is not None
        return discrete_gaussian_bound(part.variance, 0.0, beta)
    return shifted_laplace_bound(part.scale, widest_shift, beta)


def average_interval(total: float, count: float, total_bound: float, count_bound: float,
                     bounds: tuple[float, float], centre: float | None = None,
                     beyond: float = 0.0) -> tuple[float, float]:
    """Where the true average lies when the noisy sum of x − m (m = `centre`, by default
    the bounds' midpoint) `total` and the noisy `count` are within `total_bound` and
    `count_bound` of the truth, and at most `beyond` rows (each within the bounds) were
    left out of both.

    The true mean of x − m is S/N for some S in [ŝ − a_s, ŝ + a_s] and N in
    [n̂ − a_n, n̂ + a_n] with N >= 1 (an average of rows), and lies in [lo − m, hi − m]:
    an interval computed from released values alone. With each noise bound holding with
    probability 1 − β/2, it covers the truth with probability 1 − β. D rows left out add
    D·(lo − m) to D·(hi − m) to S and D to N; (S + a·D)/(N + D) is monotone in D, so the
    ends are reached at D = 0 or D = `beyond`.
    """
    lo, hi = bounds
    centre = (lo + hi) / 2 if centre is None else centre
    ends = [_interval(total, count, total_bound, count_bound, lo - centre, hi - centre, d)
            for d in ((0.0, beyond) if beyond > 0 else (0.0,))]
    return (max(centre + min(low for low, _ in ends), lo),
            min(centre + max(high for _, high in ends), hi))


def _interval(total: float, count: float, total_bound: float, count_bound: float,
              low_value: float, high_value: float, beyond: float) -> tuple[float, float]:
    """The centred mean's range with `beyond` rows of values in [low_value, high_value]
    added to the sum and the count; the whole range when the count says nothing."""
    smallest = max(count - count_bound, 1.0) + beyond
    largest = count + count_bound + beyond
    if largest < smallest:
        return low_value, high_value
    low = min((total - total_bound + beyond * low_value) / n for n in (smallest, largest))
    high = max((total + total_bound + beyond * high_value) / n for n in (smallest, largest))
    return low, high
