"""BOLT (Bardou & Thiran 2025, "Optimizing Through Change: Bounds and Recommendations for
Time-Varying Bayesian Optimization Algorithms", Algorithm 1).

W-DBO's surrogate and relevancy criterion, but the removal budget is replaced by a
principled cap: the maximal useful dataset size ``n* = argmax_n sum_{i<=n} k_T(i R(n))^2``
(eq. 9, :func:`dynbo.theory.max_dataset_size`), where ``R(n)`` is BOLT's own response
time at dataset size ``n``. BOLT measures ``R`` as the time between two consecutive
clock reads (two consecutive :meth:`suggest` calls: fit + acquisition + evaluation +
cleaning, Sec. 4), fits a cubic with non-negative coefficients to the ``(n, duration)``
pairs, recomputes ``n*`` every iteration (warm-started discrete ascent) and, while the
dataset is larger than ``n*``, removes the observation whose removal moves the GP least
in the Wasserstein sense (eq. 12).

The measurements are kept as one aggregate per dataset size
(:class:`dynbo.acquisition.latency.DurationTable`: the same least-squares fit as on
every pair, in memory bounded by the number of distinct sizes).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dynbo.acquisition.latency import DurationTable
from dynbo.policies.base import Diagnostics, Policy, register
from dynbo.policies.removal import criterion_affordable, remove_least_relevant
from dynbo.relevancy import WassersteinRelevancy
from dynbo.theory import max_dataset_size
from dynbo.validation import at_most, boolean, count, optional_number, positive_int

__all__ = ["BOLT"]


#: the largest ``max_size``: ``u(n)`` sums ``n`` terms, and no GP holds a million points
MAX_SIZE_CAP = 10**6


@register
class BOLT(Policy):
    """BOLT: GP-UCB whose dataset is capped at the maximal useful size ``n*``.

    Args:
        bounds: ``(2, d)`` search box.
        remove_until_cap: remove until ``|D| <= n*`` in one iteration instead of one
            observation per iteration (the paper's loop removes one).
        min_response_points: distinct dataset sizes needed before ``R(n)`` is fitted;
            until then ``n*`` is infinite (no removal).
        max_size: cap on ``n*`` (``R`` nearly constant makes ``u`` increase for ever);
            at most ``10**6`` (the utility of a size costs O(size)).
        min_dataset_size: never remove below this many observations (default 2).
        paper_compat: see :class:`~dynbo.policies.wdbo.WDBO`.
        **kwargs: the shared :class:`~dynbo.policies.base.Policy` arguments.
    """

    accepts_arm_covariance = False
    name = "bolt"
    reference = (
        "Bardou & Thiran (2025), Optimizing Through Change: Bounds and Recommendations for "
        "Time-Varying Bayesian Optimization Algorithms, Algorithm 1 and eq. 9"
    )
    models_time = True
    #: see :attr:`dynbo.policies.wdbo.WDBO.batched_removals`
    batched_removals = True

    def __init__(
        self,
        bounds: Any,
        *,
        remove_until_cap: bool = False,
        min_response_points: int = 4,
        max_size: int = 10_000,
        min_dataset_size: int = 2,
        paper_compat: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(bounds, **kwargs)
        self.min_response_points = positive_int("min_response_points", min_response_points)
        if self.min_response_points < 4:
            raise ValueError(
                f"min_response_points must be >= 4 (a cubic has 4 coefficients), "
                f"got {min_response_points!r}"
            )
        self.max_size = at_most("max_size", max_size, MAX_SIZE_CAP, positive_int)
        self.min_dataset_size = positive_int("min_dataset_size", min_dataset_size)
        self.remove_until_cap = boolean("remove_until_cap", remove_until_cap)
        self.paper_compat = boolean("paper_compat", paper_compat)
        self._responses = DurationTable()
        self._previous_time: float | None = None
        self._previous_size = 0
        self._max_size: int | None = None

    @property
    def max_dataset_size(self) -> int | None:
        """The current ``n*`` (``None`` while ``R(n)`` cannot be fitted yet)."""
        return self._max_size

    def response_time_model(self) -> tuple[float, float, float, float] | None:
        """Coefficients of the fitted ``R(n)`` (``None`` with too few distinct sizes)."""
        model = self._responses.model(self.min_response_points)
        return None if model is None else model.coefficients

    def _prepare(self, t: float, diag: Diagnostics) -> None:
        # The duration between two clock reads belongs to the dataset size at the
        # start of the earlier iteration (BOLT Sec. 4).
        if self._previous_time is not None:
            self._responses.record(self._previous_size, t - self._previous_time)
        self._previous_time = t
        self._previous_size = self.dataset_size

    def _clean(self, t: float, diag: Diagnostics) -> None:
        coefficients = self.response_time_model()
        lengthscale_time = self._gp.hyperparameters.lengthscale_time
        assert lengthscale_time is not None
        if coefficients is not None:
            c0, c1, c2, c3 = coefficients

            def response_time(n: int) -> float:
                return c0 + n * (c1 + n * (c2 + n * c3))

            self._max_size = max_dataset_size(
                response_time,
                self.kernel.temporal,  # type: ignore[arg-type]
                lengthscale_time,
                initial=self._max_size,
                n_max=self.max_size,
            )
        removed_times: list[float] = []
        cap = self._max_size
        over = cap is not None and self.dataset_size > max(cap, self.min_dataset_size)
        if over and not criterion_affordable():
            diag.extra["removal_cut"] = "skipped: no time left for the relevancy criterion"
        elif over:
            assert cap is not None
            present = max(t, float(self._t.max()))
            relevancy = WassersteinRelevancy.from_gp(
                self._gp, present, paper_compat=self.paper_compat
            )
            # the argmin of R_i is the argmin of W_2(GP_D, GP_D\i) (common denominator);
            # no budget: the loop removes `limit` observations unless a deadline stops it
            excess = self.dataset_size - max(cap, self.min_dataset_size)
            outcome = remove_least_relevant(
                self,
                relevancy,
                limit=excess if self.remove_until_cap else 1,
                batched=self.batched_removals,
            )
            removed_times = outcome.times
            if outcome.cut:
                diag.extra["removal_cut"] = f"stopped after {len(removed_times)} removal(s)"
        diag.removed = len(removed_times)
        diag.extra.update(
            n_star=self._max_size,
            response_time_coefficients=None if coefficients is None else list(coefficients),
            removed_times=removed_times,
        )

    def _extra_state(self) -> dict[str, Any]:
        return {
            "responses": self._responses.state(),
            "previous_time": self._previous_time,
            "previous_size": self._previous_size,
            "max_size": self._max_size,
        }

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        self._responses = DurationTable.from_state(state["responses"])
        self._previous_time = optional_number("previous_time", state["previous_time"])
        self._previous_size = count("previous_size", state["previous_size"])
        size = state["max_size"]
        self._max_size = None if size is None else positive_int("max_size", size)

    def response_dataset(self) -> np.ndarray:
        """``(m, 3)`` array: dataset size, mean response time (s), number of measurements.

        One row per distinct dataset size measured, in increasing size.
        """
        return self._responses.rows()
