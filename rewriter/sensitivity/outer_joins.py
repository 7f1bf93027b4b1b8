"""Elastic stability of an equijoin on one `a = b` conjunct: inner, LEFT, RIGHT and FULL.

r1 ⋈ r2 on a = b, with S1, S2 the sides' stabilities and mf(a), mf(b) the join keys'
max frequencies (FLEX). An outer join adds, to the inner join's rows, one NULL-padded
row for each preserved row without a match. Counted as rows added or removed
(docs/queries.md, "Outer joins", argues each bound):

- a changed preserved row brings its matches or its padded row: at most max(1, mf) rows;
- a changed row on the other side changes the matches of at most mf unchanged preserved
  rows; a row that gains its first match (or loses its last) also loses (gains) its padded
  row, so each of those costs 2, not 1;
- with both sides preserved (FULL), a changed row's matches on the other side may flip
  between matched and padded too: mf more rows.

`left_factor` and `right_factor` multiply the sides' column frequencies: a preserved row
appears max(1, mf) times; a padded row's columns from the other side are NULL, which never
joins again, so that side's values keep the inner join's factor.
"""

from __future__ import annotations

from dataclasses import dataclass

from .elastic import Elastic, add, constant, maximum, multiply


@dataclass(frozen=True)
class JoinBound:
    stability: Elastic
    left_factor: Elastic
    right_factor: Elastic


def join_bound(side: str, shared: bool, s1: Elastic, s2: Elastic, mf_a: Elastic,
               mf_b: Elastic) -> JoinBound:
    """The bound for `side` ("" for an inner join, or LEFT, RIGHT, FULL); `shared` when
    one base row can sit on both sides (a self-join), so both sides change at once."""
    if side == "RIGHT":
        mirrored = join_bound("LEFT", shared, s2, s1, mf_b, mf_a)
        return JoinBound(mirrored.stability, mirrored.right_factor, mirrored.left_factor)
    if side == "LEFT":
        kept_left = maximum(Elastic.ONE, mf_b)
        from_left = multiply(s1, kept_left)
        from_right = multiply(constant(2), mf_a, s2)
        left_factor, right_factor = kept_left, mf_a
    elif side == "FULL":
        kept_left, kept_right = maximum(Elastic.ONE, mf_b), maximum(Elastic.ONE, mf_a)
        from_left = multiply(s1, add(kept_left, mf_b))
        from_right = multiply(s2, add(kept_right, mf_a))
        left_factor, right_factor = kept_left, kept_right
    elif side == "":
        from_left, from_right = multiply(mf_b, s1), multiply(mf_a, s2)
        left_factor, right_factor = mf_b, mf_a
    else:
        raise ValueError(f"unknown join side {side!r}")
    if shared:
        # Pairs of changed rows, one on each side, may also join each other (twice over
        # when both sides keep their padded rows).
        pairs = multiply(constant(2 if side == "FULL" else 1), s1, s2)
        return JoinBound(add(from_left, from_right, pairs), left_factor, right_factor)
    return JoinBound(maximum(from_left, from_right), left_factor, right_factor)
