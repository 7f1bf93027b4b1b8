"""CROSS JOIN (or a FROM list item that no equality links) with a public base table.

Every row of the relation before it, L, meets every row of the public table P: the result
has |L|·|P| rows. A changed base row changes at most S_L rows of L (P is public: it never
changes), and each of them |P| rows of the result, so S = |P|·S_L; a column of L recurs
|P| times as often. This is FLEX's equijoin rule for a join on a constant, whose max
frequency in P is P's row count: measured like any maxFreq (metrics.ROWS), public, so no
+k. A column of P recurs |L| times, a private and unbounded number: it cannot be a join key
afterwards (its frequency is ∞). In unit mode nothing changes: a public table belongs to
nobody, so each row of the result is still the unit of its row of L
(docs/queries.md, "Cross joins").
"""

from __future__ import annotations

from .elastic import Elastic, multiply


def cross_stability(left: Elastic, rows: Elastic) -> Elastic:
    """The stability of L × P: `left` is S_L, `rows` P's row count."""
    return multiply(rows, left)
