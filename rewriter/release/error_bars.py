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
    if plan.parts[index].aggregate == "sum":
        return real_noise_bound(real_noise(part, calibration), widest_shift, beta)
    if calibration.mechanism == Mechanism.GAUSSIAN:
        assert part.variance is not None
        return discrete_gaussian_bound(part.variance, 0.0, beta)
    return shifted_laplace_bound(part.scale, widest_shift, beta)


def average_interval(total: float, count: float, total_bound: float, count_bound: float,
                     bounds: tuple[float, float], centre: float | None = None
                     ) -> tuple[float, float]:
    """Where the true average lies when the noisy sum of x − m (m = `centre`, by default
    the bounds' midpoint) `total` and the noisy `count` are within `total_bound` and
    `count_bound` of the truth.

    The true mean of x − m is S/N for some S in [ŝ − a_s, ŝ + a_s] and N in
    [n̂ − a_n, n̂ + a_n] with N >= 1 (an average of rows), and lies in [lo − m, hi − m]:
    an interval computed from released values alone. With each noise bound holding with
    probability 1 − β/2, it covers the truth with probability 1 − β.
    """
    lo, hi = bounds
    centre = (lo + hi) / 2 if centre is None else centre
    smallest = max(count - count_bound, 1.0)
    if count + count_bound < smallest:
        return lo, hi
    counts = (smallest, count + count_bound)
    low = min((total - total_bound) / n for n in counts)
    high = max((total + total_bound) / n for n in counts)
    return max(centre + low, lo), min(centre + high, hi)
