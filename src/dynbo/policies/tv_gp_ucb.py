"""TV-GP-UCB (Bogunovic, Scarlett & Cevher 2016, Algorithm 2): forgetting by the kernel.

The objective is modeled as the Markov chain ``f_{t+1} = sqrt(1 - eps) f_t + sqrt(eps)
g_{t+1}``, whose covariance is ``k_S(x, x') (1 - eps)^{|i - j| / 2}`` (eq. 7-8): the
spatio-temporal GP of the base class with a Matern-1/2 temporal factor of lengthscale
``l = -2 / ln(1 - eps)`` on the observation *indices* ``i, j`` (the order of
acquisition). The next query gets index ``n + 1`` (the continuous-time adaptation of
Bardou, Thiran & Ranieri 2024, App. G.3: indices, not clock times). Every observation
is kept.

``eps`` is given (``epsilon=``) or learned by marginal likelihood with the other
hyperparameters (App. B; the fit optimizes ``log l``, which is a reparametrization of
``eps``: :func:`dynbo.models.epsilon_gradient` is the same gradient in ``eps``), by
maximum likelihood (no prior on ``eps``) inside ``epsilon_bounds``.

``time_index="clock"`` is the variant for samples that are not evenly spaced: the same
factor on ``|t - t'| / time_step`` (``eps`` is then the decay per ``time_step`` of clock
time).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch

from dynbo.models.kernel import (
    HyperparameterBounds,
    Hyperparameters,
    markov_epsilon,
    markov_lengthscale,
    names_temporal,
)
from dynbo.policies.base import Diagnostics, Policy, register
from dynbo.policies.tunables import Tunable
from dynbo.validation import count, finite_number, ordered_pair
from dynbo.validation import time_step as check_time_step

__all__ = ["TVGPUCB", "parse_epsilon", "parse_epsilon_bounds"]

TIME_INDICES = ("observation", "clock")


def parse_epsilon(name: str, value: Any) -> float:
    """``value`` as a float in the open interval (0, 1), or a ``ValueError`` naming ``name``."""
    value = finite_number(name, value)
    if not 0.0 < value < 1.0:
        raise ValueError(f"{name} must be in (0, 1), got {value!r}")
    return value


#: smallest lower end of ``epsilon_bounds``: its lengthscale ``-2 / ln(1 - eps)`` (2e12
#: steps) stays inside the box a fit may search
MIN_LEARNED_EPSILON = 1e-12


def parse_epsilon_bounds(value: Any) -> tuple[float, float]:
    """A ``(low, high)`` pair inside (0, 1) with ``1e-12 <= low < high``, or a ``ValueError``."""
    low, high = ordered_pair("epsilon_bounds", value, parse_epsilon)
    if low < MIN_LEARNED_EPSILON:
        raise ValueError(
            f"epsilon_bounds must start at {MIN_LEARNED_EPSILON:g} or above (a smaller eps "
            f"changes f by nothing over 1e12 steps; fix it with epsilon=), got {value!r}"
        )
    return low, high


@register
class TVGPUCB(Policy):
    """TV-GP-UCB: GP-UCB under the Markov-chain kernel ``k_S (1 - eps)^{|i-j|/2}``.

    Args:
        epsilon: the rate of change ``eps`` in (0, 1); ``None`` (default) learns it.
        epsilon_bounds: ``(low, high)`` range of a learned ``eps`` (default
            ``(1e-6, 0.9)``).
        time_index: ``"observation"`` (default: indices in order of acquisition, the
            paper's model) or ``"clock"`` (clock time divided by ``time_step``).
        time_step: the clock time that counts as one step in the ``"clock"`` variant.
        temporal_kernel: must be ``None`` or ``"matern12"`` (the Markov factor).
        **kwargs: the shared :class:`~dynbo.policies.base.Policy` arguments. The
            ``lengthscale_time`` entries of ``hyperparameter_bounds`` and
            ``initial_hyperparameters`` are replaced by ``eps``.
    """

    name = "tv-gp-ucb"
    reference = (
        "Bogunovic, Scarlett & Cevher (2016), Time-Varying Gaussian Process Bandit "
        "Optimization, Algorithm 2 and eq. 7-8"
    )
    models_time = True
    fixed_temporal_kernel = "matern12"
    #: a fixed ``eps`` (the default learns it) around the paper's 0.001-0.03
    tunables = {**Policy.tunables, "epsilon": Tunable(1e-4, 0.5, log=True)}

    def __init__(
        self,
        bounds: Any,
        *,
        epsilon: float | None = None,
        epsilon_bounds: tuple[float, float] = (1e-6, 0.9),
        time_index: str = "observation",
        time_step: float = 1.0,
        temporal_kernel: str | None = None,
        **kwargs: Any,
    ) -> None:
        if not names_temporal(temporal_kernel, "matern12"):
            raise ValueError(
                f"temporal_kernel of tv-gp-ucb is the Markov factor 'matern12', "
                f"got {temporal_kernel!r}"
            )
        self.epsilon = None if epsilon is None else parse_epsilon("epsilon", epsilon)
        self.epsilon_bounds = parse_epsilon_bounds(epsilon_bounds)
        if time_index not in TIME_INDICES:
            raise ValueError(f"time_index must be one of {TIME_INDICES}, got {time_index!r}")
        self.time_index = time_index
        self.time_step = check_time_step("time_step", time_step)
        # the Markov factor has no sampling-interval floor: eps is bounded instead
        kwargs.setdefault("lengthscale_time_floor", None)
        super().__init__(bounds, temporal_kernel="matern12", **kwargs)
        self._count = 0  # observations ever made: the index of the next one is count + 1

    @property
    def current_epsilon(self) -> float:
        """The ``eps`` in use (given, or the latest learned value)."""
        lengthscale = self._gp.hyperparameters.lengthscale_time
        assert lengthscale is not None
        return markov_epsilon(lengthscale)

    def _coordinate(self, t: float, index: int) -> float:
        return float(index) if self.time_index == "observation" else t / self.time_step

    def _observe(self, x: torch.Tensor, t: float, y: float) -> None:
        self._append(x, t, y, coordinate=self._coordinate(t, self._count + 1))
        self._count += 1

    def _time_coordinate(self, t: float) -> float:
        # on indices, any time ahead is the next observation's
        return self._coordinate(t, self._count + 1)

    def fit_bounds(self) -> HyperparameterBounds:
        """``l_T`` bounded by ``epsilon_bounds`` (or fixed at the given ``eps``)."""
        bounds = self.hyperparameter_bounds
        if self.epsilon is not None:
            return replace(bounds, fixed=bounds.fixed | {"lengthscale_time"})
        low, high = self.epsilon_bounds
        return replace(bounds, lengthscale_time=(markov_lengthscale(high), markov_lengthscale(low)))

    def priors(self) -> dict[str, tuple[float, float]] | None:
        """The base's priors without one on ``eps`` (learned by maximum likelihood, App. B)."""
        priors = super().priors()
        if priors is not None:
            priors.pop("lengthscale_time", None)
        return priors

    def _initial_hyperparameters(self, times: torch.Tensor | None) -> Hyperparameters:
        """The base's fresh values with ``l_T`` from ``eps``: given, or the elapsed steps.

        A learned ``eps`` starts where the base class starts ``l_T`` (the problem's time
        scale, a start inside the smooth basin from which the fit shortens ``l_T`` as the
        data demand), in this model's unit: ``l_T`` = the steps the data span (at least
        one), inside ``epsilon_bounds``. That is ``eps = 1 - exp(-2 / steps)``, 0.039
        after 51 observations.
        """
        h = super()._initial_hyperparameters(times)
        if self.epsilon is not None:
            return replace(h, lengthscale_time=markov_lengthscale(self.epsilon))
        low, high = self.epsilon_bounds
        steps = min(max(self._elapsed_steps(), markov_lengthscale(high)), markov_lengthscale(low))
        return replace(h, lengthscale_time=steps)

    def _elapsed_steps(self) -> float:
        """How many steps of the temporal factor the data span (at least 1)."""
        if self.time_index == "observation":
            # indices 1, ..., count (the base class asks before __init__ sets the count)
            return float(max(getattr(self, "_count", 0) - 1, 1))
        if self.dataset_size < 2:
            return 1.0
        return max(float(self._t.max() - self._t.min()) / self.time_step, 1.0)

    def _clean(self, t: float, diag: Diagnostics) -> None:
        diag.extra["epsilon"] = self.current_epsilon

    def _extra_state(self) -> dict[str, Any]:
        return {"count": self._count}

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        self._count = count("count", state["count"])
