"""The removal loop shared by W-DBO and BOLT: the least relevant observation out, again
and again, while a budget or a size cap says so.

W-DBO (Bardou, Thiran & Ranieri 2024, "This Too Shall Pass: Removing Stale Observations
in Dynamic Bayesian Optimization", Algorithm 1 lines 9-20) removes the observation of
least Wasserstein relevancy ``R_i`` while its budget ``b > 1 + R_i``, dividing ``b`` by
``1 + R_i`` each time; BOLT removes the least relevant one until the dataset is down to
its cap (the same loop with an infinite budget and a removal count).

:func:`remove_least_relevant` runs that loop in batches
(:meth:`dynbo.relevancy.WassersteinRelevancy.remove_least_relevant`: the same choices
from cheap per-removal updates, one rank-``k`` update per batch) and then removes the
observations from the policy's data and GP at once
(:meth:`dynbo.models.SpatioTemporalGP.remove_sequence`). ``batched=False`` runs the
loop one removal at a time, recomputing every relevancy and downdating the GP after each
(the reference the batched loop is tested against). Both call
``deadline.spent("removal loop")`` before each removal, the same number of times in
the same order, so a recorded :class:`dynbo.deadline.Budget` replays at the same place.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from dynbo import deadline
from dynbo.relevancy import WassersteinRelevancy

if TYPE_CHECKING:
    from dynbo.policies.base import Policy

__all__ = ["RemovalOutcome", "remove_least_relevant"]

#: the unit of work the loop checks before
REMOVAL_LOOP = "removal loop"
#: the unit a budget checks before building the relevancy criterion (fixed work that
#: grows with n: without the check a budget could not skip it); a kind of its own, so
#: that the removal loop's ordinals, and replays of recorded cuts, are unchanged
REMOVAL_CRITERION = "removal criterion"
#: applying a batched loop's removals to the policy's data and GP (after the loop, never
#: skipped): measured, and expected after each removal the loop's budget check allows
REMOVAL_APPLY = "applying removals"


def criterion_affordable() -> bool:
    """Whether the removal step may build its relevancy criterion now: ``False`` when a
    soft budget is spent (the step then removes nothing this iteration)."""
    return not deadline.spent(REMOVAL_CRITERION)


@dataclass(frozen=True)
class RemovalOutcome:
    """What one removal loop did.

    Attributes:
        times: the removed observations' times, in removal order (the policy's time unit).
        relevancies: their ``R_i`` when removed (dimensionless).
        budget: the budget left (``inf`` for a loop without one).
        cut: whether a spent time budget stopped the loop.
    """

    times: list[float]
    relevancies: list[float]
    budget: float
    cut: bool


def remove_least_relevant(
    policy: Policy,
    relevancy: WassersteinRelevancy,
    *,
    limit: int,
    budget: float = math.inf,
    batched: bool = True,
    speculative: bool | None = None,
) -> RemovalOutcome:
    """Remove up to ``limit`` least relevant observations from ``policy`` (W-DBO's loop).

    Args:
        policy: the policy whose data and GP lose the observations (its ``_t``, ``_x``,
            ``_y`` and ``_gp``, which ``relevancy`` was built from).
        relevancy: the criterion of the policy's current dataset; it is left describing
            the remaining one.
        limit: the most removals.
        budget: W-DBO's removal budget ``b`` (dimensionless); ``inf`` (BOLT): none.
        batched: batches of removals from cheap updates (default), or the reference
            loop (one O(n^2) criterion and two O(n^2) downdates per removal).
        speculative: see :meth:`~dynbo.relevancy.WassersteinRelevancy.remove_least_relevant`
            (default: on any device but the CPU).

    Returns:
        :class:`RemovalOutcome`.
    """
    if not batched:
        return _one_at_a_time(policy, relevancy, limit, budget)
    removals = relevancy.remove_least_relevant(
        limit,
        budget=budget,
        stop=lambda: deadline.spent(REMOVAL_LOOP, after=(REMOVAL_APPLY,)),
        speculative=speculative,
    )
    deadline.end()  # applying the removals below is not the last removal's unit
    times = policy._t[removals.origins].tolist() if removals.origins else []
    if removals.indices:
        deadline.begin(REMOVAL_APPLY)
        policy._gp.remove_sequence(removals.indices)
        # the objective's choice, made for every output (the constraints' GPs too)
        policy._constraints = policy._constraints.removed(removals.indices)
        keep = torch.ones(policy.dataset_size, dtype=torch.bool)
        keep[removals.origins] = False
        policy._x, policy._t, policy._y = policy._x[keep], policy._t[keep], policy._y[keep]
        deadline.end()
    return RemovalOutcome(
        times=times,
        relevancies=removals.relevancies,
        budget=removals.budget,
        cut=removals.stopped_by == "stop",
    )


def _one_at_a_time(
    policy: Policy, relevancy: WassersteinRelevancy, limit: int, budget: float
) -> RemovalOutcome:
    """The paper's loop as written: every relevancy recomputed after each removal."""
    times: list[float] = []
    values: list[float] = []
    while len(times) < limit and budget > 1.0:
        if deadline.spent(REMOVAL_LOOP):
            return RemovalOutcome(times, values, budget, cut=True)
        relevancies = relevancy.relevancies()
        index = int(torch.argmin(relevancies))
        value = float(relevancies[index])
        if not budget > 1.0 + value:
            break
        times.append(float(policy._t[index]))
        values.append(value)
        relevancy.remove(index)
        policy._remove(index)
        budget /= 1.0 + value
        deadline.end()
    deadline.end()
    return RemovalOutcome(times, values, budget, cut=False)
