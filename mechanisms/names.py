"""The noise mechanisms an analyst may choose (`SET dp.mechanism`, privacy.default_mechanism).

A StrEnum: members are the strings themselves, as written in settings, the ledger and the
question's fingerprint.
"""

from __future__ import annotations

from enum import StrEnum


class Mechanism(StrEnum):
    # The analyst's secret shift μ_u plus exact discrete Laplace noise (the default).
    SHIFTED_LAPLACE = "shifted_laplace"
    # Exact discrete Laplace noise without a shift.
    LAPLACE = "laplace"
    # Exact discrete Gaussian noise; costs a δ, not for joins of private tables.
    GAUSSIAN = "gaussian"
