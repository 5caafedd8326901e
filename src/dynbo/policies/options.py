"""The options every policy shares, parsed, validated and documented in one place.

:class:`~dynbo.policies.Policy` takes these as its keyword arguments (its signature holds
their defaults) and hands them to :meth:`PolicyOptions.parse`; a subclass's own options
stay in that subclass.
"""

from __future__ import annotations

import copy
import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from dynbo.acquisition.constraints import DEFAULT_BETA_C, Safety
from dynbo.acquisition.optimize import SEARCH_LIMITS, BoxSearch
from dynbo.acquisition.ucb import BetaSchedule, Exploration, make_beta_schedule
from dynbo.kernels import as_family
from dynbo.models.kernel import (
    HYPERPARAMETER_RANGE,
    WIENER,
    HyperparameterBounds,
    KernelSpec,
    as_temporal,
    parse_initial_hyperparameters,
)
from dynbo.policies.domain import SearchDomain
from dynbo.policies.fit_strategy import FIT_STRATEGIES
from dynbo.validation import (
    MAX_ABS_TIME,
    at_most,
    boolean,
    finite_number,
    gamma_prior,
    named_option,
    plain_value,
    positive_int,
    usable_device,
)

if TYPE_CHECKING:
    from dynbo.policies.base import Policy

__all__ = ["ACQUISITION_TIMES", "PolicyOptions"]

#: values of the ``acquisition_time`` option.
ACQUISITION_TIMES = ("now", "response")


@dataclass(frozen=True, eq=False)
class PolicyOptions:
    """The shared options of a policy, parsed (built by :meth:`parse`).

    The options (keyword arguments of every policy; ranges are checked, and bad input
    raises ``ValueError`` naming the option):

    - ``bounds``: ``(2, d)`` lower and upper corners of the search box, original units;
      each width at least the smallest normal number of ``dtype``
      (``torch.finfo(dtype).tiny``: 1.2e-38 in float32).
    - ``seed``: seed of the policy's random stream (Sobol scrambling, k-DPP, ...), an
      integer in ``[0, 2**63)`` (default 0).
    - ``spatial_kernel``: family of ``k_S`` (default ``"matern52"``).
    - ``temporal_kernel``: family of ``k_T`` (default ``"matern32"``; ignored by policies
      that do not model time, but checked).
    - ``ard``: one spatial lengthscale per dimension (default False).
    - ``beta``: exploration schedule (``"dataset_size"``: ``0.2 d log(2n)``, default;
      ``{"kind": "log_time", "c1": .., "c2": ..}``; a number for a constant);
      parameters at most ``1e12``.
    - ``exploration_scale``: multiplier of the schedule's ``kappa`` (the multiplier of
      ``sigma`` in UCB: ``sqrt(beta)``, or ``beta`` for a radius), in ``[0, 1e6]``
      (default 1); the exploration setting ``dynbo tune`` adjusts.
    - ``sigma_multiplier``: a constant ``kappa`` at every iteration in ``[0, 1e6]``,
      replacing the beta schedule (:class:`~dynbo.acquisition.ucb.Exploration`): the
      same number gives every policy the same exploration (default ``None``).
    - ``raw_samples``, ``restarts``, ``acquisition_iterations``: acquisition box search
      (defaults 512, 10, 200; at most ``2**20``, ``4096`` and ``10**6``).
    - ``candidates``: ``(N, d)`` finite set of points (original units) to choose from
      instead of the box (sensors, grid cells).
    - ``arm_covariance``: ``(N, N)`` a given covariance of ``f`` over the ``candidates``
      (e.g. the empirical covariance of past data) used as the spatial kernel in place
      of ``spatial_kernel`` (no spatial lengthscale is fitted; the outputscale still
      multiplies it unless fixed). Not for W-DBO and BOLT, whose relevancy criterion
      needs a stationary kernel over a box.
    - ``learn_hyperparameters``: refit ``(lambda, l_S, l_T, sigma^2)`` at every
      iteration (default True).
    - ``min_fit_size``: refit only when the dataset holds at least this many
      observations; below it the previous values are kept (after a reset: the values
      learned before it). ``None``: the policy's default (1; 5 for the policies that
      reset, whose fresh datasets would otherwise be fitted on a single point, where
      every lengthscale and variance is undetermined).
    - ``fit_iterations``: iteration cap per start of a fit (L-BFGS-B or Newton iterations;
      default 50, at most ``10**6``).
    - ``fit_strategy``: how the hyperparameters are refitted at each iteration
      (:mod:`~dynbo.policies.fit_strategy`): ``"warm-newton"`` (default: projected Newton
      with the analytic Hessian from the previous values and from the runner-up optimum,
      and L-BFGS-B from the fresh values only when the restart rule asks for it; a few
      likelihood evaluations per fit) or ``"two-start"`` (L-BFGS-B from the previous and
      the fresh values at every fit: the behaviour before this option, for reruns of
      earlier reproductions).
    - ``hyperparameter_bounds``: overrides of :class:`HyperparameterBounds` fields, e.g.
      ``{"noise": (1e-4, 1.0), "fixed": ["noise"]}``, within
      :data:`~dynbo.models.kernel.HYPERPARAMETER_RANGE` (lengthscales ``[1e-6, 1e6]`` in
      space, ``[1e-6, 1e15]`` in time; variances ``[1e-12, 1e12]``).
    - ``initial_hyperparameters``: overrides of the starting values (``outputscale``,
      ``lengthscale_space``, ``lengthscale_time``, ``noise``), within the same range.
    - ``hyperpriors``: fit by maximum a posteriori under BoTorch's default weak priors
      instead of pure maximum likelihood: log-normal densities on the values (as
      GPyTorch's ``LogNormalPrior``), for each lengthscale of normalized inputs log-mean
      ``sqrt(2) + ln(D) / 2`` and log-sd ``sqrt(3)`` (mode ``exp(log-mean - 3)``), for
      the noise variance log-mean ``-4`` and log-sd 1. On by default: with few
      observations spread over a short time, maximum likelihood often explains noise
      with a temporal lengthscale shorter than the sampling interval, after which every
      old observation looks stale (see ``docs/design.md``).
    - ``lengthscale_prior``: a Gamma prior ``(concentration, rate)`` on the spatial
      lengthscales (unit-box units; the density of the value, as GPyTorch's
      ``GammaPrior``), in place of the log-normal one of ``hyperpriors`` (whose prior on
      the noise and the temporal lengthscale stays; alone when ``hyperpriors=False``).
      Each parameter is a number or, with ``ard=True``, ``d`` numbers (one per
      dimension); at most ``1e6``. Default ``None``: no Gamma prior. A prior set for
      inputs in other units translates by the box's side: a lengthscale ``l ~
      Gamma(a, b)`` in units where the side is ``s`` is ``l / s ~ Gamma(a, b s)`` in the
      unit box.
    - ``time_scale``: the time unit the temporal lengthscale's prior is expressed in
      (like W-DBO's normalization of time by the horizon; the harness passes the
      horizon), in ``(0, 1e15]``; default: the time elapsed since the policy's first
      observation, re-read at every fit.
    - ``lengthscale_time_floor``: smallest temporal lengthscale the fit may choose:
      ``"sampling_interval"`` (default: the median gap between consecutive observation
      times of the dataset), a number (time units), or ``None`` (only
      ``hyperparameter_bounds``); at most ``1e14``. A lengthscale shorter than the
      sampling interval makes consecutive observations nearly independent: nothing can
      be tracked, and a removal policy then judges every old observation stale
      (``docs/design.md``). Ignored when ``hyperparameter_bounds`` sets
      ``lengthscale_time``.
    - ``standardize``: standardize targets (default True).
    - ``acquisition_time``: ``"now"`` (default, the papers' choice): the acquisition is
      maximized at the time ``t`` the policy is asked; ``"response"`` (latency-aware):
      at ``t + D_hat``, where ``D_hat`` is the policy's prediction of the delay until its
      query is evaluated (``R(n)``, a cubic in the dataset size fitted to the delays it
      has seen between a ``suggest`` and the next ``observe``, as BOLT fits its response
      time) plus ``evaluation_cost``.
    - ``evaluation_cost``: seconds (``>= 0``) added to ``D_hat`` with
      ``acquisition_time="response"`` (the part of an evaluation before the measurement,
      when the observations' time stamps do not already include it; default 0).
    - ``dtype``: ``"float64"`` (default) or ``"float32"``.
    - ``device``: torch device of the model (``"cpu"``, the default, ``"cuda"``, ...).
    - ``constraints``: names of black-box constraints ``c_j(x, t) >= 0`` (safe), a list
      of distinct non-empty strings (default ``None``: none); every ``observe`` then
      takes ``constraints={name: value}`` and each constraint gets its own
      spatio-temporal GP over the kept data (:mod:`dynbo.acquisition.constraints`).
    - ``constraint_mode``: ``"feasibility"`` (default: the acquisition weighted by the
      probability of feasibility) or ``"safe"`` (only points whose lower bounds
      ``mu_j - beta_c sigma_j`` are all ``>= 0`` at the query time; needs constraints and
      ``safe_points``).
    - ``safe_points``: ``(k, d)`` points known to be safe (original units, inside the
      bounds): the safe mode's fallback before any confirmed point, and the step limit's
      reference before the first observation (default ``None``).
    - ``beta_c``: multiplier of ``sigma_j`` in the safe set's lower bounds, in ``[0, 100]``
      (default 3: ``Phi(-3) = 0.13 %`` nominal violation probability per constraint at the
      safe set's edge, a margin for a fitted model's miscalibration;
      :data:`~dynbo.acquisition.constraints.DEFAULT_BETA_C`).
    - ``max_step``: the largest move per coordinate from the last applied setting
      (original units; one number or ``d``), in every mode and without constraints too
      (default ``None``: no limit).
    - ``safe_fallback``: where safe mode goes when no point is safe: ``"seed"``
      (default: the ``safe_points``, known to be safe at every time; among several, the
      one whose lower bound is highest now) or ``"confirmed"`` (the latest observation
      measured safe and not measured unsafe since, the last known good setting; the one
      confirmed before it when it has been; the seeds when there is none).

    Attributes:
        arguments: every shared option as given (defaults filled in), as plain Python
            values: :meth:`as_config`.
        dtype: the torch dtype of the model.
        domain: the search box (and candidates, arm covariance) in ``d`` dimensions.
        seed: the seed.
        device: the torch device.
        beta_schedule: the exploration schedule.
        exploration: how ``beta`` becomes the multiplier ``kappa`` of ``sigma``.
        search: the acquisition box search.
        fit_iterations: iteration cap per start of a fit.
        fit_strategy: ``"warm-newton"`` or ``"two-start"``.
        min_fit_size: smallest dataset that is fitted (the policy's default filled in).
        hyperpriors: whether the fit is maximum a posteriori.
        lengthscale_prior: the Gamma prior ``(concentration, rate)`` on the spatial
            lengthscales (numbers or ``d``-tuples), or ``None``.
        time_scale: the time unit of the temporal prior, or ``None``.
        lengthscale_time_floor: ``"sampling_interval"``, a number, or ``None``.
        learn_hyperparameters: whether hyperparameters are refitted.
        standardize: whether targets are standardized.
        acquisition_time: ``"now"`` or ``"response"``.
        evaluation_cost: seconds added to the predicted delay.
        kernel: the GP's correlation families (temporal only where the policy models
            time).
        hyperparameter_bounds: the fit's bounds.
        user_bounds: the ``hyperparameter_bounds`` fields the user gave.
        initial_overrides: the starting hyperparameter values the user gave.
        safety: the constraint settings (:class:`~dynbo.acquisition.constraints.Safety`).
    """

    arguments: Mapping[str, Any]
    dtype: torch.dtype
    domain: SearchDomain
    seed: int
    device: torch.device
    beta_schedule: BetaSchedule
    exploration: Exploration
    search: BoxSearch
    fit_iterations: int
    fit_strategy: str
    min_fit_size: int
    hyperpriors: bool
    lengthscale_prior: tuple[Any, Any] | None
    time_scale: float | None
    lengthscale_time_floor: str | float | None
    learn_hyperparameters: bool
    standardize: bool
    acquisition_time: str
    evaluation_cost: float
    kernel: KernelSpec
    hyperparameter_bounds: HyperparameterBounds
    user_bounds: frozenset[str]
    initial_overrides: Mapping[str, Any]
    safety: Safety

    @property
    def dim(self) -> int:
        """``d``: the number of input dimensions."""
        return self.domain.dim

    def as_config(self) -> dict[str, Any]:
        """Every shared option as plain Python values (a copy): given back to
        :meth:`parse` with the same policy class, they build the same options."""
        return copy.deepcopy(dict(self.arguments))

    @classmethod
    def parse(
        cls,
        policy: type[Policy],
        *,
        bounds: Any,
        seed: Any,
        spatial_kernel: Any,
        temporal_kernel: Any,
        ard: Any,
        beta: Any,
        exploration_scale: Any,
        sigma_multiplier: Any,
        raw_samples: Any,
        restarts: Any,
        acquisition_iterations: Any,
        candidates: Any,
        arm_covariance: Any,
        learn_hyperparameters: Any,
        min_fit_size: Any,
        fit_iterations: Any,
        fit_strategy: Any,
        hyperparameter_bounds: Any,
        initial_hyperparameters: Any,
        hyperpriors: Any,
        time_scale: Any,
        lengthscale_time_floor: Any,
        standardize: Any,
        acquisition_time: Any,
        evaluation_cost: Any,
        dtype: Any,
        device: Any,
        constraints: Any = None,
        constraint_mode: Any = "feasibility",
        safe_points: Any = None,
        beta_c: Any = DEFAULT_BETA_C,
        max_step: Any = None,
        safe_fallback: Any = "seed",
        lengthscale_prior: Any = None,
    ) -> PolicyOptions:
        """Check and convert the shared options for a policy of class ``policy`` (every
        one is required here: the defaults are those of ``Policy.__init__``).

        The class says what the options may be: its ``name`` (in messages),
        ``accepts_arm_covariance``, ``models_time``, ``accepts_wiener``,
        ``default_min_fit_size`` and ``beta_is_radius``.

        Raises:
            ValueError: naming the first option that is wrong (in the order checked).
        """
        # every option as given, before any is converted (locals() holds just the arguments
        # here, so no option can be left out of the serialized form)
        arguments = {k: plain_value(v) for k, v in locals().items() if k not in ("cls", "policy")}
        if dtype not in ("float64", "float32"):
            raise ValueError(f"dtype must be 'float64' or 'float32', got {dtype!r}")
        torch_dtype = getattr(torch, dtype)
        domain = SearchDomain(bounds, torch_dtype, candidates, arm_covariance)
        if domain.arms is not None and not policy.accepts_arm_covariance:
            raise ValueError(
                f"arm_covariance: {policy.name} needs a stationary spatial kernel (its "
                "relevancy criterion integrates over the box), not a given covariance"
            )
        if (
            isinstance(seed, (bool, np.bool_))
            or not isinstance(seed, numbers.Integral)
            or not 0 <= seed < 2**63  # what a torch generator takes
        ):
            raise ValueError(f"seed must be an integer in [0, 2**63), got {seed!r}")
        parsed_device = usable_device(device)
        beta_schedule = make_beta_schedule(beta)
        exploration = Exploration(policy.beta_is_radius, exploration_scale, sigma_multiplier)
        search = BoxSearch(
            raw_samples=at_most(
                "raw_samples", raw_samples, SEARCH_LIMITS["raw_samples"], positive_int
            ),
            restarts=at_most("restarts", restarts, SEARCH_LIMITS["restarts"], positive_int),
            max_iterations=at_most(
                "acquisition_iterations",
                acquisition_iterations,
                SEARCH_LIMITS["max_iterations"],
                positive_int,
            ),
        )
        fit_cap = at_most(
            "fit_iterations", fit_iterations, SEARCH_LIMITS["max_iterations"], positive_int
        )
        if not isinstance(fit_strategy, str) or fit_strategy not in FIT_STRATEGIES:
            raise ValueError(f"fit_strategy must be one of {FIT_STRATEGIES}, got {fit_strategy!r}")
        smallest_fit = positive_int(
            "min_fit_size",
            policy.default_min_fit_size if min_fit_size is None else min_fit_size,
        )
        priors = boolean("hyperpriors", hyperpriors)
        if time_scale is not None:
            time_scale = finite_number("time_scale", time_scale)
            # a unit longer than any time a policy takes would only overflow the
            # temporal lengthscale's bounds (1e3 time scales)
            if not 0 < time_scale <= MAX_ABS_TIME:
                raise ValueError(
                    f"time_scale must be in (0, {MAX_ABS_TIME:g}] (the largest time a policy "
                    f"takes), got {time_scale}"
                )
        if lengthscale_time_floor is not None and lengthscale_time_floor != "sampling_interval":
            floor = finite_number("lengthscale_time_floor", lengthscale_time_floor)
            most = HYPERPARAMETER_RANGE["lengthscale_time"][1] / 10.0
            if not 0 < floor <= most:
                raise ValueError(f"lengthscale_time_floor must be in (0, {most:g}], got {floor}")
            lengthscale_time_floor = floor
        learn = boolean("learn_hyperparameters", learn_hyperparameters)
        standardized = boolean("standardize", standardize)
        if acquisition_time not in ACQUISITION_TIMES:
            raise ValueError(
                f"acquisition_time must be one of {ACQUISITION_TIMES}, got {acquisition_time!r}"
            )
        cost = finite_number("evaluation_cost", evaluation_cost)
        if cost < 0:
            raise ValueError(f"evaluation_cost must be >= 0, got {evaluation_cost!r}")
        spatial_family = named_option("spatial_kernel", as_family, spatial_kernel)
        # checked even where time is not modeled, so that a misspelling never passes
        temporal_family = named_option("temporal_kernel", as_temporal, temporal_kernel)
        if policy.models_time and not policy.accepts_wiener and temporal_family == WIENER:
            raise ValueError(
                f"temporal_kernel: 'wiener' is UI-TVBO's (it needs time measured from "
                f"an origin); {policy.name} takes a stationary family"
            )
        kernel = KernelSpec(
            dim=domain.dim,
            spatial=spatial_family,
            temporal=temporal_family if policy.models_time else None,
            ard=boolean("ard", ard),
            arms=domain.arms,
        )
        if lengthscale_prior is not None and domain.arms is not None:
            raise ValueError("lengthscale_prior: a given arm_covariance has no spatial lengthscale")
        gamma = gamma_prior("lengthscale_prior", lengthscale_prior, kernel.num_spatial_lengthscales)
        given = hyperparameter_bounds if isinstance(hyperparameter_bounds, Mapping) else {}
        user_bounds = frozenset(given)
        fit_bounds = HyperparameterBounds.from_options(hyperparameter_bounds)
        initial_overrides = parse_initial_hyperparameters(initial_hyperparameters, kernel)
        safety = Safety.parse(
            domain.lower,
            domain.upper,
            constraints=constraints,
            constraint_mode=constraint_mode,
            safe_points=safe_points,
            beta_c=beta_c,
            max_step=max_step,
            fallback=safe_fallback,
            candidates=domain.candidates,
        )
        return cls(
            arguments=arguments,
            dtype=torch_dtype,
            domain=domain,
            seed=int(seed),
            device=parsed_device,
            beta_schedule=beta_schedule,
            exploration=exploration,
            search=search,
            fit_iterations=fit_cap,
            fit_strategy=fit_strategy,
            min_fit_size=smallest_fit,
            hyperpriors=priors,
            lengthscale_prior=gamma,
            time_scale=time_scale,
            lengthscale_time_floor=lengthscale_time_floor,
            learn_hyperparameters=learn,
            standardize=standardized,
            acquisition_time=acquisition_time,
            evaluation_cost=cost,
            kernel=kernel,
            hyperparameter_bounds=fit_bounds,
            user_bounds=user_bounds,
            initial_overrides=initial_overrides,
            safety=safety,
        )
