"""Creating analysts: a SCRAM verifier and a secret shift drawn once (shifted Laplace)."""

from __future__ import annotations

from accounting import Analyst, Ledger, ScramVerifier
from mechanisms.random_source import SecureRandomSource, uniform

from ..config import PrivacySettings
from ..pgwire.auth import scram_keys


def create_analyst(
    ledger: Ledger, name: str, password: str, epsilon: float, delta: float,
    privacy: PrivacySettings,
) -> Analyst:
    """Store a new analyst; the shift μ_u is drawn from a secure source and never shown."""
    if not name or epsilon <= 0 or delta < 0:
        raise ValueError("an analyst needs a name, a positive epsilon and a delta >= 0")
    analyst = Analyst(
        name=name,
        verifier=ScramVerifier(*scram_keys(password)),
        epsilon_total=epsilon,
        delta_total=delta,
        shift=draw_shift(privacy),
    )
    ledger.add_analyst(analyst)
    return analyst


def draw_shift(privacy: PrivacySettings) -> float:
    """A fresh secret shift μ_u, uniform over the configured interval, from a secure source."""
    low, high = privacy.shift_interval
    return uniform(low, high, SecureRandomSource())
