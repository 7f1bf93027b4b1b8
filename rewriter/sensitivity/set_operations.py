"""Stability and column frequencies of UNION, INTERSECT and EXCEPT (with or without ALL).

Each is 1-Lipschitz in each input under the symmetric difference of rows (docs/queries.md,
"Set operations"): a row value appearing c1 times on the left and c2 on the right appears
c1 + c2 times in UNION ALL, min(c1, c2) in INTERSECT ALL, max(c1 − c2, 0) in EXCEPT ALL,
and at most once in the forms without ALL ([c1 + c2 > 0], [min > 0], [c1 > 0 = c2]).
Changing c1 by d1 and c2 by d2 changes each of these by at most |d1| + |d2|, so
S = S1 + S2 for all six (FLEX's max is unsound: one base row may sit on both sides).
"""

from __future__ import annotations

from sqlglot import exp

from .elastic import Elastic, add, minimum


def set_stability(s1: Elastic, s2: Elastic) -> Elastic:
    return add(s1, s2)


def set_frequency(operation: exp.SetOperation, mf1: Elastic | None, mf2: Elastic | None
                  ) -> Elastic | None:
    """A column's max frequency in the result (None: unbounded). A value recurs at most as
    often as on both sides together (UNION), on either side (INTERSECT), on the left
    (EXCEPT)."""
    if isinstance(operation, exp.Except):
        return mf1
    if isinstance(operation, exp.Intersect):
        known = [mf for mf in (mf1, mf2) if mf is not None]
        return minimum(*known) if known else None
    return None if mf1 is None or mf2 is None else add(mf1, mf2)
