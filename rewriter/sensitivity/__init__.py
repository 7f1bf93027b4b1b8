"""Sensitivity (FLEX, elastic and smooth) and the noise it calls for.

- `elastic`: elastic stability as a function of k, and smooth sensitivity.
- `outer_joins`: inner and outer equijoin bounds.
- `set_operations`: UNION, INTERSECT and EXCEPT.
- `cross_joins`: a public table joined without a condition.
- `metrics`: what is known of the data (max frequencies, volatile functions).
- `calibrate`: noise scales of a plan at given ε, δ and mechanism.
"""
