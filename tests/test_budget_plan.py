"""Risk-based budget distribution (Bkakria, Cuppens & Cuppens): optimal, α-risky,
monotone."""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest
from scipy.optimize import linprog

from mechanisms.budget_plan import (
    MAX_SUBSET_ANALYSTS,
    ExponentialAlpha,
    TableAlpha,
    alpha_from_json,
    is_monotone,
    plan_budgets,
    plan_by_subsets,
    verify,
    verify_by_subsets,
    verify_exponential,
)

pytestmark = pytest.mark.unit

EPSILON_T = 1.0  # the hospital's ε (ε^t in the seed)


def random_risks(rng: random.Random, count: int) -> dict[str, float]:
    """Probabilities with ties and p = 1 mixed in, as real risk classes would have."""
    classes = [1.0, 0.5, 0.1, 0.01, rng.uniform(0.001, 1), rng.uniform(0.001, 1)]
    return {f"u{i}": rng.choice(classes) if rng.random() < 0.5 else rng.uniform(0.0005, 1)
            for i in range(count)}


def random_table(rng: random.Random) -> TableAlpha:
    xs = sorted(rng.sample(range(2, 60), rng.randint(1, 5)))
    probabilities = sorted((10 ** -rng.uniform(0, 6) for _ in xs), reverse=True)
    return TableAlpha(((0.2, 1.0),) + tuple((x / 5, a) for x, a in zip(xs, probabilities,
                                                                        strict=True)))


def literal_alpha_risky(risks: dict[str, float], budgets: dict[str, float], alpha) -> bool:
    """The paper's Definition 3 word for word (with the budgets' float tolerance)."""
    names = list(risks)
    for size in range(1, len(names) + 1):
        for group in itertools.combinations(names, size):
            joint = math.prod(risks[name] for name in group)
            total = sum(budgets[name] for name in group) * (1 - 1e-9)
            if joint > 10 ** float(alpha.log10(total)) * (1 + 1e-12):
                return False
    return True


# The paper's hospital example (§3). The paper gives no numbers for p_u; it says only that
# the classic model assumes every data consumer discloses (p = 1), which forces
# ε_h + ε_i + ε_r = ε^t (equation 1), and that u_i and u_h are less likely than 1 to
# disclose. The values 0.1 and 0.01 below are illustrative.

def test_hospital_example_classic_model_is_equation_1():
    risks = {"insurance": 1.0, "hospital": 1.0, "researcher": 1.0}
    budgets = plan_budgets(risks, ExponentialAlpha(EPSILON_T))
    assert sum(budgets.values()) == pytest.approx(EPSILON_T)  # equation (1)
    # Equal risks, equal shares: the tie-break among all splits of ε^t.
    assert budgets == pytest.approx(dict.fromkeys(risks, EPSILON_T / 3))


def test_hospital_example_with_disclosure_risks_gives_everyone_more():
    risks = {"insurance": 0.1, "hospital": 0.01, "researcher": 1.0}
    alpha = ExponentialAlpha(EPSILON_T)
    budgets = plan_budgets(risks, alpha)
    # Water level L = 1: the researcher (w = 0) gets the one ε everybody may lose, the
    # insurance scientist (w = 1) is already at L, the hospital scientist keeps ε·w = 2ε.
    assert budgets == pytest.approx({"researcher": 1.0, "insurance": 1.0, "hospital": 2.0})
    assert all(budget > EPSILON_T / 3 for budget in budgets.values())  # better than eq. 1
    assert budgets["hospital"] >= budgets["insurance"] >= budgets["researcher"] > 0
    # The paper's condition, group by group: every group is within α, the largest on it.
    assert 0.1 * 1.0 <= alpha(budgets["insurance"] + budgets["researcher"])
    assert 0.1 * 0.01 * 1.0 == pytest.approx(alpha(sum(budgets.values())))
    assert literal_alpha_risky(risks, budgets, alpha)
    assert all(check.ok for check in verify(risks, budgets, alpha))


def test_exponential_alpha_is_the_seeds_formula():
    alpha = ExponentialAlpha(0.5)
    assert alpha(0.5) == 1.0 and alpha(0.2) == 1.0
    assert alpha(1.0) == pytest.approx(0.1)
    assert alpha(1.5) == pytest.approx(0.01)


@pytest.mark.parametrize("seed", range(40))
def test_closed_form_is_the_leximin_optimum_found_by_progressive_filling(seed):
    rng = random.Random(seed)
    risks = random_risks(rng, rng.randint(1, 9))
    alpha = ExponentialAlpha(rng.uniform(0.05, 3))
    closed = plan_budgets(risks, alpha)
    filled = plan_by_subsets(risks, alpha)
    assert closed == pytest.approx(filled, rel=1e-9)
    # Every budget is used: beyond ε·w_u the analysts share exactly one ε.
    spare = sum(max(0.0, closed[u] + alpha.epsilon * math.log10(p)) for u, p in risks.items())
    assert spare == pytest.approx(alpha.epsilon)
    assert literal_alpha_risky(risks, closed, alpha)
    assert all(check.ok for check in verify(risks, closed, alpha))


@pytest.mark.parametrize("seed", range(30))
def test_table_alpha_plans_pass_every_group_and_are_optimal(seed):
    rng = random.Random(1000 + seed)
    risks = random_risks(rng, rng.randint(1, 8))
    alpha = random_table(rng)
    budgets = plan_budgets(risks, alpha)
    assert literal_alpha_risky(risks, budgets, alpha)
    assert verify_by_subsets(risks, budgets, alpha).ok
    assert_no_budget_can_grow_alone(risks, budgets, alpha)
    assert min(budgets.values()) == pytest.approx(max_min_budget(risks, alpha), rel=1e-7)


def assert_no_budget_can_grow_alone(risks, budgets, alpha) -> None:
    """Optimality in the paper's sense: any single budget a little larger breaks a rule."""
    for name in risks:
        larger = {**budgets, name: budgets[name] * (1 + 1e-6)}
        check = verify_by_subsets(risks, larger, alpha)
        assert not (check.alpha_risky and check.monotone), name


def max_min_budget(risks: dict[str, float], alpha) -> float:
    """The largest possible smallest budget, by linear programming over every group:
    an independent check of the first step of the tie-break."""
    names = list(risks)
    n = len(names)
    rows, bounds = [], []
    for mask in range(1, 1 << n):
        members = [i for i in range(n) if mask >> i & 1]
        weight = sum(-math.log10(risks[names[i]]) for i in members)
        rows.append([1.0 if mask >> i & 1 else 0.0 for i in range(n)] + [0.0])
        bounds.append(float(alpha.max_total(weight)))
    for i, j in itertools.permutations(range(n), 2):
        if risks[names[i]] > risks[names[j]]:  # riskier i: ε_i − ε_j ≤ 0
            rows.append([1.0 if k == i else -1.0 if k == j else 0.0 for k in range(n)] + [0])
            bounds.append(0.0)
    for i in range(n):  # t − ε_i ≤ 0
        rows.append([-1.0 if k == i else 0.0 for k in range(n)] + [1.0])
        bounds.append(0.0)
    result = linprog(c=[0.0] * n + [-1.0], A_ub=rows, b_ub=bounds,
                     bounds=[(0, None)] * (n + 1), method="highs")
    assert result.status == 0
    return result.x[-1]


def test_a_table_of_the_exponential_gives_the_exponential_plan():
    # log10 α is linear between points, so two points reproduce the paper's α exactly
    # on [ε, 9ε]; the budgets below stay inside that range.
    risks = {"a": 0.3, "b": 0.05, "c": 0.05, "d": 0.9, "e": 0.001}
    exponential = ExponentialAlpha(0.4)
    table = TableAlpha(((0.4, 1.0), (3.6, 1e-8)))
    assert plan_budgets(risks, table) == pytest.approx(plan_budgets(risks, exponential))


@pytest.mark.parametrize("seed", range(25))
def test_fast_verifier_agrees_with_every_group(seed):
    rng = random.Random(2000 + seed)
    risks = random_risks(rng, rng.randint(1, 8))
    alpha = ExponentialAlpha(rng.uniform(0.1, 2))
    planned = plan_budgets(risks, alpha)
    budgets = {name: budget * rng.uniform(0.8, 1.25) for name, budget in planned.items()}
    fast = verify_exponential(risks, budgets, alpha)
    slow = verify_by_subsets(risks, budgets, alpha)
    assert fast.alpha_risky == slow.alpha_risky == literal_alpha_risky(risks, budgets, alpha)
    assert fast.monotone == slow.monotone


def test_verifiers_catch_an_overgenerous_and_a_non_monotone_distribution():
    alpha = ExponentialAlpha(1.0)
    risks = {"a": 1.0, "b": 1.0, "c": 0.01}
    greedy = {"a": 0.6, "b": 0.6, "c": 2.0}  # a and b together may only have 1
    for check in (verify_exponential(risks, greedy, alpha),
                  verify_by_subsets(risks, greedy, alpha)):
        assert not check.alpha_risky and not check.ok
    assert set(verify_by_subsets(risks, greedy, alpha).tightest) == {"a", "b"}
    inverted = {"a": 0.5, "b": 0.2, "c": 0.1}  # c is the safest yet gets least
    assert not is_monotone(risks, inverted)
    assert not verify_by_subsets(risks, inverted, alpha).monotone
    assert is_monotone({"a": 0.5, "b": 0.5}, {"a": 1.0, "b": 2.0})  # equal risks: any order
    assert not verify_by_subsets(risks, {"a": 0.0, "b": 0.5, "c": 2}, alpha).positive


def test_a_thousand_analysts_are_planned_with_the_closed_form():
    rng = random.Random(7)
    risks = {f"analyst{i:04}": rng.uniform(0.0001, 1.0) for i in range(1000)}
    alpha = ExponentialAlpha(0.5)
    budgets = plan_budgets(risks, alpha)
    (check,) = verify(risks, budgets, alpha)  # too many for every group
    assert check.ok and check.groups_checked == 1
    ordered = sorted(risks, key=risks.get)
    assert all(budgets[a] >= budgets[b] for a, b in itertools.pairwise(ordered))
    # The riskiest analysts are levelled together; the level is the smallest budget.
    level = min(budgets.values())
    levelled = [name for name in risks if budgets[name] == pytest.approx(level)]
    assert max(risks[name] for name in risks if name not in levelled) < min(
        risks[name] for name in levelled)


def test_impossible_and_invalid_inputs_are_clear_errors():
    never_safe = TableAlpha(((0.0, 1.0), (1.0, 0.5)))  # α < 1 for any positive total
    with pytest.raises(ValueError, match="no positive budget for the group a"):
        plan_budgets({"a": 1.0, "b": 0.1}, never_safe)
    with pytest.raises(ValueError, match=r"\(0, 1\]"):
        plan_budgets({"a": 0.0}, ExponentialAlpha(1))
    with pytest.raises(ValueError, match=r"\(0, 1\]"):
        plan_budgets({"a": 1.5}, ExponentialAlpha(1))
    with pytest.raises(ValueError, match="must not increase"):
        TableAlpha(((1.0, 0.5), (2.0, 0.6)))
    with pytest.raises(ValueError, match="increasing"):
        TableAlpha(((1.0, 0.5), (1.0, 0.4)))
    with pytest.raises(ValueError, match="positive"):
        ExponentialAlpha(0.0)
    many = {f"u{i}": 0.5 for i in range(MAX_SUBSET_ANALYSTS + 1)}
    with pytest.raises(ValueError, match="exponential"):
        plan_budgets(many, TableAlpha(((1.0, 1.0), (5.0, 0.001))))


def test_table_alpha_and_its_largest_total_are_inverse():
    table = TableAlpha(((0.5, 1.0), (1.0, 0.3), (2.0, 0.3), (4.0, 1e-4)))
    assert float(table.log10(0.1)) == 0.0  # before the first point: the first value
    assert float(table.log10(4.0001)) == -math.inf  # beyond the last point: nothing
    assert float(table.max_total(0.0)) == 0.5
    assert float(table.max_total(-math.log10(0.3))) == pytest.approx(2.0)  # flat: far end
    assert float(table.max_total(10.0)) == 4.0
    weights = np.linspace(0.0, 3.9, 50)
    totals = table.max_total(weights)
    assert np.allclose(table.log10(totals)[totals > 2.0], -weights[totals > 2.0])
    # Just past the largest total, α is below the group's probability.
    assert np.all(table.log10(totals + 1e-6) < -weights + 1e-12)
    assert float(TableAlpha(((1.0, 0.5),)).max_total(0.0)) == -math.inf


def test_alpha_round_trips_through_json():
    for alpha in (ExponentialAlpha(0.7), TableAlpha(((0.0, 1.0), (2.0, 0.01)))):
        assert alpha_from_json(alpha.to_json()) == alpha
