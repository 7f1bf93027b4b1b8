"""The mathematics of noise: pure functions plus an injectable random source.

- samplers: `laplace` and `gaussian` (exact discrete noise for integers), `reals` (real
  answers on a power-of-two grid), `exponential` (the exponential mechanism),
  `random_source` (secure randomness) and `seeded_source` (reproducible, for tests and
  experiments only), `numbers` (exact rational parameters).
- calibration and accuracy: `gaussian_sigma` (σ for (ε, δ)), `key_selection` (the
  threshold of key selection), `accuracy` (the ±α of the NOTICE), `names` (the
  mechanisms an analyst may choose).
- chosen from the data, privately: `contribution_bound` (τ per query, AboveThreshold
  over the units beyond each candidate), `approx_bounds` (clamping bounds of a SUM/AVG
  from a noisy log-scale histogram).
- budgets and analyses: `budget_plan` (risk-based budgets among analysts), `collusion`
  (colluding analysts, reproduced with the real samplers).
"""
