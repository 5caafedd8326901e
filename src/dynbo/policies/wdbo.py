"""W-DBO (Bardou, Thiran & Ranieri 2024, "This Too Shall Pass: Removing Stale
Observations in Dynamic Bayesian Optimization", Algorithm 1).

GP-UCB at the present time on the spatio-temporal GP ``lambda k_S k_T`` with online
hyperparameters, plus a removal step: observations whose removal changes the GP
posterior on the future domain ``S x [t, inf)`` by little (the Wasserstein relevancy
``R_i`` of eq. 12) are dropped while a removal budget allows it. The budget grows as
``b <- b (1 + alpha)^((t - t') / l_T)`` per iteration (line 24, App. F) and each removal
costs a factor ``1 + R_i`` (lines 14-17).

An iteration of :meth:`suggest` follows the paper's loop in order: hyperparameter fit
(line 8), removal loop with the current budget (lines 9-20), budget growth for the time
elapsed since the previous iteration (lines 22-24), acquisition at the present time
(line 5 of the next pass). The removal loop makes the paper's choices in batches
(:mod:`dynbo.policies.removal`: cheap updates of the relevancies after each removal, one
rank-k update of the criterion per batch, the GP downdated once at the end); nothing is
refit inside the loop.

When the relevancies are scored differs from the paper by default. In Algorithm 1 the
removal loop of iteration ``k`` runs right after the observation at ``t_k`` and scores
relevancies on the future domain ``S x [t_k, inf)``. In the ask/tell API the cleaning
of that iteration runs at the start of the next ``suggest(t_{k+1})``, and dynbo scores
at ``t_{k+1}``: the time the next query is chosen, after the response time has passed.
That is the present the criterion is meant to measure from (the posterior the next
acquisition uses), and it is what the ask/tell order gives naturally.
``relevancy_time="last_observation"`` scores at the newest observation's time instead,
the paper's ``t_k``, for reproductions (``docs/forgetting.md``).
"""

from __future__ import annotations

import math
from typing import Any

from dynbo.policies.base import Diagnostics, Policy, register
from dynbo.policies.removal import criterion_affordable, remove_least_relevant
from dynbo.policies.tunables import Tunable
from dynbo.relevancy import WassersteinRelevancy
from dynbo.validation import boolean, finite_number, optional_number, positive_int

__all__ = ["WDBO"]

#: cap on log(b): far beyond any 1 + R_i, far below float overflow
_LOG_MAX_BUDGET = 600.0


@register
class WDBO(Policy):
    """W-DBO: GP-UCB with removal of irrelevant observations under a budget.

    Args:
        bounds: ``(2, d)`` search box.
        alpha: budget growth per temporal lengthscale (paper's recommendation 0.25).
        min_dataset_size: never remove below this many observations (default 2).
        paper_compat: use the paper's printed temporal-SE convolution and the authors'
            package conventions (see :mod:`dynbo.relevancy`); off by default (it is wrong
            by quadrature).
        relevancy_time: the present of the relevancy criterion: ``"suggest"`` (default,
            the time given to ``suggest``) or ``"last_observation"`` (the newest
            observation's time: Algorithm 1's timing).
        **kwargs: the shared :class:`~dynbo.policies.base.Policy` arguments.
    """

    accepts_arm_covariance = False
    name = "wdbo"
    reference = (
        "Bardou, Thiran & Ranieri (2024), This Too Shall Pass: Removing Stale Observations "
        "in Dynamic Bayesian Optimization, Algorithm 1"
    )
    models_time = True
    #: removals in batches (exact choices, :mod:`dynbo.policies.removal`); ``False``: the
    #: paper's loop one removal at a time, the reference the batches are tested against
    batched_removals = True
    #: the budget growth ``alpha`` around the paper's 0.25
    tunables = {**Policy.tunables, "alpha": Tunable(0.025, 2.5, log=True)}

    def __init__(
        self,
        bounds: Any,
        *,
        alpha: float = 0.25,
        min_dataset_size: int = 2,
        paper_compat: bool = False,
        relevancy_time: str = "suggest",
        **kwargs: Any,
    ) -> None:
        super().__init__(bounds, **kwargs)
        self.alpha = finite_number("alpha", alpha)
        if self.alpha < 0:
            raise ValueError(f"alpha must be non-negative, got {alpha!r}")
        self.min_dataset_size = positive_int("min_dataset_size", min_dataset_size)
        self.paper_compat = boolean("paper_compat", paper_compat)
        if relevancy_time not in ("suggest", "last_observation"):
            raise ValueError(
                f"relevancy_time must be 'suggest' or 'last_observation', got {relevancy_time!r}"
            )
        self.relevancy_time = relevancy_time
        self._budget = 1.0
        self._previous_time: float | None = None

    @property
    def budget(self) -> float:
        """The current removal budget ``b`` (>= 1 after growth, 1 at the start)."""
        return self._budget

    def _clean(self, t: float, diag: Diagnostics) -> None:
        removed_times: list[float] = []
        relevancies_removed: list[float] = []
        removable = self._budget > 1.0 and self.dataset_size > self.min_dataset_size
        if removable and not criterion_affordable():
            diag.extra["removal_cut"] = "skipped: no time left for the relevancy criterion"
        elif removable:
            newest = float(self._t.max())
            present = newest if self.relevancy_time == "last_observation" else max(t, newest)
            relevancy = WassersteinRelevancy.from_gp(
                self._gp, present, paper_compat=self.paper_compat
            )
            outcome = remove_least_relevant(
                self,
                relevancy,
                limit=self.dataset_size - self.min_dataset_size,
                budget=self._budget,
                batched=self.batched_removals,
            )
            removed_times, relevancies_removed = outcome.times, outcome.relevancies
            self._budget = outcome.budget
            if outcome.cut:
                diag.extra["removal_cut"] = f"stopped after {len(removed_times)} removal(s)"
        lengthscale_time = self._gp.hyperparameters.lengthscale_time
        assert lengthscale_time is not None
        if self._previous_time is not None:
            # in log space and capped: a long pause over a short l_T would overflow, and
            # only whether b exceeds 1 + R_i (R_i <= ~1) matters
            growth = (t - self._previous_time) / lengthscale_time * math.log1p(self.alpha)
            self._budget = math.exp(min(math.log(self._budget) + growth, _LOG_MAX_BUDGET))
        self._previous_time = t
        diag.removed = len(removed_times)
        diag.extra.update(
            budget=self._budget,
            removed_times=removed_times,
            removed_relevancies=relevancies_removed,
        )

    def _extra_state(self) -> dict[str, Any]:
        return {"budget": self._budget, "previous_time": self._previous_time}

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        self._budget = finite_number("budget", state["budget"])
        if self._budget < 0:
            raise ValueError(f"budget must be >= 0, got {self._budget}")
        self._previous_time = optional_number("previous_time", state["previous_time"])
