"""How often a lone SUM is released as NULL, by the true number of its values.

    .venv/bin/python -m bench.sum_nulls [--draws 2000] [--share 0.1]

A SUM with no COUNT or AVG of its values beside it gets a hidden noisy count of them at
`privacy.sum_count_share` of its ε, and is NULL when that count's released value is below
0.5 (docs/queries.md). With noise the rule errs both ways: a SUM over no value is a
number about half the time, and one over a few values is NULL. This prints, for
sum(order_cost) at row level (no shift, bounds [0, 5000]) and at two ε, the SUM's noise
scale with and without its count, the count's scale, and the share of NULL answers over
0 to 1,000 values (seeded draws through proxy/engine/release.py, no database).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from mechanisms.seeded_source import SeededRandomSource
from proxy.config import PrivacySettings, load_policy_file
from proxy.engine.release import release
from rewriter.aggregate.private import plan_private_aggregate
from rewriter.analysis.classify import parse_query
from rewriter.sensitivity.calibrate import calibrate

POLICY = Path(__file__).resolve().parent.parent / "tests" / "data" / "reference_policy.toml"
VALUES = (0, 1, 5, 10, 50, 100, 1000)
BUCKETS = 16  # of order_cost's clamping grid in [0, 5000]; 200 lies in the 11th


def _row(values: int) -> list[bytes]:
    """The backend's row: per-bucket counts and sums (every value 200), then the count."""
    counts, sums = [0] * BUCKETS, [0] * BUCKETS
    counts[10], sums[10] = values, 200 * values
    return [("{" + ",".join(str(v) for v in counts + sums) + "}").encode(),
            str(values).encode()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--share", type=float, default=0.1, help="privacy.sum_count_share")
    args = parser.parse_args()
    plan = plan_private_aggregate(parse_query("SELECT sum(order_cost) FROM orders"),
                                  load_policy_file(POLICY), 0)
    settings = PrivacySettings(shift_interval=(0.0, 0.0))
    rng = SeededRandomSource(11)
    for epsilon in (0.1, 1.0):
        calibration = calibrate(plan, epsilon, 1e-8, sum_count_share=args.share)
        total, count = calibration.parts
        alone = total.scale * (1 - args.share)
        print(f"epsilon {epsilon:g}: sum scale {total.scale:.0f} ({alone:.0f} without its "
              f"count, x{1 / (1 - args.share):.3f}), count scale {count.scale:.0f}")
        for values in VALUES:
            row = _row(values)
            nulls = sum(release(plan, calibration, [], [row], 0.0, settings, rng).rows[0][0]
                        is None for _ in range(args.draws))
            print(f"  {values:5d} values: NULL in {nulls / args.draws:6.1%}")


if __name__ == "__main__":
    main()
