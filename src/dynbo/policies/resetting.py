"""Policies that forget by resetting a spatial GP: R-GP-UCB and ET-GP-UCB.

* :class:`RGPUCB` (``"r-gp-ucb"``; Bogunovic, Scarlett & Cevher 2016, Algorithm 1):
  time-invariant GP-UCB on the samples since the last reset, reset every ``N`` steps,
  with ``N`` given, or from ``eps`` by the paper's formulas
  (:func:`dynbo.theory.reset_interval`), or, by default, the continuous-time variant of
  Bardou, Thiran & Ranieri (2024, App. G.3): ``eps`` estimated online and a reset
  whenever the dataset exceeds ``N(eps)``.
* :class:`ETGPUCB` (``"et-gp-ucb"``; Brunzema, von Rohr, Solowjow & Trimpe 2025,
  Algorithm 1): a reset to the newest observation when it is inconsistent with the
  model, ``|y - mu(x)| > sqrt(rho_t') (sigma(x) + sigma_n)`` (eq. 10-11).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import torch

from dynbo.deadline import BudgetSpent
from dynbo.models.fit import fit_hyperparameters
from dynbo.models.gp import SpatioTemporalGP
from dynbo.models.kernel import KernelSpec, markov_epsilon, markov_lengthscale
from dynbo.policies.base import Diagnostics, Policy, register
from dynbo.policies.tunables import Tunable
from dynbo.policies.tv_gp_ucb import parse_epsilon, parse_epsilon_bounds
from dynbo.theory import reset_interval
from dynbo.validation import count, finite_number, optional_number, positive_int

__all__ = ["ETGPUCB", "RGPUCB", "periodic_reset_due"]


def periodic_reset_due(iteration: int, period: int) -> bool:
    """Whether iteration ``k`` (1-based) starts a new block of ``period`` steps.

    Resets at ``k = N + 1, 2N + 1, ...`` (the paper's ``t mod N = 1`` after the first
    block; at ``k = 1`` the dataset holds only the warm-up, which is kept).
    """
    return iteration > 1 and (iteration - 1) % period == 0


@register
class RGPUCB(Policy):
    """R-GP-UCB: GP-UCB on a spatial GP reset every ``N`` steps.

    Args:
        reset_every: the block size ``N`` (steps, i.e. ``suggest`` calls).
        epsilon: the rate of change; ``N`` then follows Corollary 4.1 (``12 eps^{-1/4}``
            for SE, ``24 eps^{-1/(4-c)}`` for Matern ``k_S``), capped at ``horizon``.
        horizon: ``T`` of ``min(T, ...)`` (steps; ``None``: no cap).
        epsilon_bounds: range of the online ``eps`` estimate of the continuous variant.
        **kwargs: the shared :class:`~dynbo.policies.base.Policy` arguments.

    With neither ``reset_every`` nor ``epsilon`` (the default) the policy runs the
    continuous-time variant: before each fit it estimates ``eps`` by maximum likelihood
    of TV-GP-UCB's model on its current dataset (observations in order of acquisition,
    ``k_S`` hyperparameters from the last fit, only ``eps`` free) and resets when the
    dataset holds more than ``N(eps)`` observations (no horizon cap).
    """

    name = "r-gp-ucb"
    reference = (
        "Bogunovic, Scarlett & Cevher (2016), Time-Varying Gaussian Process Bandit "
        "Optimization, Algorithm 1 and Corollary 4.1"
    )
    models_time = False
    default_min_fit_size = 5
    #: the block length ``N`` (the default: the continuous variant's ``N(eps)``); not
    #: with ``epsilon``, which fixes ``N`` by Corollary 4.1
    tunables = {
        **Policy.tunables,
        "reset_every": Tunable(5, 1000, log=True, integer=True, conflicts=("epsilon",)),
    }

    def __init__(
        self,
        bounds: Any,
        *,
        reset_every: int | None = None,
        epsilon: float | None = None,
        horizon: float | None = None,
        epsilon_bounds: tuple[float, float] = (1e-6, 0.9),
        **kwargs: Any,
    ) -> None:
        super().__init__(bounds, **kwargs)
        if reset_every is not None and epsilon is not None:
            raise ValueError("give reset_every or epsilon, not both")
        self.epsilon = None if epsilon is None else parse_epsilon("epsilon", epsilon)
        if horizon is not None:
            horizon = finite_number("horizon", horizon)
            if horizon <= 0:
                raise ValueError(f"horizon must be positive, got {horizon!r}")
        self.horizon = horizon
        self.epsilon_bounds = parse_epsilon_bounds(epsilon_bounds)
        if reset_every is not None:
            self.reset_every: int | None = positive_int("reset_every", reset_every)
        elif self.epsilon is not None:
            self.reset_every = reset_interval(self.epsilon, self.kernel.spatial, self.dim, horizon)
        else:
            self.reset_every = None
        self._estimate: float | None = None  # continuous variant: the latest eps estimate

    def _prepare(self, t: float, diag: Diagnostics) -> None:
        iteration = self._iteration + 1
        if self.reset_every is not None:
            if periodic_reset_due(iteration, self.reset_every):
                diag.removed = self.dataset_size
                diag.reset = True
                self._clear()
            diag.extra["reset_every"] = self.reset_every
            return
        if self.dataset_size >= 3:
            try:
                self._estimate = self._estimate_epsilon()
            except BudgetSpent:  # a spent time budget: the previous estimate stands
                diag.extra["epsilon_cut"] = True
        if self._estimate is not None:
            limit = reset_interval(self._estimate, self.kernel.spatial, self.dim)
            diag.extra.update(epsilon=self._estimate, reset_size=limit)
            if self.dataset_size > limit:
                diag.removed = self.dataset_size
                diag.reset = True
                self._clear()

    def _estimate_epsilon(self) -> float:
        """Maximum-likelihood ``eps`` of TV-GP-UCB's model on the current dataset."""
        kernel = KernelSpec(
            dim=self.dim,
            spatial=self.kernel.spatial,
            temporal="matern12",
            ard=self.kernel.ard,
            arms=self.kernel.arms,
        )
        low, high = self.epsilon_bounds
        start = self._estimate if self._estimate is not None else math.sqrt(low * high)
        h = replace(self._gp.hyperparameters, lengthscale_time=markov_lengthscale(start))
        model = SpatioTemporalGP(
            kernel, h, standardize=self.standardize, dtype=self.dtype, device=self.device
        )
        order = torch.arange(1, self.dataset_size + 1, dtype=self.dtype).reshape(-1, 1)
        inputs = torch.cat([self._to_unit(self._x), order], dim=1).to(self.device)
        model.set_data(inputs, self._y.to(self.device))
        bounds = replace(
            self.hyperparameter_bounds,
            lengthscale_time=(markov_lengthscale(high), markov_lengthscale(low)),
            fixed=frozenset({"outputscale", "lengthscale_space", "noise"}),
        )
        result = fit_hyperparameters(model, bounds=bounds, max_iterations=self.fit_iterations)
        lengthscale = result.hyperparameters.lengthscale_time
        assert lengthscale is not None
        return min(max(markov_epsilon(lengthscale), low), high)

    def _extra_state(self) -> dict[str, Any]:
        return {"estimate": self._estimate}

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        estimate = optional_number("estimate", state["estimate"])
        if estimate is not None and not 0.0 < estimate < 1.0:
            raise ValueError(f"estimate (of eps) must be in (0, 1), got {estimate}")
        self._estimate = estimate


@register
class ETGPUCB(Policy):
    """ET-GP-UCB: GP-UCB on a spatial GP, reset to the newest point when an event fires.

    When ``observe(x_t, t, y_t)`` follows a ``suggest``, the observation is tested
    against the posterior the acquisition used (``D_t``, before adding it; the prior if
    ``D_t`` is empty)::

        psi_t   = |y_t - mu(x_t)|                                       (eq. 10)
        kappa_t = sqrt(rho_t') (sigma(x_t) + sigma_n),
        rho_t'  = 2 ln(2 pi_t' / delta_B),  pi_t' = pi^2 t'^2 / 6        (eq. 11)

    with ``t'`` the number of steps since the last reset, counting this one, and
    ``sigma_n`` the model's noise standard deviation (original units). If ``psi_t >
    kappa_t`` the dataset becomes ``{(x_t, y_t)}``; otherwise the observation is
    appended. Warm-up observations (before the first ``suggest``) form the initial
    dataset and are not tested; nor is an observation made before the hyperparameters
    were first fitted (when they are learned: the paper's model is known, and unfitted
    initial values give no threshold in the data's units). The test value, threshold and
    ``t'`` are reported in the diagnostics of the next ``suggest`` (``extra["trigger"]``,
    ``reset``).

    Args:
        delta_B: the trigger's confidence parameter in (0, 1) (default 0.1, the value of
            every experiment of the paper).
        **kwargs: the shared :class:`~dynbo.policies.base.Policy` arguments (fixed,
            MAP or ML hyperparameters through ``learn_hyperparameters`` / ``hyperpriors``).
    """

    name = "et-gp-ucb"
    reference = (
        "Brunzema, von Rohr, Solowjow & Trimpe (2025), Event-Triggered Time-Varying "
        "Bayesian Optimization, Algorithm 1 and eq. 10-11"
    )
    models_time = False
    default_min_fit_size = 5
    #: the trigger's ``delta_B`` around the paper's 0.1
    tunables = {**Policy.tunables, "delta_B": Tunable(1e-3, 0.5, log=True)}

    def __init__(self, bounds: Any, *, delta_B: float = 0.1, **kwargs: Any) -> None:  # noqa: N803
        super().__init__(bounds, **kwargs)
        self.delta_B = parse_epsilon("delta_B", delta_B)
        self._steps = 0  # t': steps since the last reset
        self._trigger: dict[str, Any] | None = None  # the last test, for the diagnostics

    def threshold(self, steps: int, sigma: float) -> float:
        """``kappa_t = sqrt(rho_t') (sigma + sigma_n)`` for ``t' = steps`` (original units)."""
        rho = 2.0 * math.log(2.0 * (math.pi**2 * steps**2 / 6.0) / self.delta_B)
        sigma_n = math.sqrt(self._gp.hyperparameters.noise) * self._gp.target_scale
        return math.sqrt(rho) * (sigma + sigma_n)

    def _observe(self, x: torch.Tensor, t: float, y: float) -> None:
        if self._iteration == 0:
            self._append(x, t, y)
            return
        self._steps += 1
        if self.learn_hyperparameters and not self._fitted:
            # no model yet: the initial hyperparameters are meant for standardized targets,
            # and the scale of the few points held (a tiny spread) made the threshold
            # meaningless, so the trigger fired at every step and the dataset never grew
            # to the size of a first fit. Appended untested, as the warm-up is.
            self._trigger = {
                "tested": False,
                "why": "no fitted hyperparameters yet",
                "steps_since_reset": self._steps,
                "fired": False,
            }
            self._append(x, t, y)
            return
        inputs = self._gp_inputs(self._to_unit(x.reshape(1, -1).to(self.dtype)), torch.tensor([t]))
        mean, variance = self._gp.predict(inputs.to(self.device))
        sigma = math.sqrt(max(float(variance[0]), 0.0))
        value = abs(y - float(mean[0]))
        threshold = self.threshold(self._steps, sigma)
        fired = value > threshold
        self._trigger = {
            "value": value,
            "threshold": threshold,
            "steps_since_reset": self._steps,
            "fired": fired,
        }
        if fired:
            self._clear()
            self._steps = 0
        self._append(x, t, y)

    def _prepare(self, t: float, diag: Diagnostics) -> None:
        if self._trigger is not None:
            diag.extra["trigger"] = dict(self._trigger)
            diag.reset = bool(self._trigger["fired"])
            self._trigger = None

    def _extra_state(self) -> dict[str, Any]:
        return {
            "steps": self._steps,
            "trigger": None if self._trigger is None else dict(self._trigger),
        }

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        self._steps = count("steps", state["steps"])
        trigger = state["trigger"]
        self._trigger = None if trigger is None else dict(trigger)
