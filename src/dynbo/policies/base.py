"""The ask/tell base class every dynbo policy derives from.

A policy proposes where and when to evaluate a drifting objective and learns from the
answers::

    query = policy.suggest(t)          # t: the current time (seconds or steps)
    y = f(query.x, query.t) + noise    # evaluate at query.t (>= t; later for ABO)
    policy.observe(query.x, query.t, y)

``suggest`` runs one iteration of the algorithm in the order of W-DBO's Algorithm 1:
``_prepare`` (resets, windows) -> hyperparameter fit (maximum marginal likelihood,
warm-started) -> ``_clean`` (removal of stale observations) -> acquisition
(GP-UCB at time ``t``, over the unit box or a finite candidate set). A subclass says
what data to keep and which kernel to use by overriding these hooks; it never
re-implements the GP, the kernels or the acquisition optimizer.

Conventions (scikit-learn style): constructor arguments are stored unchanged as the
policy's ``config``; learned state lives in attributes with a leading underscore;
``state_dict()`` / ``Policy.from_state_dict()`` round-trip exactly (same floats, same
random stream), so a deployment survives a restart. Every public entry validates its
input and raises ``ValueError`` naming the problem *before* changing any state.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import math
import os
import time as _time
from abc import ABC
from collections.abc import Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np
import torch

from dynbo import deadline
from dynbo.acquisition.constraints import DEFAULT_BETA_C, maximize_safely
from dynbo.acquisition.latency import DurationTable
from dynbo.acquisition.pending import with_pending
from dynbo.acquisition.ucb import (
    BetaSchedule,
    UpperConfidenceBound,
)
from dynbo.deadline import Budget, BudgetSpent
from dynbo.models.constraints import ConstraintModels
from dynbo.models.fit import FitResult
from dynbo.models.gp import SpatioTemporalGP
from dynbo.models.kernel import (
    HYPERPARAMETER_RANGE,
    HyperparameterBounds,
    Hyperparameters,
)
from dynbo.policies.additional import AdditionalRequests, validate_answers
from dynbo.policies.early_fit import EarlyFit
from dynbo.policies.fit_strategy import FitHistory, fit_warm
from dynbo.policies.health import HealthMonitor
from dynbo.policies.options import PolicyOptions
from dynbo.policies.pending import MAX_BATCH, PendingQueries
from dynbo.policies.records import Dataset, Diagnostics, Query
from dynbo.policies.state import (
    capture_state,
    check_state,
    read_state_file,
    restore_state,
    write_state_file,
)
from dynbo.policies.tunables import EXPLORATION, Tunable
from dynbo.validation import (
    MAX_ABS_TIME,
    finite_number,
    max_abs_target,
    plain_value,
    positive_number,
)

__all__ = [
    "MAX_BATCH",
    "Query",
    "Dataset",
    "Diagnostics",
    "Policy",
    "register",
    "make",
    "available",
    "option_defaults",
    "policy_class",
]

_REGISTRY: dict[str, type[Policy]] = {}


def register(cls: type[Policy]) -> type[Policy]:
    """Class decorator: make a policy available to :func:`make` under ``cls.name``."""
    if cls.name in _REGISTRY and _REGISTRY[cls.name] is not cls:
        raise ValueError(f"a policy named {cls.name!r} is already registered")
    _REGISTRY[cls.name] = cls
    return cls


def make(name: str, **config: Any) -> Policy:
    """Create a registered policy by name, e.g. ``make("wdbo", bounds=..., seed=0)``."""
    cls = policy_class(name)
    accepted = option_defaults(cls)
    unknown = sorted(set(config) - set(accepted))
    if unknown:
        raise ValueError(
            f"unknown option(s) {', '.join(map(repr, unknown))} for policy {name!r}; "
            f"its options: {', '.join(sorted(accepted))}"
        )
    missing = sorted(
        k for k, v in accepted.items() if v is inspect.Parameter.empty and k not in config
    )
    if missing:
        raise ValueError(
            f"policy {name!r} needs the option(s) {', '.join(map(repr, missing))} "
            "(bounds: [lower corner, upper corner] of the search box)"
        )
    return cls(**config)


def option_defaults(cls: type[Policy]) -> dict[str, Any]:
    """Keyword options of a policy class and of its bases (up to :class:`Policy`).

    Returns:
        ``name -> default`` (``inspect.Parameter.empty`` for ``bounds``).
    """
    out: dict[str, Any] = {}
    for klass in cls.__mro__:
        if klass is object or "__init__" not in klass.__dict__:
            continue
        parameters = inspect.signature(klass.__init__).parameters
        for p, v in parameters.items():
            if v.kind is v.KEYWORD_ONLY or p == "bounds":
                out.setdefault(p, v.default)
        if klass is Policy:
            break
    return out


def available() -> list[str]:
    """Names of the registered policies."""
    return sorted(_REGISTRY)


def policy_class(name: str) -> type[Policy]:
    """The class registered under ``name``."""
    if not isinstance(name, str) or name not in _REGISTRY:
        raise ValueError(f"unknown policy {name!r}; available: {', '.join(available())}")
    return _REGISTRY[name]


class Policy(PendingQueries, ABC):
    """Base class of the TVBO policies (see the module docstring).

    Its keyword arguments, the options every policy shares (``bounds``, ``seed``, the
    kernels, the exploration schedule, the acquisition search, the fit, ``dtype``,
    ``device``, ...), are documented, with their ranges and defaults, in
    :class:`~dynbo.policies.PolicyOptions`, which parses them (the parsed object is the
    policy's ``options``); a subclass documents its own options.
    """

    name: ClassVar[str] = "policy"
    #: the paper (and algorithm / equation) the policy implements.
    reference: ClassVar[str] = ""
    #: whether the GP has a temporal kernel factor.
    models_time: ClassVar[bool] = False
    #: the temporal family the algorithm prescribes (``None``: the ``temporal_kernel``
    #: option chooses); a harness does not impose a benchmark's family on it.
    fixed_temporal_kernel: ClassVar[str | None] = None
    #: whether the policy takes the known ``noise_variance`` of ``y`` as an option (a
    #: harness passes the benchmark's).
    known_noise: ClassVar[bool] = False
    #: whether ``temporal_kernel="wiener"`` is allowed: the Wiener factor needs time
    #: measured from an origin (``t >= 0``), which only UI-TVBO's coordinates provide;
    #: the relevancy criterion (W-DBO, BOLT) needs a stationary factor anyway.
    accepts_wiener: ClassVar[bool] = False
    #: whether a given covariance over the candidates may replace the spatial kernel.
    accepts_arm_covariance: ClassVar[bool] = True
    #: ``min_fit_size`` when the option is not given.
    default_min_fit_size: ClassVar[int] = 1
    #: the result of :meth:`refit` kept for the next ``suggest`` (``None``: none).
    _early_fit: EarlyFit | None = None
    #: ``where -> seconds`` the unit costs its budgeted suggestions measured (the next
    #: budget's priors; timing only, never saved: a replay reads no clock)
    _budget_unit_seconds: Mapping[str, float] = MappingProxyType({})
    #: whether ``beta`` is a confidence radius that multiplies ``sigma`` itself (the
    #: kernel-ridge and SparQ families) rather than ``sqrt(beta)`` (see :meth:`kappa`).
    beta_is_radius: ClassVar[bool] = False
    #: the free settings ``dynbo tune`` chooses, with their ranges (:mod:`.tunables`)
    tunables: ClassVar[dict[str, Tunable]] = {"exploration_scale": EXPLORATION}

    def __new__(cls, *args: Any, **kwargs: Any) -> Policy:
        obj = super().__new__(cls)
        # Every constructor argument is recorded so that from_state_dict can rebuild
        # the same policy; subclasses need no bookkeeping of their own.
        config = dict(kwargs)
        if args:
            config["bounds"] = args[0]
            if len(args) > 1:
                raise TypeError("policies take only `bounds` positionally")
        obj._config = {k: plain_value(v) for k, v in config.items()}
        return obj

    def __init__(
        self,
        bounds: Sequence[Sequence[float]] | np.ndarray,
        *,
        seed: int = 0,
        spatial_kernel: str = "matern52",
        temporal_kernel: str = "matern32",
        ard: bool = False,
        beta: BetaSchedule | dict[str, Any] | str | float | None = None,
        exploration_scale: float = 1.0,
        sigma_multiplier: float | None = None,
        raw_samples: int = 512,
        restarts: int = 10,
        acquisition_iterations: int = 200,
        candidates: Sequence[Sequence[float]] | np.ndarray | None = None,
        arm_covariance: Sequence[Sequence[float]] | np.ndarray | None = None,
        learn_hyperparameters: bool = True,
        min_fit_size: int | None = None,
        fit_iterations: int = 50,
        fit_strategy: str = "warm-newton",
        hyperparameter_bounds: Mapping[str, Any] | None = None,
        initial_hyperparameters: Mapping[str, Any] | None = None,
        hyperpriors: bool = True,
        time_scale: float | None = None,
        lengthscale_prior: Sequence[Any] | None = None,
        lengthscale_time_floor: str | float | None = "sampling_interval",
        standardize: bool = True,
        acquisition_time: str = "now",
        evaluation_cost: float = 0.0,
        dtype: str = "float64",
        device: str | None = None,
        constraints: Sequence[str] | None = None,
        constraint_mode: str = "feasibility",
        safe_points: Sequence[Sequence[float]] | np.ndarray | None = None,
        beta_c: float = DEFAULT_BETA_C,
        max_step: float | Sequence[float] | None = None,
        safe_fallback: str = "seed",
    ) -> None:
        self._config: dict[str, Any]
        # every argument is an option PolicyOptions.parse takes by the same name
        arguments = {k: v for k, v in locals().items() if k != "self"}
        options = PolicyOptions.parse(type(self), **arguments)
        self.options = options
        # the parsed options under the names the hooks, subclasses and the harness read
        self.dtype = options.dtype
        self.device = options.device
        self.seed = options.seed
        self._domain = options.domain
        self.dim = options.dim
        self.kernel = options.kernel
        self.beta_schedule = options.beta_schedule
        self.exploration = options.exploration
        self.search = options.search
        self.learn_hyperparameters = options.learn_hyperparameters
        self.fit_iterations = options.fit_iterations
        self.fit_strategy = options.fit_strategy
        self.min_fit_size = options.min_fit_size
        self.hyperpriors = options.hyperpriors
        self.hyperparameter_bounds = options.hyperparameter_bounds
        self._user_bounds = options.user_bounds
        self._initial_overrides = options.initial_overrides
        self.lengthscale_time_floor = options.lengthscale_time_floor
        self.standardize = options.standardize
        self.acquisition_time = options.acquisition_time
        self.evaluation_cost = options.evaluation_cost
        # state, not only an option: load_state_dict sets it from the saved state
        self._time_scale: float | None = options.time_scale
        self._first_time: float | None = None
        # delays between a suggest and the next observe, per dataset size at the suggest
        self._delays = DurationTable()
        # (time asked, dataset size then, query time) of the last suggest not yet answered
        self._awaiting: tuple[float, int, float] | None = None
        self._asked_size: int | None = None  # the dataset size while an iteration runs
        self._max_abs_target = max_abs_target(self.dtype)
        self._generator = torch.Generator(device="cpu")
        self._generator.manual_seed(self.seed)
        self._health = HealthMonitor()
        # queries returned and not answered yet: ((d,) point in original units, time)
        self._pending: tuple[tuple[np.ndarray, float], ...] = ()
        self._x = torch.empty((0, self.dim), dtype=self.dtype)
        self._t = torch.empty((0,), dtype=self.dtype)
        self._y = torch.empty((0,), dtype=self.dtype)
        self._gp = SpatioTemporalGP(
            self.kernel, self._initial_hyperparameters(None), **self._gp_settings()
        )
        # the constraints' settings and GPs (both replaced, never edited: see their modules)
        self._safety = options.safety
        self._constraints = ConstraintModels.of(
            self._safety, self.kernel, self._gp.hyperparameters, **self._gp_settings()
        )
        self._iteration = 0
        self._fitted = False
        # what the restart rule of fit_strategy="warm-newton" remembers between fits
        self._fit_history: FitHistory | None = None
        self._last_suggest_time: float | None = None
        self._last_observe_time: float | None = None
        self._diagnostics: Diagnostics | None = None
        self._requests = self._no_requests()

    # ================================================================== public API
    @property
    def config(self) -> dict[str, Any]:
        """The constructor arguments (plain Python values)."""
        return copy.deepcopy(self._config)

    @property
    def bounds(self) -> np.ndarray:
        """``(2, d)`` search box in original units."""
        return np.stack([self._domain.lower, self._domain.upper])

    @property
    def dataset(self) -> Dataset:
        """The observations currently kept, in original units (copies)."""
        return Dataset(
            x=self._x.cpu().numpy().copy(),
            t=self._t.cpu().numpy().copy(),
            y=self._y.cpu().numpy().copy(),
        )

    @property
    def dataset_size(self) -> int:
        return int(self._y.shape[0])

    @property
    def iteration(self) -> int:
        """Number of ``suggest`` calls so far."""
        return self._iteration

    @property
    def hyperparameters(self) -> Hyperparameters:
        return self._gp.hyperparameters

    @property
    def model(self) -> SpatioTemporalGP:
        """The GP (read it; changing it directly bypasses the policy's bookkeeping)."""
        return self._gp

    @property
    def diagnostics(self) -> Diagnostics | None:
        """Diagnostics of the last ``suggest`` (``None`` before the first): a copy, as
        ``dataset`` and ``config`` are (changing it does not change the policy's state)."""
        return None if self._diagnostics is None else copy.deepcopy(self._diagnostics)

    def suggest(self, t: float, budget: float | Budget | None = None) -> Query:
        """Run one iteration at time ``t`` and return the next query.

        If the iteration fails (e.g. a numerical error in the fit), the policy is restored
        to its state before the call.

        Args:
            t: the time now.
            budget: seconds the iteration may take (or a :class:`~dynbo.deadline.Budget`,
                e.g. ``Budget.replay`` of a recorded one). The fit may use half of it;
                when spent, the fit keeps the previous hyperparameters, a removal step
                skips its criterion or stops removing and the acquisition search returns
                the best point it has evaluated. A unit of work (the likelihood's
                distances, a likelihood evaluation, the relevancy criterion, a removal,
                a raw-sample batch of 64 points, a gradient batch) does not start when
                its expected cost (the last one of its kind, in this call or an earlier
                budgeted one) would take the call past its limit; the work before the
                search leaves the search's setup and first raw batch their expected
                time. The first raw batch runs unless the budget is already spent (then
                the answer is the newest observation's point), so a call ends late by at
                most one unit that took longer than expected (plus work outside any
                unit: a factorization after a fit that finished).
                ``diagnostics.extra["time_budget"]`` says what was cut and what each
                kind of unit cost.

        Raises:
            ValueError: if ``t`` is not a finite real number with ``|t| <= 1e12`` or is
                earlier than the latest time the policy has seen (previous ``suggest``
                or ``observe``), or ``budget`` is not a positive number.
        """
        t = self._validate_time(t)
        self._check_time_order("suggest", t)
        if budget is not None and not isinstance(budget, Budget):
            # the unit costs measured in earlier budgeted calls make its checks predictive
            budget = Budget(positive_number("budget", budget), priors=self._budget_unit_seconds)
        snapshot = self._snapshot()
        try:
            with deadline.within(budget) if budget is not None else contextlib.nullcontext():
                query = self._run_iteration(t)
        except BaseException:
            # a numerical failure (or an interrupt) must not leave half an iteration
            self._restore(snapshot)
            raise
        if budget is not None:
            self._diagnostics.extra["time_budget"] = budget.report()
            self._budget_unit_seconds = budget.next_priors()
        return query

    def refit(self) -> bool:
        """Fit the hyperparameters now, ahead of the next :meth:`suggest` (optional).

        A service calls it after an ``observe``, while it waits for the next request, so
        that the next ``suggest`` only cleans and maximizes the acquisition. The policy's
        state (and :meth:`state_dict`) is left as it was: the fit's outcome is kept aside,
        and the next ``suggest`` takes it when its own fit would start from exactly the
        same inputs (the same GP, bounds, priors and starting values: no ``observe``, reset
        or window drop in between); otherwise it fits as usual. Either way the suggestion
        and the state after it are those without the call (diagnostics' ``fit_seconds``
        then counts only the fit done inside ``suggest``).

        Returns:
            whether a fit ran (``False`` when the policy does not learn its
            hyperparameters or holds fewer than ``min_fit_size`` observations).
        """
        self._early_fit = None
        if not (self.learn_hyperparameters and self.dataset_size >= self.min_fit_size):
            return False
        latest = max(
            (v for v in (self._last_suggest_time, self._last_observe_time) if v is not None),
            default=0.0,
        )
        self._early_fit = EarlyFit.run(self, lambda: self._fit(latest))
        return True

    def _fit_inputs(self) -> tuple[Any, ...]:
        """What the next :meth:`_fit` starts from (a subclass whose fit reads more extends it)."""
        return (
            dict(self._gp.__dict__),
            self.fit_bounds(),
            self.priors(),
            self._initial_hyperparameters(self._t),
            self._fitted,
            self.fit_iterations,
            self._fit_history,
            self._constraints,
        )

    def _fit_or_reuse(self, t: float) -> FitResult:
        """:meth:`_fit`, or the outcome of :meth:`refit` when it started from the same inputs."""
        early, self._early_fit = self._early_fit, None
        if early is None or not early.matches(self):
            return self._fit(t)
        return early.apply(self)

    def _run_iteration(self, t: float) -> Query:
        diag = Diagnostics(iteration=self._iteration + 1, time=t)
        size_before = self.dataset_size
        self._asked_size = size_before
        start = _time.perf_counter()
        self._prepare(t, diag)
        # a new monitor object: the one the snapshot holds stays as it was (a failed
        # iteration restores the policy's attributes, not the objects they point to)
        self._health = copy.copy(self._health)
        health = self._health.before_fit(self)
        prepared = _time.perf_counter()
        if self.learn_hyperparameters and self.dataset_size >= self.min_fit_size:
            # only a soft budget can stop the fit half-way and keep going: the snapshot
            # (a copy of the subclass state) is taken only then
            snapshot = self._snapshot() if deadline.soft_budget_active() else None
            try:
                diag.fit_evaluations = self._fit_or_reuse(t).evaluations
            except BudgetSpent:  # the previous hyperparameters, in the data's units
                assert snapshot is not None
                self._restore(snapshot)
                self._restandardize()
        elif self.dataset_size > 0:
            # fixed hyperparameters: only the standardization follows the data
            self._restandardize()
        fitted = _time.perf_counter()
        self._clean(t, diag)
        # what every suggestion does before its first acquisition values (a budget
        # reserves its expected cost: deadline.Budget.reserve)
        deadline.begin(deadline.ACQUISITION_SETUP)
        health += self._health.check(self)
        if health:
            diag.extra["health"] = health
        cleaned = _time.perf_counter()
        unit, query_time = self._acquire(t, diag)
        additional = self._additional_queries(t, unit, diag)
        acquired = _time.perf_counter()
        diag.fit_seconds = fitted - prepared
        diag.cleaning_seconds = (cleaned - fitted) + (prepared - start)
        diag.acquisition_seconds = acquired - cleaned
        diag.dataset_size = self.dataset_size
        diag.hyperparameters = self._gp.hyperparameters.as_dict()
        self._iteration += 1
        self._last_suggest_time = t
        self._awaiting = (t, size_before, float(query_time))
        self._asked_size = None
        self._diagnostics = diag
        diag.additional_queries = len(additional)
        self._requests = AdditionalRequests(additional, self._domain.tolerance())
        point = self._domain.point_from_unit(unit)
        self._pending = (*self._pending, (point.copy(), float(query_time)))
        return Query(x=point, t=float(query_time), additional=additional.copy())

    def observe(
        self,
        x: Sequence[float] | np.ndarray,
        t: float,
        y: float,
        constraints: Mapping[str, float] | None = None,
    ) -> None:
        """Add the observation ``y = f(x, t) + noise`` (and ``c_j(x, t)`` of each declared
        constraint: ``constraints={name: value}``, every declared name, nothing else).

        Raises:
            ValueError: wrong shape, NaN/inf or non-real values, ``x`` outside the bounds,
                ``|y|`` above the model's limit (``1e150`` in float64, ``1e18`` in
                float32), ``|t| > 1e12``, or ``t`` earlier than the latest time the policy
                has seen (previous ``observe`` or ``suggest``; for the answer to a pending
                query: the previous ``observe`` or that query's own ``t``), constraint
                values missing, unknown, non-finite or given to a policy without
                constraints; the policy is left unchanged.

        The answer to a pending query (see
        :attr:`~dynbo.policies.pending.PendingQueries.pending`) may be stamped before a
        later ``suggest``: with several devices, the policy asks for the next query while
        earlier ones are still being evaluated, and their answers carry the time they
        were evaluated at (``dynbo.harness.devices``).
        """
        x_arr = self._domain.validate_point(x)
        t = self._validate_time(t)
        y = finite_number("y", y)
        if abs(y) > self._max_abs_target:
            # squares of such values overflow the standardization
            raise ValueError(
                f"y = {y} is too large to model (|y| must be <= {self._max_abs_target:g} "
                f"with dtype {str(self.dtype).replace('torch.', '')})"
            )
        answered = self._pending_index(x_arr)
        older = answered is not None and answered < len(self._pending) - 1
        if older:  # another device's later suggestion may have come in between
            self._check_answer_time(t, self._pending[answered][1])
        else:  # the newest query (ABO's look-ahead may be answered early) or none
            self._check_time_order("observe", t)
        values = self._safety.values(constraints, self._max_abs_target)
        snapshot = self._snapshot()
        try:
            self._safety = self._safety.expecting([values])
            self._observe(x_arr, t, y)
        except BaseException:
            self._restore(snapshot)
            raise
        if self._first_time is None:
            self._first_time = t
        self._last_observe_time = t
        self._pending = self._without_pending(x_arr)
        # the answer to a query older than the newest one says nothing of the newest
        # one's delay (``_awaiting`` is the newest suggestion): its own asking time is
        # not kept, so it records no delay and the newest stays awaited
        if self._awaiting is not None and not older:
            asked, size, wanted = self._awaiting
            # a query for a later time (ABO) that was answered then says nothing of
            # the delay (it was shorter than the wait): only answers after the wanted
            # time, or of queries for the time they were asked, measure it
            if wanted <= asked or t > wanted:
                self._delays.record(size, t - asked)
            self._awaiting = None

    def forget(self, x: Sequence[float] | np.ndarray, t: float, y: float | None = None) -> None:
        """Remove a kept observation from the dataset and the GP, exactly (O(n^2)).

        The GP loses the observation by the same update a policy's own removal uses;
        what the policy decided from it before (a reset it triggered, W-DBO's removals
        and budget, an ET-GP-UCB trigger, hyperparameters fitted with it) stays as it was:
        only the dataset forgets. The next ``suggest`` refits without it.

        Args:
            x: ``(d,)`` the observation's point (original units).
            t: its time.
            y: its value, to tell apart observations at the same point and time.

        Raises:
            ValueError: no kept observation matches (never made, or already removed by
                the policy's own rule or a reset); the policy is left unchanged.
        """
        x_arr = self._domain.validate_point(x)
        t = self._validate_time(t)
        y = None if y is None else finite_number("y", y)
        index = self.dataset.find(x_arr, t, y, tolerance=self._domain.tolerance())
        if index is None:
            raise ValueError(
                f"no kept observation at x = {list(map(float, x_arr))}, t = {t}"
                + ("" if y is None else f", y = {y}")
                + ": it was never made, or the policy removed it already"
            )
        snapshot = self._snapshot()
        try:
            self._remove(index)
        except BaseException:
            self._restore(snapshot)
            raise

    def observe_additional(
        self,
        x: Sequence[Sequence[float]] | np.ndarray,
        t: float | Sequence[float] | np.ndarray,
        y: Sequence[float] | np.ndarray,
        constraints: Mapping[str, Sequence[float] | np.ndarray] | None = None,
    ) -> None:
        """Add the answers to the additional queries of the last ``suggest``.

        Call it after ``suggest`` returned a non-empty ``Query.additional`` (the rows of
        ``x`` are those points, in any order, each at most once; some may be left
        unanswered) and before the next ``suggest``, typically after ``observe`` of the
        main query.

        Args:
            x: ``(m, d)`` requested points.
            t: the time of each evaluation: one number or ``(m,)`` non-decreasing
                times, not before the latest time the policy has seen.
            y: ``(m,)`` observed values.
            constraints: ``name -> (m,)`` values of every declared constraint (as
                :meth:`observe`).

        Raises:
            ValueError: a point that was not requested (or answered already), wrong
                shapes, NaN/inf, ``|y|`` above the model's limit, times out of order, or
                constraint values as :meth:`observe` refuses; the policy is left unchanged.
        """
        points, rows, times, values = validate_answers(
            self._domain, x, t, y, self._validate_time, self._max_abs_target
        )
        if not times:
            return
        self._check_time_order("observe_additional", times[0])
        indices = self._requests.match(points)
        arriving = self._safety.value_rows(constraints, len(times), self._max_abs_target)
        snapshot = self._snapshot()
        try:
            self._safety = self._safety.expecting(arriving)
            # float64 whatever torch's default dtype: the GP converts to its own dtype
            self._observe_additional(
                rows,
                torch.tensor(times, dtype=torch.float64),
                torch.tensor(values, dtype=torch.float64),
            )
            self._requests.mark(indices)
        except BaseException:
            self._restore(snapshot)
            raise
        if self._first_time is None:
            self._first_time = times[0]
        self._last_observe_time = times[-1]

    def _no_requests(self) -> AdditionalRequests:
        return AdditionalRequests(np.empty((0, self.dim)), self._domain.tolerance())

    @staticmethod
    def _validate_time(t: Any) -> float:
        t = finite_number("t", t)
        if abs(t) > MAX_ABS_TIME:
            # beyond this, time differences lose their digits and lengthscales overflow
            raise ValueError(f"t = {t:g} is out of range (|t| must be <= {MAX_ABS_TIME:g})")
        return t

    def _check_time_order(self, what: str, t: float) -> None:
        """One clock for both calls: neither may go back before the latest time seen."""
        for other, last in (
            ("suggest", self._last_suggest_time),
            ("observe", self._last_observe_time),
        ):
            if last is not None and t < last:
                raise ValueError(f"time went backwards: {what}(t={t}) after {other}(t={last})")

    def _check_answer_time(self, t: float, asked: float) -> None:
        """The answer to a pending query asked for time ``asked``: not before it, nor
        before the previous ``observe`` (the dataset's times stay in order); later
        suggestions may have come in between (another device's)."""
        if t < asked:
            raise ValueError(f"time went backwards: observe(t={t}) answers a query for t={asked}")
        last = self._last_observe_time
        if last is not None and t < last:
            raise ValueError(f"time went backwards: observe(t={t}) after observe(t={last})")

    def _snapshot(self) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], torch.Tensor]:
        # The GP and the policy replace their tensors rather than edit them in place, so
        # shallow copies of the attribute dictionaries are a complete, cheap snapshot;
        # subclass state comes as copies from _extra_state.
        return (
            dict(self.__dict__),
            dict(self._gp.__dict__),
            copy.deepcopy(self._extra_state()),
            self._generator.get_state(),
        )

    def _restore(
        self, snapshot: tuple[dict[str, Any], dict[str, Any], dict[str, Any], torch.Tensor]
    ) -> None:
        attributes, gp_attributes, extra, generator = snapshot
        self.__dict__.clear()
        self.__dict__.update(attributes)
        self._gp.__dict__.clear()
        self._gp.__dict__.update(gp_attributes)
        self._load_extra_state(extra)
        self._generator.set_state(generator)

    # ================================================================== hooks
    def _prepare(self, t: float, diag: Diagnostics) -> None:
        """Before the fit: resets, windows (default: nothing)."""

    def _clean(self, t: float, diag: Diagnostics) -> None:
        """After the fit: remove stale observations (default: keep everything)."""

    def _observe(self, x: torch.Tensor, t: float, y: float) -> None:
        """Record an observation (default: append it)."""
        self._append(x, t, y)

    def _additional_queries(self, t: float, unit: torch.Tensor, diag: Diagnostics) -> np.ndarray:
        """After the acquisition: ``(m, d)`` past inputs (original units) to evaluate afresh.

        ``unit`` is the chosen query (unit box). Default: none.
        """
        return np.empty((0, self.dim))

    def _observe_additional(self, x: torch.Tensor, t: torch.Tensor, y: torch.Tensor) -> None:
        """Record answers to additional queries: ``(m, d)`` points, ``(m,)`` times and values."""
        for row in range(x.shape[0]):
            self._append(x[row], float(t[row]), float(y[row]))

    def _gp_inputs(self, unit: torch.Tensor, times: torch.Tensor) -> torch.Tensor:
        """GP input rows for unit-box points and their time stamps."""
        if self.kernel.uses_time:
            return torch.cat([unit, times.reshape(-1, 1)], dim=1)
        return unit

    def aim_time(self, t: float) -> float:
        """The clock time a query asked for at ``t`` is aimed at (seconds or steps).

        ``t`` itself, or with ``acquisition_time="response"`` ``t + D_hat``: the
        predicted delay at the current dataset size (0 before any delay was seen) plus
        ``evaluation_cost``.
        """
        if self.acquisition_time == "now":
            return t
        # the delay belongs to the dataset size when the policy was asked (before its
        # cleaning), as it was recorded
        size = self.dataset_size if self._asked_size is None else self._asked_size
        delay = self._delays.predict(size)
        return t + (0.0 if delay is None else max(delay, 0.0)) + self.evaluation_cost

    def _time_coordinate(self, t: float) -> float:
        """The GP's time input for clock time ``t`` (default ``t``; TV-GP-UCB, UI-TVBO map it)."""
        return t

    def _acquisition_time(self, t: float) -> float:
        """The GP time coordinate at which the acquisition is maximized (:meth:`aim_time`)."""
        return self._time_coordinate(self.aim_time(t))

    def predict(
        self,
        x: Sequence[Sequence[float]] | np.ndarray,
        t: float | Sequence[float] | np.ndarray,
        output: str | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The model's posterior mean and variance of ``f(x, t)`` now (original units).

        Args:
            x: ``(m, d)`` points in the original domain.
            t: one time or ``(m,)`` times (for a policy whose model ignores time, the
                same answer at every time).
            output: the name of a declared constraint: its GP's posterior of ``c(x, t)``
                (default ``None``: the objective).

        Returns:
            ``(mean, variance)``, each ``(m,)``: what the policy's acquisition reads
            (for the kernel-ridge family, the variance is the squared width).

        Raises:
            ValueError: for points of the wrong shape, non-finite values, points outside
                the bounds, ``|t| > 1e12`` or an ``output`` that is not a declared constraint.
        """
        points, times = self._domain.validate_points_and_times(x, t)
        unit = self._to_unit(torch.as_tensor(points, dtype=self.dtype))
        coordinates = torch.tensor(
            [self._time_coordinate(float(v)) for v in times], dtype=self.dtype
        )
        inputs = self._gp_inputs(unit, coordinates).to(self.device)
        gp = self._gp if output is None else self._constraints.gp(output)
        with torch.no_grad():
            model = self._acquisition_model() if output is None else gp
            mean, var = model.predict(inputs, standardized=True)
        scale, offset = gp.target_scale, gp.target_mean
        return (mean * scale + offset).cpu().numpy(), (var * scale**2).cpu().numpy()

    def _acquisition_function(self, t: float) -> UpperConfidenceBound:
        """The acquisition of the iteration at ``t`` (default: UCB at the aimed time)."""
        return UpperConfidenceBound(
            self._acquisition_model(), self.kappa(), self._acquisition_time(t)
        )

    def _query_time(self, t: float, acq: UpperConfidenceBound, unit: torch.Tensor) -> float:
        """The clock time the query asks to be evaluated at (default ``t``: now)."""
        return t

    def beta(self) -> float:
        """The exploration parameter of the coming iteration (the policy's schedule)."""
        return self.beta_schedule(
            n=self.dataset_size, iteration=self._iteration + 1, dim=self.dim, gp=self._gp
        )

    def kappa(self) -> float:
        """Multiplier of the posterior standard deviation: ``sqrt(beta)`` by default.

        Policies whose ``beta`` is already a confidence radius (:attr:`beta_is_radius`:
        the kernel-ridge and SparQ families) use ``beta`` itself; ``exploration_scale``
        multiplies it and ``sigma_multiplier`` replaces it (:attr:`exploration`).
        """
        return self.exploration.kappa(self.beta)

    def _acquisition_model(self) -> Any:
        """The model the UCB reads (default: the GP; a ridge view for the weighted family)."""
        return self._gp

    def _acquire(self, t: float, diag: Diagnostics) -> tuple[torch.Tensor, float]:
        """Maximize GP-UCB at time ``t`` (under the constraints and step limit,
        :func:`~dynbo.acquisition.constraints.maximize_safely`); return the unit point and
        the query time."""
        acq = self._acquisition_function(t)
        if self._pending and with_pending(acq, self._pending_inputs()):
            diag.extra["pending"] = len(self._pending)
        diag.extra["sigma_multiplier"] = acq.kappa
        searches_time = acq.time_window is not None
        record: dict[str, Any] = {}
        self._constraints = self._constraints.with_noise_scale(self._gp.noise_scale)
        unit = self._no_time_to_search(searches_time)
        if unit is not None:
            record["budget_cut"] = (
                "skipped: the budget was spent before the search (the newest observation's point)"
            )
        else:
            unit = self._search(acq, searches_time, record)
        diag.acquisition_evaluations = record.get("evaluations", 0)
        if "budget_cut" in record:
            diag.extra["acquisition_cut"] = record["budget_cut"]
        if "constraints" in record:
            diag.extra["constraints"] = record["constraints"]
        query_time = self._query_time(t, acq, unit)
        if searches_time:
            diag.extra["query_time"] = query_time
        return (unit[: self.dim] if searches_time else unit), query_time

    def _no_time_to_search(self, searches_time: bool) -> torch.Tensor | None:
        """Under a soft budget already spent when the search would start: the newest
        observation's unit point, the answer that costs nothing (the setting the system
        was last evaluated at); else ``None`` (with any time left the search evaluates
        at least its first raw-sample batch). Not with a look-ahead window, constraints
        or a step limit (their own rules choose the point), nor without data."""
        if (
            searches_time
            or self._safety.enabled
            or self.dataset_size == 0
            or not deadline.soft_budget_active()
            or not deadline.spent(deadline.RAW_SAMPLE, predictive=False)
        ):
            return None
        return self._to_unit(self._x[-1]).to(self.device)

    def _search(
        self, acq: UpperConfidenceBound, searches_time: bool, record: dict[str, Any]
    ) -> torch.Tensor:
        """The acquisition search of :meth:`_acquire` (its unit-box maximizer)."""
        return maximize_safely(
            acq,
            self.dim,
            safety=self._safety,
            models=self._constraints,
            lower=self._domain.lower,
            upper=self._domain.upper,
            data_unit=self._to_unit(self._x).to(self.device),
            candidates=self._domain.candidates_unit,
            searches_time=searches_time,
            search=self.search,
            generator=self._generator,
            dtype=self.dtype,
            device=self.device,
            record=record,
        )

    def _extra_state(self) -> dict[str, Any]:
        """Subclass state for :meth:`state_dict` (plain values and tensors)."""
        return {}

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        """Inverse of :meth:`_extra_state`."""

    # ================================================================== helpers for subclasses
    def _append(
        self,
        x: torch.Tensor,
        t: float,
        y: float,
        *,
        coordinate: float | None = None,
        noise_scale: float | None = None,
    ) -> None:
        """Add one observation to the dataset and the GPs (O(n^2) each).

        ``coordinate`` is the GP's time input (default ``t``; TV-GP-UCB uses the
        observation index), ``noise_scale`` the observation's noise multiplier. The
        constraint values are the next of those ``observe`` handed over (``_safety``).
        """
        x = x.reshape(1, -1).to(self.dtype)
        times = torch.tensor([t], dtype=self.dtype)
        column = times if coordinate is None else torch.tensor([coordinate], dtype=self.dtype)
        inputs = self._gp_inputs(self._to_unit(x), column).to(self.device)
        self._gp.add(inputs, float(y), noise_scale=noise_scale)
        values, self._safety = self._safety.appended(x.reshape(-1).cpu().numpy())
        self._constraints = self._constraints.added(inputs, torch.as_tensor(values), noise_scale)
        self._x = torch.cat([self._x, x])
        self._t = torch.cat([self._t, times])
        self._y = torch.cat([self._y, torch.tensor([y], dtype=self.dtype)])

    def _remove(self, index: int) -> None:
        """Remove observation ``index`` from the dataset and the GPs (O(n^2) each)."""
        self._gp.remove(index)
        self._constraints = self._constraints.removed([index])
        keep = torch.ones(self.dataset_size, dtype=torch.bool)
        keep[index] = False
        self._x, self._t, self._y = self._x[keep], self._t[keep], self._y[keep]

    def _clear(self) -> None:
        """Forget every observation (a reset)."""
        self._keep_only(torch.zeros(self.dataset_size, dtype=torch.bool))

    def _keep_only(self, keep: torch.Tensor) -> None:
        """Keep the observations where the boolean mask ``keep`` is true (refactorizes).

        The GP keeps the kept rows' inputs and noise multipliers as they were.
        """
        mask = keep.to(self._gp.inputs.device)
        inputs, noise_scale = self._gp.inputs[mask], self._gp.noise_scale[mask]
        self._x, self._t, self._y = self._x[keep], self._t[keep], self._y[keep]
        self._gp.set_data(
            inputs, self._y.to(self.device), noise_scale, keep_scale=self._keeps_units()
        )
        self._constraints = self._constraints.kept(keep, keep_scale=self._keeps_units())

    def _gp_settings(self) -> dict[str, Any]:
        """The keyword arguments every GP of the policy is built with."""
        return {"standardize": self.standardize, "dtype": self.dtype, "device": self.device}

    def _keeps_units(self) -> bool:
        """Whether the target scale must stay as it is (the hyperparameters' units).

        Once the hyperparameters have been fitted, they are in the units of that fit, and
        below ``min_fit_size`` observations nothing refits them: a scale re-estimated from
        the one or two points left after a reset would change their meaning (a noise
        fitted as 1e-4 of a spread of 10^4 read as 1e-4 of the spread of two points).
        Before the first fit the scale follows the data (the initial values are meant for
        standardized targets).
        """
        return self._fitted and self.dataset_size < self.min_fit_size

    def _restandardize(self) -> None:
        """Recompute the target standardizations from the data held (:meth:`_keeps_units`)."""
        self._gp.restandardize(keep_scale=self._keeps_units())
        self._constraints = self._constraints.restandardized(keep_scale=self._keeps_units())

    def _fit(self, t: float) -> FitResult:
        """Refit the hyperparameters (MAP under :meth:`priors`, or ML), warm-started.

        By ``fit_strategy`` (:func:`~dynbo.policies.fit_strategy.fit_warm`, whose module
        says why): two L-BFGS-B starts, the previous and fresh values, at every fit; or
        Newton from the previous values and the last fit's runner-up, and from the fresh
        values when the restart rule doubts the warm optimum. Each constraint GP is fitted
        the same way, with its own warm start and history, within
        :meth:`constraint_fit_bounds`.
        """
        fresh = self._initial_hyperparameters(self._t)
        common = dict(
            strategy=self.fit_strategy,
            priors=self.priors(),
            fresh=fresh,
            fitted=self._fitted,
            max_iterations=self.fit_iterations,
        )
        result, self._fit_history = fit_warm(
            self._gp, bounds=self.fit_bounds(), history=self._fit_history, **common
        )
        if len(self._constraints):
            bounds = self.constraint_fit_bounds()
            self._constraints, _ = self._constraints.with_noise_scale(self._gp.noise_scale).fitted(
                lambda gp, history: fit_warm(gp, bounds=bounds, history=history, **common)
            )
        self._fitted = True
        return result

    def constraint_fit_bounds(self) -> HyperparameterBounds:
        """The bounds of the constraint GPs' fits (default: :meth:`fit_bounds`)."""
        return self.fit_bounds()

    def fit_bounds(self) -> HyperparameterBounds:
        """The bounds of the next fit: ``hyperparameter_bounds`` with a data-aware ``l_T`` box.

        Unless the user bounded ``lengthscale_time``, its lower end is raised to
        :meth:`lengthscale_time_lower` and its upper end to ``1e3`` time scales, so that
        problems in any time unit (milliseconds, days) get the same relative room.
        """
        bounds = self.hyperparameter_bounds
        if not self.kernel.uses_time or "lengthscale_time" in self._user_bounds:
            return bounds
        low, high = bounds.lengthscale_time
        floor = self.lengthscale_time_lower()
        if floor is not None:
            low = max(low, floor)
        high = max(high, 1e3 * self.time_scale, 10.0 * low)
        # within the widest box a fit may search (times reach 1e12: it is reached only
        # by time scales and sampling gaps of that order)
        high = min(high, HYPERPARAMETER_RANGE["lengthscale_time"][1])
        return replace(bounds, lengthscale_time=(min(low, high / 10.0), high))

    def lengthscale_time_lower(self) -> float | None:
        """The floor on ``l_T`` (time units) set by ``lengthscale_time_floor``, if any.

        ``"sampling_interval"``: the median positive gap between consecutive observation
        times of the dataset (``None`` while all observations share one time).
        """
        floor = self.lengthscale_time_floor
        if floor is None or isinstance(floor, float):
            return floor
        if self.dataset_size < 2:
            return None
        gaps = torch.diff(torch.sort(self._t).values)
        gaps = gaps[gaps > 0]
        return float(torch.median(gaps)) if gaps.numel() else None

    def priors(self) -> dict[str, tuple] | None:
        """Priors of the fit, ``name -> (mean, sd) of log value`` (log-normal) or
        ``name -> ("gamma", concentration, rate)`` (``None``: maximum likelihood).

        With ``hyperpriors``, BoTorch's defaults (Hvarfner et al. 2024,
        ``get_covar_module_with_dim_scaled_prior`` and
        ``get_gaussian_likelihood_with_lognormal_prior``): for each lengthscale of
        inputs normalized to unit scale (``D`` inputs; time divided by
        :attr:`time_scale`) log-mean ``sqrt(2) + ln(D) / 2`` and log-sd ``sqrt(3)``; for
        the noise variance log-mean ``-4`` and log-sd 1. A ``lengthscale_prior`` replaces
        the spatial lengthscales' prior by that Gamma (and is the only prior without
        ``hyperpriors``).
        """
        priors: dict[str, tuple] = {}
        if self.hyperpriors:
            loc = math.sqrt(2.0) + 0.5 * math.log(self.kernel.input_dim)
            priors = {"lengthscale_space": (loc, math.sqrt(3.0)), "noise": (-4.0, 1.0)}
            if self.kernel.uses_time:
                priors["lengthscale_time"] = (loc + math.log(self.time_scale), math.sqrt(3.0))
        if self.options.lengthscale_prior is not None:
            priors["lengthscale_space"] = ("gamma", *self.options.lengthscale_prior)
        return priors or None

    @property
    def time_scale(self) -> float:
        """Unit of time of the temporal prior and of the fresh start of ``l_T``.

        The ``time_scale`` option if given; otherwise the time elapsed from the first
        to the latest observation the policy was told (1 while that is 0). It follows
        the deployment as it runs; it is not the span of the data kept, which a removal
        policy shrinks (a shrinking unit would pull ``l_T`` down with it).
        """
        if self._time_scale is not None:
            return self._time_scale
        if self._first_time is None or self._last_observe_time is None:
            return 1.0
        elapsed = self._last_observe_time - self._first_time
        return elapsed if elapsed > 0 else 1.0

    def _initial_hyperparameters(self, times: torch.Tensor | None) -> Hyperparameters:
        values: dict[str, Any] = {
            "outputscale": 1.0,
            "lengthscale_space": (0.2,),
            "lengthscale_time": None,
            "noise": 1e-2,
        }
        if self.kernel.uses_time:
            # the time unit of the problem (the elapsed time unless given): a start well
            # inside the smooth basin, from which the fit can shorten l_T if data demand
            values["lengthscale_time"] = self.time_scale
        values.update(self._initial_overrides)
        return self.hyperparameter_bounds.clip(Hyperparameters(**values).for_kernel(self.kernel))

    def _to_unit(self, x: torch.Tensor) -> torch.Tensor:
        """Points in original units -> the unit box (:meth:`SearchDomain.to_unit`)."""
        return self._domain.to_unit(x)

    # ================================================================== persistence
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume this policy exactly (tensors and plain values).

        Safe for ``torch.save`` and ``torch.load(weights_only=True)``.
        """
        return capture_state(self)

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a state produced by :meth:`state_dict` of the same policy and config.

        Raises:
            ValueError: if the state is of another format, policy or configuration, or
                is incomplete or inconsistent; the policy is then left unchanged.
        """
        try:
            self._check_state(state)
        except ValueError:
            raise
        except Exception as err:  # noqa: BLE001 - a malformed state is a ValueError
            raise ValueError(f"invalid policy state: {type(err).__name__}: {err}") from None
        snapshot = self._snapshot()
        try:
            restore_state(self, state)
        except Exception as err:  # noqa: BLE001 - any malformed piece: state unchanged
            self._restore(snapshot)
            raise ValueError(f"invalid policy state: {type(err).__name__}: {err}") from None

    def _check_state(self, state: Mapping[str, Any]) -> None:
        check_state(
            state,
            policy=self.name,
            config=self._config,
            dim=self.dim,
            input_dim=self.kernel.input_dim,
            extra_keys=frozenset(self._extra_state()),
        )

    @classmethod
    def from_state_dict(cls, state: Mapping[str, Any]) -> Policy:
        """Rebuild a policy (of the class named in the state) and restore its state.

        Raises:
            ValueError: if ``state`` is not a policy state (wrong type, unknown policy,
                a configuration the policy rejects, or any check of
                :meth:`load_state_dict`).
        """
        if not isinstance(state, Mapping):
            raise ValueError(f"a policy state must be a mapping, got {type(state).__name__}")
        name, config = state.get("policy"), state.get("config")
        if not isinstance(name, str):
            raise ValueError(f"policy state names no policy (got {name!r})")
        if not isinstance(config, Mapping):
            raise ValueError(f"policy state has no configuration mapping (got {config!r})")
        klass = policy_class(name)
        if cls is not Policy and not issubclass(klass, cls):
            raise ValueError(f"state is for policy {name!r}, not a {cls.__name__}")
        try:
            policy = make(name, **{str(k): v for k, v in config.items()})
        except (TypeError, ValueError) as err:  # e.g. a configuration without bounds
            raise ValueError(f"policy state's configuration cannot build {name!r}: {err}") from None
        policy.load_state_dict(state)
        return policy

    def save(self, path: str | os.PathLike[str] | Any) -> None:
        """Write :meth:`state_dict` to ``path`` (torch serialization), or to a binary file
        object.

        A path is written to a temporary file beside it and renamed over it: a save that
        fails or is interrupted leaves the previous file whole.
        """
        write_state_file(self.state_dict, path)

    @staticmethod
    def load(path: str | os.PathLike[str]) -> Policy:
        """Read a policy written by :meth:`save`.

        Raises:
            OSError: the file cannot be read (``FileNotFoundError`` if it is missing).
            ValueError: the file is not a policy written by :meth:`save`.
        """
        state = read_state_file(path)
        try:
            return Policy.from_state_dict(state)
        except ValueError as err:
            raise ValueError(f"{os.fspath(path)}: {err}") from None

    def __repr__(self) -> str:
        name = type(self).__name__
        return f"{name}(d={self.dim}, n={self.dataset_size}, iteration={self._iteration})"
