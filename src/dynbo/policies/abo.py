"""ABO (Nyikosa, Osborne & Roberts 2018, "Bayesian Optimization for Dynamic Problems"):
time is a search dimension.

ABO models ``f(x, t)`` with the base class's spatio-temporal GP (time an ordinary
input, every hyperparameter refitted each iteration, no data ever removed) and, instead
of evaluating now, maximizes the acquisition jointly over space and the near future
``[now, now + l_T / 3]`` (``l_T`` the current temporal lengthscale): the query may ask
to be evaluated later, and the harness waits until then. A long window means ABO
samples rarely where little changes; an over-estimated ``l_T`` makes it wait very long
(Bardou, Thiran & Ranieri 2024, App. G.3), hence the user cap ``max_lookahead``.

``stability_gating`` reproduces the authors' MATLAB code: for the first ``burn_in``
iterations, and until ``l_T`` is stable, time is not optimized (the query is for now);
``l_T`` is stable once the slope of ``log l_T`` per iteration over the last
``burn_in - 1`` iterations stays within ``+-slope_tolerance`` at two consecutive
iterations (the code's slope is on the hyperparameter itself; the log makes the
tolerance independent of the time unit, a documented choice), and stays stable after.
The default (``stability_gating=False``) is ABO as W-DBO and BOLT ran it: always search
the window. With ``acquisition_time="response"`` the window starts at the aimed time
``now + D_hat`` instead of now (it still ends at ``now + l_T / 3``).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from dynbo.acquisition.ucb import UpperConfidenceBound
from dynbo.policies.base import Diagnostics, Policy, register
from dynbo.policies.tunables import Tunable
from dynbo.validation import MAX_ABS_TIME, boolean, count, finite_number, positive_int

__all__ = ["ABO"]


@register
class ABO(Policy):
    """ABO: GP-UCB over space and the look-ahead window ``[now, now + l_T / 3]``.

    Args:
        lookahead_fraction: window length as a fraction of ``l_T`` (default 1/3).
        max_lookahead: cap on the window length (time units; default ``None``: no cap).
        stability_gating: do not search time during the burn-in and until ``l_T`` is
            stable (the authors' code; default ``False``).
        burn_in: iterations without look-ahead under the gating (default 5).
        slope_tolerance: stability threshold on the slope of ``log l_T`` per iteration
            (default 0.1).
        **kwargs: the shared :class:`~dynbo.policies.base.Policy` arguments.
    """

    name = "abo"
    reference = (
        "Nyikosa, Osborne & Roberts (2018), Bayesian Optimization for Dynamic Problems "
        "(adaptive Bayesian optimization); look-ahead of the authors' code"
    )
    models_time = True
    #: the look-ahead window as a fraction of ``l_T`` around the authors' 1/3
    tunables = {**Policy.tunables, "lookahead_fraction": Tunable(0.1, 1.0, log=True)}

    def __init__(
        self,
        bounds: Any,
        *,
        lookahead_fraction: float = 1.0 / 3.0,
        max_lookahead: float | None = None,
        stability_gating: bool = False,
        burn_in: int = 5,
        slope_tolerance: float = 0.1,
        **kwargs: Any,
    ) -> None:
        self.lookahead_fraction = finite_number("lookahead_fraction", lookahead_fraction)
        if self.lookahead_fraction <= 0:
            raise ValueError(f"lookahead_fraction must be positive, got {lookahead_fraction!r}")
        if max_lookahead is not None:
            max_lookahead = finite_number("max_lookahead", max_lookahead)
            if max_lookahead < 0:
                raise ValueError(f"max_lookahead must be >= 0, got {max_lookahead!r}")
        self.max_lookahead = max_lookahead
        self.stability_gating = boolean("stability_gating", stability_gating)
        self.burn_in = positive_int("burn_in", burn_in)
        if self.burn_in < 2:
            raise ValueError(f"burn_in must be >= 2 (a slope needs two values), got {burn_in!r}")
        self.slope_tolerance = finite_number("slope_tolerance", slope_tolerance)
        if self.slope_tolerance <= 0:
            raise ValueError(f"slope_tolerance must be positive, got {slope_tolerance!r}")
        super().__init__(bounds, **kwargs)
        self._log_lengthscales: list[float] = []  # log l_T after each fit (gating)
        self._stable_checks = 0
        self._stable = False

    def lookahead(self) -> float:
        """Length of the window: ``lookahead_fraction * l_T``, capped (time units)."""
        lengthscale = self._gp.hyperparameters.lengthscale_time
        assert lengthscale is not None
        length = self.lookahead_fraction * lengthscale
        return length if self.max_lookahead is None else min(length, self.max_lookahead)

    def searches_time(self) -> bool:
        """Whether this iteration optimizes the query time (always, without the gating)."""
        return not self.stability_gating or self._stable

    def _clean(self, t: float, diag: Diagnostics) -> None:
        if self.stability_gating and not self._stable:
            self._update_stability()
        diag.extra.update(lookahead=self.lookahead(), time_searched=self.searches_time())

    def _update_stability(self) -> None:
        lengthscale = self._gp.hyperparameters.lengthscale_time
        assert lengthscale is not None
        history = self._log_lengthscales
        history.append(math.log(lengthscale))
        span = self.burn_in - 1
        del history[: -(span + 1)]  # only the last burn_in values matter
        if self._iteration + 1 <= self.burn_in or len(history) <= span:
            return
        slope = (history[-1] - history[0]) / span
        self._stable_checks = self._stable_checks + 1 if abs(slope) <= self.slope_tolerance else 0
        # "stable for more than one consecutive check"
        self._stable = self._stable_checks > 1

    def _acquisition_function(self, t: float) -> UpperConfidenceBound:
        start = self._acquisition_time(t)
        if not self.searches_time():
            return UpperConfidenceBound(self._acquisition_model(), self.kappa(), start)
        # the window ends l_T / 3 (capped) after now whatever the aimed start: a
        # latency-aware start only skips the part of it the query cannot reach
        # ... and never past the latest time observe accepts (|t| <= MAX_ABS_TIME)
        end = min(t + self.lookahead(), MAX_ABS_TIME)
        return UpperConfidenceBound(
            self._acquisition_model(), self.kappa(), time_window=(min(start, end), end)
        )

    def _query_time(self, t: float, acq: UpperConfidenceBound, unit: torch.Tensor) -> float:
        if acq.time_window is None:
            return t
        start, end = acq.time_window
        # the map of the last coordinate, clamped against rounding at the window's ends
        return min(max(float(acq.query_time(unit)), start), end)

    def _extra_state(self) -> dict[str, Any]:
        return {
            "log_lengthscales": list(self._log_lengthscales),
            "stable_checks": self._stable_checks,
            "stable": self._stable,
        }

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        self._log_lengthscales = [
            finite_number("log_lengthscales", v) for v in state["log_lengthscales"]
        ]
        self._stable_checks = count("stable_checks", state["stable_checks"])
        self._stable = bool(state["stable"])
