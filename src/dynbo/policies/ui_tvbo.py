"""UI-TVBO (Brunzema, von Rohr & Trimpe 2022, "On Controller Tuning with Time-Varying
Bayesian Optimization"): forgetting by uncertainty injection.

The objective is a random walk of functions, ``f_0 ~ GP(0, sigma_k^2 k_SE)`` and
``f_t = f_{t-1} + w_t`` with ``w_t ~ GP(0, sigma_w^2 k_SE)`` per time unit, whose
covariance is ``k_SE(x, x') (sigma_k^2 + sigma_w^2 min(t, t'))`` on the time since the
start: the base class's spatio-temporal GP with the Wiener temporal factor
``1 + min(t, t') / l_T``, ``lambda = sigma_k^2`` and ``l_T = sigma_k^2 / sigma_w^2``
(:mod:`dynbo.models.kernel`). Unlike the Markov ("back to prior") factor of TV-GP-UCB,
the posterior mean far in the future stays where the last data put it while the
variance grows linearly.

Defaults follow the paper and its code: spatial SE with one lengthscale per dimension,
fitted by maximum a posteriori under a ``Gamma(6, 10/3)`` prior (concentration, rate)
inside ``[0.5, 6]``; ``sigma_k^2 = 1`` (standardized targets) and the noise variance
fixed to the known level (``noise_variance``, in the units of ``y``; learning it would
let the model explain change as noise); ``sigma_w^2 = 0.03`` per ``time_step`` fixed,
or learned by marginal likelihood (``learn_wiener_variance``); ``beta = 2`` constant.
``goal="minimize"`` maximizes the lower confidence bound ``-mu + sqrt(beta) sigma``
(the paper's LQR costs). ``binning`` is the data selection of the authors' thesis: keep
the ``binning_recent`` newest observations and, in each cell of a grid with ``binning``
cells per dimension, only the newest one.

Choices (docs/policies/ui-tvbo.md): time is measured from the first time the policy
sees (its first ``observe`` or ``suggest``) in units of ``time_step``; the targets are
standardized with the data held at every fit (the authors standardize once with the
initial data), so the fixed noise is converted to standardized units at every fit;
the lengthscale prior and box apply to the unit box the policy sees. The convexity
constrained variant (C-TVBO, Sec. III-C of the paper) is not provided.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import torch

from dynbo.acquisition.ucb import UpperConfidenceBound
from dynbo.models.kernel import (
    HYPERPARAMETER_RANGE,
    HyperparameterBounds,
    Hyperparameters,
    names_temporal,
)
from dynbo.policies.base import Diagnostics, Policy, register
from dynbo.policies.tunables import Tunable
from dynbo.validation import (
    at_most,
    boolean,
    finite_number,
    optional_number,
    ordered_pair,
    positive_int,
)
from dynbo.validation import time_step as check_time_step

__all__ = ["UITVBO"]

GOALS = ("maximize", "minimize")
#: smallest noise variance (standardized units) a known noise of 0 is replaced by
MIN_STANDARDIZED_NOISE = 1e-6
#: largest one (the top of the range a noise hyperparameter may take)
MAX_STANDARDIZED_NOISE = HYPERPARAMETER_RANGE["noise"][1]

#: largest ``sigma_w^2`` per time step, relative to the unit variance of the standardized
#: targets: larger walks say nothing more (every pair of times is uncorrelated already)
#: and, over ``1e12`` time steps, would overflow the kernel's entries.
MAX_WIENER_VARIANCE = 1e6
#: smallest lower end of a learned ``sigma_w^2``: its inverse is the time lengthscale the
#: fit searches, which stays within ``HYPERPARAMETER_RANGE``
MIN_LEARNED_WIENER_VARIANCE = 1.0 / HYPERPARAMETER_RANGE["lengthscale_time"][1]

#: most cells per dimension of the data-selection grid
MAX_BINNING = 10_000


@register
class UITVBO(Policy):
    """UI-TVBO: GP-UCB (or LCB) under the Wiener kernel ``k_SE (sigma_k^2 + sigma_w^2 min(t, t'))``.

    Args:
        noise_variance: the known noise variance of ``y`` (units of ``y`` squared);
            required (the harness passes the benchmark's). Never refit.
        wiener_variance: ``sigma_w^2``, the variance injected per ``time_step``
            relative to ``sigma_k^2 = 1`` (default 0.03, the paper's LQR setting); at
            most ``1e6`` (a walk of a thousand standard deviations per step).
        learn_wiener_variance: learn ``sigma_w^2`` by marginal likelihood inside
            ``wiener_variance_bounds`` (default ``False``: fixed).
        wiener_variance_bounds: range of a learned ``sigma_w^2`` (default ``(1e-4, 1)``),
            within ``[1e-15, 1e6]``.
        time_step: the clock time that counts as one time unit of the random walk
            (default 1: steps), in ``[1e-9, 1e12]``: with times up to ``1e12`` the
            kernel's entries stay finite.
        lengthscale_prior: ``(concentration, rate)`` of the Gamma prior on each spatial
            lengthscale (default ``(6, 10/3)``; either may be ``d`` values, one per
            dimension), or ``None`` for maximum likelihood (the shared option of
            :class:`~dynbo.policies.PolicyOptions`, with UI-TVBO's default).
        goal: ``"maximize"`` (default: UCB) or ``"minimize"`` (LCB, for costs).
        binning: cells per dimension of the data-selection grid, or ``None`` (default:
            keep everything).
        binning_recent: newest observations binning always keeps (default 10; only
            with ``binning``).
        spatial_kernel, ard, beta: as in the base class, with the paper's defaults
            ``"se"``, ``True`` and the constant 2.
        **kwargs: the shared :class:`~dynbo.policies.base.Policy` arguments
            (``hyperparameter_bounds["lengthscale_space"]`` defaults to ``(0.5, 6)``).
    """

    name = "ui-tvbo"
    reference = (
        "Brunzema, von Rohr & Trimpe (2022), On Controller Tuning with Time-Varying "
        "Bayesian Optimization, Sec. III (UI-TVBO)"
    )
    models_time = True
    fixed_temporal_kernel = "wiener"
    known_noise = True
    accepts_wiener = True
    #: a fixed ``sigma_w^2`` around the paper's 0.03 (not when it is learned)
    tunables = {
        **Policy.tunables,
        "wiener_variance": Tunable(1e-3, 0.3, log=True, conflicts=("learn_wiener_variance",)),
    }

    def __init__(
        self,
        bounds: Any,
        *,
        noise_variance: float | None = None,
        wiener_variance: float = 0.03,
        learn_wiener_variance: bool = False,
        wiener_variance_bounds: tuple[float, float] = (1e-4, 1.0),
        time_step: float = 1.0,
        lengthscale_prior: tuple[float, float] | None = (6.0, 10.0 / 3.0),
        goal: str = "maximize",
        binning: int | None = None,
        binning_recent: int | None = None,
        spatial_kernel: str = "se",
        ard: bool = True,
        beta: Any = 2.0,
        temporal_kernel: str | None = None,
        hyperparameter_bounds: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if not names_temporal(temporal_kernel, "wiener"):
            raise ValueError(
                f"temporal_kernel of ui-tvbo is the Wiener factor 'wiener', got {temporal_kernel!r}"
            )
        if noise_variance is None:
            raise ValueError(
                "noise_variance: ui-tvbo needs the known noise variance of y (it is never "
                "learned); the harness passes the benchmark's"
            )
        self.noise_variance = finite_number("noise_variance", noise_variance)
        if self.noise_variance < 0:
            raise ValueError(f"noise_variance must be >= 0, got {noise_variance!r}")
        self.wiener_variance = at_most("wiener_variance", wiener_variance, MAX_WIENER_VARIANCE)
        self.learn_wiener_variance = boolean("learn_wiener_variance", learn_wiener_variance)
        self.wiener_variance_bounds = ordered_pair(
            "wiener_variance_bounds",
            wiener_variance_bounds,
            lambda name, value: at_most(name, value, MAX_WIENER_VARIANCE),
        )
        if self.wiener_variance_bounds[0] < MIN_LEARNED_WIENER_VARIANCE:
            raise ValueError(
                f"wiener_variance_bounds must start at {MIN_LEARNED_WIENER_VARIANCE:g} or "
                f"above (the fit searches 1 / sigma_w^2 as a time lengthscale, at most "
                f"{HYPERPARAMETER_RANGE['lengthscale_time'][1]:g}), got {wiener_variance_bounds!r}"
            )
        self.time_step = check_time_step("time_step", time_step)
        if goal not in GOALS:
            raise ValueError(f"goal must be one of {GOALS}, got {goal!r}")
        self.goal = goal
        self.binning = (
            None if binning is None else at_most("binning", binning, MAX_BINNING, positive_int)
        )
        if binning_recent is not None and binning is None:
            raise ValueError("binning_recent applies to binning, which is off (binning=None)")
        self.binning_recent = positive_int(
            "binning_recent", 10 if binning_recent is None else binning_recent
        )
        if self.learn_wiener_variance:
            low, high = self.wiener_variance_bounds
            if not low <= self.wiener_variance <= high:
                raise ValueError(
                    f"wiener_variance {self.wiener_variance} is outside "
                    f"wiener_variance_bounds {self.wiener_variance_bounds}"
                )
        # what this model fixes or sets through its own options
        for option, given in (
            ("hyperpriors", "hyperpriors" in kwargs),
            ("lengthscale_time_floor", "lengthscale_time_floor" in kwargs),
        ):
            if given:
                raise ValueError(
                    f"{option}: ui-tvbo's priors are lengthscale_prior and its temporal "
                    "scale is wiener_variance"
                )
        for option, spec in (
            ("initial_hyperparameters", kwargs.get("initial_hyperparameters")),
            ("hyperparameter_bounds", hyperparameter_bounds),
        ):
            if spec is not None and not isinstance(spec, Mapping):
                raise ValueError(f"{option} must be a mapping, got {spec!r}")
            fixed_here = {"outputscale", "noise", "lengthscale_time"} & set(spec or {})
            if fixed_here:
                raise ValueError(
                    f"{option}: ui-tvbo sets {sorted(fixed_here)} itself (outputscale 1, "
                    "noise_variance, wiener_variance)"
                )
        bounds_spec = dict(hyperparameter_bounds or {})
        bounds_spec.setdefault("lengthscale_space", (0.5, 6.0))
        # the Wiener factor has no sampling-interval floor: sigma_w^2 is bounded instead
        kwargs.setdefault("lengthscale_time_floor", None)
        super().__init__(
            bounds,
            spatial_kernel=spatial_kernel,
            ard=ard,
            beta=beta,
            temporal_kernel="wiener",
            hyperparameter_bounds=bounds_spec,
            lengthscale_prior=lengthscale_prior,
            **kwargs,
        )
        #: the Gamma prior (checked by the shared option of the same name), or ``None``
        self.lengthscale_prior = self.options.lengthscale_prior
        self._origin: float | None = None

    # ---------------------------------------------------------------- time
    def _coordinate(self, t: float) -> float:
        """Time since the origin, in ``time_step`` units (the Wiener factor's input)."""
        if self._origin is None:
            self._origin = t
        return max(t - self._origin, 0.0) / self.time_step

    def _observe(self, x: torch.Tensor, t: float, y: float) -> None:
        self._append(x, t, y, coordinate=self._coordinate(t))

    def _time_coordinate(self, t: float) -> float:
        # read-only (predict): before any time was seen, every time is the origin
        if self._origin is None:
            return 0.0
        return max(t - self._origin, 0.0) / self.time_step

    def _acquisition_time(self, t: float) -> float:
        self._coordinate(t)  # the origin is the first time seen, not an aimed time
        return self._coordinate(self.aim_time(t))

    def _acquisition_function(self, t: float) -> UpperConfidenceBound:
        return UpperConfidenceBound(
            self._acquisition_model(),
            self.kappa(),
            self._acquisition_time(t),
            maximize=self.goal == "maximize",
        )

    @property
    def current_wiener_variance(self) -> float:
        """``sigma_w^2`` in use: ``lambda / l_T`` (given, or the latest learned value)."""
        h = self._gp.hyperparameters
        assert h.lengthscale_time is not None
        return h.outputscale / h.lengthscale_time

    # ---------------------------------------------------------------- data selection
    def _prepare(self, t: float, diag: Diagnostics) -> None:
        if self.binning is None or self.dataset_size <= self.binning_recent:
            return
        n = self.dataset_size
        cells = (self._to_unit(self._x) * self.binning).floor().clamp(max=self.binning - 1)
        order = torch.argsort(self._t, stable=True)  # oldest first
        keep = torch.zeros(n, dtype=torch.bool)
        keep[order[-self.binning_recent :]] = True
        newest_in_cell: dict[tuple[int, ...], int] = {}
        for index in order.tolist():  # later observations overwrite earlier ones
            newest_in_cell[tuple(int(c) for c in cells[index])] = index
        keep[list(newest_in_cell.values())] = True
        removed = int((~keep).sum())
        if removed:
            self._keep_only(keep)
        diag.removed = removed

    # ---------------------------------------------------------------- hyperparameters
    def _standardized_noise(self) -> float:
        gp = getattr(self, "_gp", None)  # None while the base class builds it
        scale = gp.target_scale if gp is not None and self.standardize else 1.0
        # a noise of 1e12 times the targets' variance already says the data mean nothing:
        # held there, it never overflows (a tiny scale of y, a huge noise_variance)
        standardized = self.noise_variance / scale**2 if scale > 0 else math.inf
        return min(max(standardized, MIN_STANDARDIZED_NOISE), MAX_STANDARDIZED_NOISE)

    def _restandardize(self) -> None:
        # the noise is known in the units of y: it follows the standardization
        super()._restandardize()
        self._gp.set_hyperparameters(
            replace(self._gp.hyperparameters, noise=self._standardized_noise())
        )

    def _fit(self, t: float):  # noqa: ANN202 - FitResult, as the base
        self._restandardize()
        return super()._fit(t)

    def fit_bounds(self) -> HyperparameterBounds:
        """Fixed ``sigma_k^2`` and noise; ``l_T = 1 / sigma_w^2`` fixed or in its bounds."""
        bounds = self.hyperparameter_bounds
        fixed = set(bounds.fixed) | {"outputscale", "noise"}
        if not self.learn_wiener_variance:
            fixed.add("lengthscale_time")
            return replace(bounds, fixed=frozenset(fixed))
        low, high = self.wiener_variance_bounds
        return replace(bounds, fixed=frozenset(fixed), lengthscale_time=(1.0 / high, 1.0 / low))

    def constraint_fit_bounds(self) -> HyperparameterBounds:
        """:meth:`fit_bounds` with the noise free: the known ``noise_variance`` is that of
        ``y``; a constraint's noise is fitted (unless ``hyperparameter_bounds`` fixes it)."""
        bounds = self.fit_bounds()
        free = {"noise"} - set(self.hyperparameter_bounds.fixed)
        return replace(bounds, fixed=frozenset(bounds.fixed - free))

    def priors(self) -> dict[str, tuple] | None:
        """The Gamma prior on the spatial lengthscales (``None``: maximum likelihood)."""
        if self.lengthscale_prior is None:
            return None
        return {"lengthscale_space": ("gamma", *self.lengthscale_prior)}

    def _initial_hyperparameters(self, times: torch.Tensor | None) -> Hyperparameters:
        h = super()._initial_hyperparameters(times)
        return replace(
            h,
            outputscale=1.0,
            lengthscale_time=1.0 / self.wiener_variance,
            noise=self._standardized_noise(),
        )

    def _clean(self, t: float, diag: Diagnostics) -> None:
        diag.extra["wiener_variance"] = self.current_wiener_variance

    def _extra_state(self) -> dict[str, Any]:
        return {"origin": self._origin}

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        self._origin = optional_number("origin", state["origin"])
