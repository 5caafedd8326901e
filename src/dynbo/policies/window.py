"""The frequentist baselines: SW-, BR- and W-GP-UCB on a (weighted) kernel ridge.

Zhou & Shroff (2021) restart (BR-GP-UCB; "BR" is Brunzema et al.'s label, to tell it
from Bogunovic's R-GP-UCB) or slide a window (SW-GP-UCB) over a regularized kernel-ridge
GP-UCB; Deng, Zhou, Kim, Tewari, Gupta & Shroff (2022) weight the observations instead,
``w_s = gamma^(k - s)`` at step ``k`` (W-GP-UCB). The ridge with regularizer
``lambda_r`` is the GP with noise variance ``lambda_r`` (and noise multipliers
``1 / w_s``), so the policies reuse the GP, its O(n^2) add and remove included
(:mod:`dynbo.models.ridge`). ``beta`` is a confidence radius: ``kappa = beta``, by
default :class:`~dynbo.acquisition.ucb.InformationGainBeta`
(``B + R sqrt(2 (gamma + 1 + ln(1/delta)))``).

The papers' bodies were not available to this project; the rules here are the
kernelized forms of their linear-bandit counterparts (see ``docs/policies/window.md``):
the window length, restart period and discount are options with documented defaults.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch

from dynbo.acquisition.ucb import BetaSchedule, make_beta_schedule
from dynbo.models.ridge import WIDTHS, WeightedRidgeView
from dynbo.policies.base import Diagnostics, Policy, register
from dynbo.policies.resetting import periodic_reset_due
from dynbo.policies.tunables import Tunable
from dynbo.policies.tv_gp_ucb import parse_epsilon
from dynbo.validation import finite_number, positive_int

__all__ = ["BRGPUCB", "KernelRidgePolicy", "SWGPUCB", "WGPUCB"]

#: weights below this are held at it: the observation is then all but ignored, and the
#: noise multiplier 1 / w stays finite
MIN_WEIGHT = 1e-12


class KernelRidgePolicy(Policy):
    """GP-UCB on a regularized kernel ridge: ``kappa = beta`` (a radius).

    Args:
        regularizer: ``lambda_r`` (standardized units); ``None`` (default) uses the GP's
            noise variance, learned online like the other hyperparameters, so that the
            ridge estimate is the GP's posterior mean. A number fixes the noise slot at it.
        beta: as for every policy; default ``{"kind": "information_gain"}``.
        **kwargs: the shared :class:`~dynbo.policies.base.Policy` arguments.
    """

    models_time = False
    default_min_fit_size = 5
    beta_is_radius = True

    def __init__(
        self,
        bounds: Any,
        *,
        regularizer: float | None = None,
        beta: BetaSchedule | dict[str, Any] | str | float | None = None,
        **kwargs: Any,
    ) -> None:
        if regularizer is not None:
            regularizer = finite_number("regularizer", regularizer)
            if regularizer <= 0:
                raise ValueError(f"regularizer must be positive, got {regularizer!r}")
            for option in ("initial_hyperparameters", "hyperparameter_bounds"):
                spec = kwargs.get(option)
                if spec is not None and not isinstance(spec, Mapping):
                    raise ValueError(f"{option} must be a mapping, got {spec!r}")
            initial = dict(kwargs.pop("initial_hyperparameters", None) or {})
            initial["noise"] = regularizer
            kwargs["initial_hyperparameters"] = initial
            fixed_bounds = dict(kwargs.pop("hyperparameter_bounds", None) or {})
            fixed = fixed_bounds.get("fixed", [])
            if fixed is None or not isinstance(fixed, (str, list, tuple, set, frozenset)):
                raise ValueError(f"hyperparameter_bounds['fixed'] must be names, got {fixed!r}")
            fixed = [fixed] if isinstance(fixed, str) else list(fixed)
            fixed_bounds["fixed"] = sorted({*fixed, "noise"})
            kwargs["hyperparameter_bounds"] = fixed_bounds
        self.regularizer = regularizer
        if beta is None:
            beta = {"kind": "information_gain"}
        super().__init__(bounds, beta=make_beta_schedule(beta), **kwargs)


@register
class SWGPUCB(KernelRidgePolicy):
    """SW-GP-UCB: the kernel ridge on the last ``window`` observations.

    Args:
        window: ``W >= 1``, the number of observations kept (default 100). Each new
            observation beyond ``W`` drops the oldest: one O(n^2) remove and one O(n^2)
            add on the existing factorization.
        **kwargs: :class:`KernelRidgePolicy` arguments.
    """

    name = "sw-gp-ucb"
    reference = (
        "Zhou & Shroff (2021), No-Regret Algorithms for Time-Varying Bayesian "
        "Optimization (sliding window)"
    )
    #: the window ``W`` around the default 100
    tunables = {**Policy.tunables, "window": Tunable(5, 1000, log=True, integer=True)}

    def __init__(self, bounds: Any, *, window: int = 100, **kwargs: Any) -> None:
        super().__init__(bounds, **kwargs)
        self.window = positive_int("window", window)
        self._dropped: list[float] = []  # times dropped since the last suggest

    def _observe(self, x: torch.Tensor, t: float, y: float) -> None:
        self._append(x, t, y)
        while self.dataset_size > self.window:
            self._dropped.append(float(self._t[0]))
            self._remove(0)  # observations are appended in order: 0 is the oldest

    def _prepare(self, t: float, diag: Diagnostics) -> None:
        diag.removed = len(self._dropped)
        diag.extra["dropped_times"] = list(self._dropped)
        self._dropped = []

    def _extra_state(self) -> dict[str, Any]:
        return {"dropped": list(self._dropped)}

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        self._dropped = [finite_number("dropped", v) for v in state["dropped"]]


@register
class BRGPUCB(KernelRidgePolicy):
    """BR-GP-UCB: the kernel ridge restarted every ``restart_every`` steps.

    Args:
        restart_every: ``H >= 1`` steps (``suggest`` calls) per block (default 100);
            the dataset is emptied at ``k = H + 1, 2H + 1, ...``.
        **kwargs: :class:`KernelRidgePolicy` arguments.
    """

    name = "br-gp-ucb"
    reference = (
        "Zhou & Shroff (2021), No-Regret Algorithms for Time-Varying Bayesian "
        "Optimization (restarting)"
    )
    #: the block length ``H`` around the default 100
    tunables = {**Policy.tunables, "restart_every": Tunable(5, 1000, log=True, integer=True)}

    def __init__(self, bounds: Any, *, restart_every: int = 100, **kwargs: Any) -> None:
        super().__init__(bounds, **kwargs)
        self.restart_every = positive_int("restart_every", restart_every)

    def _prepare(self, t: float, diag: Diagnostics) -> None:
        if periodic_reset_due(self._iteration + 1, self.restart_every):
            diag.removed = self.dataset_size
            diag.reset = True
            self._clear()


@register
class WGPUCB(KernelRidgePolicy):
    """W-GP-UCB: every observation kept, weighted ``w_s = gamma^(k - s)``.

    ``s`` counts observations in order of arrival and ``k`` is the newest one's count,
    so the newest weighs 1 and each older one ``gamma`` times less per later
    observation. Before each fit the GP's noise multipliers become ``1 / w_s``; the fit
    maximizes the weighted likelihood and its refactorization is the only one (with fixed
    hyperparameters, setting the multipliers refactorizes instead).

    Args:
        gamma: discount in (0, 1) (default 0.99, i.e. an effective memory ``1 / (1 -
            gamma) = 100`` observations like the other two's defaults).
        width: ``"sandwich"`` (default; ``lambda_r ||phi||^2_{V^-1 V~ V^-1}``) or
            ``"plain"`` (the weighted GP variance); :mod:`dynbo.models.ridge`.
        **kwargs: :class:`KernelRidgePolicy` arguments.
    """

    name = "w-gp-ucb"
    reference = (
        "Deng, Zhou, Kim, Tewari, Gupta & Shroff (2022), Weighted Gaussian Process "
        "Bandits for Non-stationary Environments"
    )
    #: the discount ``gamma``: an effective memory ``1 / (1 - gamma)`` of 5 to 1000
    tunables = {**Policy.tunables, "gamma": Tunable(0.8, 0.999)}

    def __init__(
        self, bounds: Any, *, gamma: float = 0.99, width: str = "sandwich", **kwargs: Any
    ) -> None:
        super().__init__(bounds, **kwargs)
        self.gamma = parse_epsilon("gamma", gamma)
        if width not in WIDTHS:
            raise ValueError(f"width must be one of {WIDTHS}, got {width!r}")
        self.width = width

    def weights(self) -> torch.Tensor:
        """``(n,)`` weights ``gamma^(n - 1 - i)`` of the kept observations, oldest first."""
        ages = torch.arange(self.dataset_size - 1, -1, -1, dtype=self.dtype)
        return torch.exp(ages * math.log(self.gamma)).clamp_min(MIN_WEIGHT)

    def _prepare(self, t: float, diag: Diagnostics) -> None:
        if self.dataset_size:
            weights = self.weights()
            # a fit follows and refactorizes when it sets its values: one O(n^3), not two
            fit_follows = self.learn_hyperparameters and self.dataset_size >= self.min_fit_size
            self._gp.set_noise_scale(1.0 / weights.to(self.device), refactorize=not fit_follows)
            diag.extra["smallest_weight"] = float(weights[0])

    def _acquisition_model(self) -> Any:
        return WeightedRidgeView(self._gp, self.width)  # type: ignore[arg-type]
