"""What the analyst is told after a fresh private answer (its NOTICE): the charge, the
budget left, the accuracy, and how the groups were chosen. Built from released values,
the plan and the calibration only."""

from __future__ import annotations

from accounting import Budget
from rewriter.plan import OutputKind, PrivateAggregate
from rewriter.release.unit_report import mode_notice
from rewriter.sensitivity.calibrate import Calibration

from .before_charge import Checked
from .computed_errors import NOT_STATED
from .release import Release


def answer_notice(plan: PrivateAggregate, calibration: Calibration, answer: Release,
                  budget: Budget, confidence: float, rows: int | None = None) -> str:
    """What the analyst is told after a fresh answer: cost, budget left, accuracy; `rows`
    is how many rows are sent (after the statement's own expressions)."""
    if not plan.parts:
        return f"dpgate: nothing charged: {_PUBLIC_KEYS}"
    return "; ".join([_charged(calibration, budget),
                      *_details(plan, calibration, answer, confidence, rows)])


def composite_notice(checked: Checked, answers: list[Release], budget: Budget,
                     confidence: float) -> str:
    """A statement answered by several releases: the one charge, then each release's
    share and accuracy (named by its columns, or its branch of a set operation)."""
    lines = [_charged(checked.calibration, budget) +
             f"; in {len(checked.runs)} releases, their values combined afterwards at no cost"]
    for run, answer in zip(checked.runs, answers, strict=True):
        details = _details(run.plan, run.calibration, answer, confidence, None) \
            if run.plan.parts else [_PUBLIC_KEYS]
        lines.append(f"[{run.label}] epsilon {run.calibration.epsilon:g}: " +
                     "; ".join(details))
    return "; ".join(lines)


# What the interval of a column computed from released values means (computed_errors.py).
_COMPUTED = ("the statement's expressions were computed from the noisy values, and their "
             "intervals from the intervals of the values each reads (each at an equal share "
             "of the confidence, carried through the expression by interval arithmetic)")
_PUBLIC_KEYS = ("every key of the declared domain that the WHERE admits is listed, "
                "whatever the data holds")


def _charged(calibration: Calibration, budget: Budget) -> str:
    spent = f"charged epsilon {calibration.epsilon:g}"
    if calibration.delta:
        spent += f" and delta {calibration.delta:g}"
    return f"dpgate: {spent}, epsilon left {budget.epsilon_left:g} of {budget.epsilon_total:g}"


def _details(plan: PrivateAggregate, calibration: Calibration, answer: Release,
             confidence: float, rows: int | None) -> list[str]:
    """The accuracy of one release and how its groups were chosen."""
    lines = []
    if answer.bounds:
        bounds = ", ".join(f"{name} ±{bound}" for name, bound in answer.bounds.items())
        lines.append(f"{round(confidence * 100)}% accuracy: {bounds}")
    elif not calibration.pure:
        lines.append("noise follows the smooth sensitivity of this join, which depends on "
                     "the data, so no accuracy bound is shown")
    if calibration.threshold is not None:
        lines.append("groups are released only when their noisy count passes a threshold "
                     "(key selection)")
    elif (grouping := plan.grouping) is not None:
        admits = ("" if grouping.domain_unnarrowed else "that the WHERE admits ")
        lines.append(f"of the declared domain's keys {admits}those whose noisy count is "
                     "above 0 are kept, then ordered, limited or aggregated"
                     if grouping.occupied_by is not None else
                     f"every key of the declared domain {admits}is listed, empty ones with "
                     "noise")
        if grouping.domain_unnarrowed:
            lines.append("a WHERE condition on a key with a subquery's values does not "
                         "narrow its domain: list the values")
    if plan.grouping is not None and not (len(answer.rows) if rows is None else rows):
        lines.append(_no_group(plan, calibration))
    if (mode := answer.unit_note or mode_notice(plan)) is not None:
        lines.append(mode)
    if plan.post_sql is not None:
        computed = [label for o, label in zip(plan.visible, plan.labels, strict=True)
                    if o.kind == OutputKind.COMPUTED]
        lines.append(_COMPUTED if any(label in answer.bounds for label in computed) else
                     "the statement's expressions were computed from the noisy values")
        unstated = [label for label in computed if label not in answer.bounds]
        if unstated and calibration.pure:  # else no column has one, as said above
            # Said, not left out: a column without a bar must not look like a certain one.
            lines.append(f"{', '.join(unstated)}: no interval stated ({NOT_STATED})")
    elif plan.outer is not None:
        lines.append("the statement's expressions were computed from the noisy values")
    elif any(o.hidden for o in plan.outputs):
        lines.append("HAVING and ORDER BY used noisy aggregates")
    return lines


def _no_group(plan: PrivateAggregate, calibration: Calibration) -> str:
    """Why a GROUP BY answer has no row: decided from noisy values only, never from
    whether the data holds groups."""
    reasons = []
    if calibration.threshold is not None:
        reasons.append("no group's noisy count passed the key-selection threshold")
    if plan.post.having is not None or plan.post_sql is not None:
        reasons.append("HAVING, applied to the noisy values, kept none")
    if plan.post.limit == 0 or plan.post.offset:
        reasons.append("LIMIT/OFFSET left none")
    why = " or ".join(reasons) or "the declared domain admits no key here"
    return f"no group was released ({why})"
