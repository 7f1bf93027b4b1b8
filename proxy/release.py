"""Turn true aggregates into the noisy values an analyst receives (seed 000 mechanism)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from mechanisms.accuracy import shifted_laplace_bound
from mechanisms.laplace import laplace_scale, shifted_laplace_count
from mechanisms.random_source import RandomSource
from rewriter.plan import PrivateAggregate

from .config import PrivacySettings


@dataclass(frozen=True)
class Release:
    values: list[int]
    scales: list[float]
    bounds: list[int]


def shift_for(draw: float, scale: float, settings: PrivacySettings) -> float:
    """The analyst's location μ_u in answer units."""
    return draw * scale if settings.shift_unit == "scale" else draw


def release_counts(
    plan: PrivateAggregate,
    true_values: list[int],
    epsilon: float,
    shift_draw: float,
    settings: PrivacySettings,
    rng: RandomSource,
) -> Release:
    """Noise every count with ε split evenly across the columns (sequential composition).

    The accuracy bound uses the largest shift the configuration allows, not the analyst's
    own, so publishing it reveals nothing about μ_u.
    """
    column_epsilon = epsilon / len(plan.columns)
    widest_draw = max(abs(x) for x in settings.shift_interval)
    values, scales, bounds = [], [], []
    for column, true_value in zip(plan.columns, true_values, strict=True):
        scale = laplace_scale(column.sensitivity, column_epsilon)
        shift = shift_for(shift_draw, float(scale), settings)
        values.append(shifted_laplace_count(true_value, scale, shift, rng))
        widest = shift_for(widest_draw, float(scale), settings)
        bound = shifted_laplace_bound(float(scale), widest, 1 - settings.confidence)
        scales.append(float(scale))
        bounds.append(math.ceil(bound))
    return Release(values, scales, bounds)
