"""Black-box constraints and safety: feasibility weighting, a time-aware safe set, step limits.

A policy made with ``constraints=["c1", ...]`` is told ``c_j(x, t)`` with every
observation (``c_j >= 0`` is safe) and models each by its own GP
(:class:`~dynbo.models.constraints.ConstraintModels`). This module turns those models into
the acquisition's search (:func:`maximize_safely`), in one of two modes:

``"feasibility"`` (default): the acquisition weighted by the probability of feasibility
    ``PoF(x) = prod_j Phi(mu_j(x, tau) / sigma_j(x, tau))`` at the query time ``tau``
    (Gardner, Kusner, Xu, Weinberger & Cunningham 2014, "Bayesian Optimization with
    Inequality Constraints"; Gelbart, Snoek & Adams 2014; BoTorch's
    ``ConstrainedExpectedImprovement``). That product is sound for an acquisition that
    is nonnegative, such as EI; the UCB is not (a negative UCB times a small PoF would
    *rise*). BoTorch's constrained MC objectives meet the same problem with its
    ``infeasible_cost`` ``M``: they weight ``f + M`` (nonnegative) by the feasibility and
    subtract ``M`` again. Here, likewise, the UCB (standardized units) is shifted by its
    lower bound ``L = min(0, min_i (mu(x_i, tau) - 6 sigma(x_i, tau)))`` over the kept
    inputs ``x_i`` (BoTorch's ``get_infeasible_cost``: the posterior mean minus six
    standard deviations at the training inputs) and the maximized value is the logarithm
    of the product, ``log max(UCB(x) - L, 1e-30) + sum_j log Phi(mu_j / sigma_j)`` (as
    BoTorch's ``LogConstrainedExpectedImprovement``, Ament et al. 2023, "Unexpected
    Improvements to Expected Improvement for Bayesian Optimization", adds the log-PoF to
    the log-EI): the same maximizer as ``(UCB - L) * PoF``, and a gradient that does not
    vanish where the PoF underflows. Far from the data the UCB tends to
    ``kappa sqrt(lambda) > 0 >= L``, so an unexplored point keeps a weight; a point that
    is certainly infeasible gets almost none. Nothing is ever excluded: this mode trades
    regret against violations, it does not forbid them.

``"safe"`` (SafeOpt-style: Sui, Gotovos, Burdick & Krause 2015, "Safe Exploration for
    Optimization with Gaussian Processes"; with the GP's own confidence bound rather than
    a Lipschitz constant, as Berkenkamp, Krause & Schoellig 2016, "Bayesian Optimization
    with Safety Constraints: Safe and Automatic Parameter Tuning in Robotics"): only points
    whose lower confidence bound ``mu_j(x, tau) - beta_c sigma_j(x, tau) >= 0`` for every
    ``j`` at the query time ``tau`` are candidates, and among them the policy's own
    acquisition is maximized. Unlike SafeOpt's safe set, this one is not monotone: the
    constraint GPs are spatio-temporal, so as time passes without data near a point its
    ``sigma_j`` grows towards the prior's and its bound falls below 0 unless the point
    (or one near it) is measured again. A region confirmed safe long ago leaves the safe
    set. (Only where the policy's GP models time: under a spatial-only policy, GP-UCB or
    the resetting, window and SparQ families, the constraint GPs are spatial too and the
    safe set does not shrink with time.) The constraint GPs of a safe set are not centred:
    their prior mean is the threshold 0 (their targets are only scaled, by their root mean
    square), so that values seen elsewhere or long ago do not make a point safe by
    themselves. When no point is safe (always the case before the first observation),
    the query is, by default (``safe_fallback="seed"``), one of the user's
    ``safe_points`` (among several, the one whose lower bound is highest under the
    current model) or, with ``safe_fallback="confirmed"``, the latest *confirmed* safe
    point (the latest observation whose measured constraints were all ``>= 0``; a point
    measured unsafe after its confirmation is confirmed no longer, and the one confirmed
    before it takes its place; the seeds when none is left), and the diagnostics say
    which. The seeds are the default because they are the only points whose safety does
    not rest on a measurement the drift may have made stale: a confirmed point sits where
    an optimistic search left it, at the edge of the safe set that has just emptied
    (``docs/safety.md`` measures both). Queries made beside the main one (SparQ's
    re-queries) go only where the main query may (:func:`admissible`).

The **step limit** (``max_step``, Xopt's ``max_travel_distances``): every query lies
within ``max_step`` per coordinate (original units) of the last applied setting (the last
``x`` the policy was told, additional queries included); before any observation, of the
first safe point if ``safe_points`` were given, and unconstrained otherwise. It applies in
both modes and without constraints: the box search runs in the box ``[x_last - max_step,
x_last + max_step]`` clipped to the domain (shrunk by one part in ``1e9``, so that rounding
never takes the query over), a finite candidate set is cut to the candidates within it
(if none is, the candidate nearest the last setting is returned), and a fallback point
beyond it is approached by at most ``max_step``.

What is guaranteed: the query satisfies the step limit, and in safe mode its lower bounds
under the *current* model are ``>= 0`` (checked at the chosen point after the search; else
the best safe point the search evaluated, else the fallback). Nothing more: the bounds are
as good as the model. With fitted hyperparameters a model that is overconfident (too long
a lengthscale, too small a noise, a drift faster than ``l_T`` says) has a safe set that
contains unsafe points, and no ``beta_c`` repairs a wrong model.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch

from dynbo.acquisition.optimize import BoxSearch, maximize_acquisition
from dynbo.models.constraints import ConstraintModels
from dynbo.validation import finite_number, real_array

__all__ = [
    "CONSTRAINT_MODES",
    "DEFAULT_BETA_C",
    "MAX_BETA_C",
    "Safety",
    "SafeAcquisition",
    "maximize_safely",
]

#: values of the ``constraint_mode`` option (the first is the default)
CONSTRAINT_MODES = ("feasibility", "safe")
#: where safe mode goes when no point is safe (``safe_fallback``): the user's safe seeds
#: (the default) or the last known good setting
FALLBACKS = ("seed", "confirmed")
#: default ``beta_c``: the query maximizes an optimistic acquisition over the safe set, so
#: it tends to sit on the set's edge, where the bound is tight; there a calibrated model
#: violates with probability ``Phi(-beta_c)`` per constraint: 0.13 % for 3 (2.3 % for 2).
#: The margin is for the fitted model's miscalibration (a lengthscale a little too long,
#: a drift a little faster than modeled), under a target of a few per cent violations.
DEFAULT_BETA_C = 3.0

#: how many earlier confirmed safe points the fallback remembers behind the latest one
MAX_CONFIRMED_KEPT = 16
#: the largest ``beta_c`` (a bound of 100 standard deviations already excludes everything
#: the data do not pin down)
MAX_BETA_C = 100.0
#: ``UCB - L`` is floored here before its logarithm (a point below the shift ``L``)
_TINY = 1e-30
#: standard deviations below the posterior mean at the data that bound the UCB from below
#: (BoTorch's ``get_infeasible_cost``)
_FLOOR_SDS = 6.0
#: the most kept observations measured safe that a safe search also evaluates
_MAX_SAFE_STARTS = 256
#: ``log(2 pi) / 2``
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
#: the step box is shrunk by this fraction of the step, so that rounding in the map back to
#: original units never takes a query over the limit
_STEP_SHRINK = 1e-9


def _names(constraints: Any) -> tuple[str, ...]:
    if constraints is None:
        return ()
    if isinstance(constraints, (str, bytes)) or not isinstance(constraints, Sequence):
        raise ValueError(
            f"constraints must be a list of constraint names, got {constraints!r} "
            '(e.g. constraints=["c1"])'
        )
    names = tuple(constraints)
    for name in names:
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"constraints: each name must be a non-empty string, got {name!r}")
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"constraints: repeated name(s) {', '.join(map(repr, repeated))}")
    return names


@dataclass(frozen=True, eq=False)
class Safety:
    """The constraint settings of a policy and what it remembers of applied settings.

    Immutable: the policy replaces it (:meth:`appended`), so a snapshot of the policy's
    attributes keeps the old one.

    Attributes:
        names: ``(J,)`` the declared constraint names (``c_j(x, t) >= 0`` is safe).
        mode: ``"feasibility"`` or ``"safe"`` (see the module docstring).
        beta_c: multiplier of ``sigma_j`` in the safe set's lower bounds.
        safe_points: ``(k, d)`` safe seed points, original units (``k >= 1`` in safe mode).
        max_step: ``(d,)`` the largest move per coordinate from the last applied setting,
            original units, or ``None``.
        applied: ``(d,)`` the last ``x`` the policy was told (original units), or ``None``.
        confirmed: ``(d,)`` the latest observed ``x`` whose measured constraints were all
            ``>= 0`` and that has not been measured unsafe since, or ``None``.
        confirmed_earlier: ``(d,)`` points confirmed before ``confirmed`` and not measured
            unsafe since, oldest first (at most ``MAX_CONFIRMED_KEPT``): where the
            fallback goes when ``confirmed`` is revoked.
        fallback: ``"confirmed"`` or ``"seed"``: where an empty safe set sends the query
            (:meth:`fallbacks`).
        arriving: constraint values ``(J,)`` of the rows being appended (an ``observe`` in
            progress), oldest first.
    """

    names: tuple[str, ...] = ()
    mode: str = CONSTRAINT_MODES[0]
    beta_c: float = DEFAULT_BETA_C
    safe_points: np.ndarray = field(default_factory=lambda: np.empty((0, 0)))
    max_step: np.ndarray | None = None
    applied: np.ndarray | None = None
    confirmed: np.ndarray | None = None
    confirmed_earlier: tuple[np.ndarray, ...] = ()
    arriving: tuple[np.ndarray, ...] = ()
    fallback: str = "seed"

    @classmethod
    def parse(
        cls,
        lower: np.ndarray,
        upper: np.ndarray,
        *,
        constraints: Any,
        constraint_mode: Any,
        safe_points: Any,
        beta_c: Any,
        max_step: Any,
        fallback: Any = "seed",
        candidates: np.ndarray | None = None,
    ) -> Safety:
        """Check the options (see :class:`~dynbo.policies.PolicyOptions`).

        Args:
            lower, upper: ``(d,)`` the search box, original units.
            candidates: ``(N, d)`` the policy's finite candidate set, if it has one: the
                safe points must be among them (a fallback to a seed that is not a
                candidate would go to the nearest candidate, never confirmed safe).

        Raises:
            ValueError: naming the option that is wrong.
        """
        names = _names(constraints)
        if constraint_mode not in CONSTRAINT_MODES:
            raise ValueError(
                f"constraint_mode must be one of {CONSTRAINT_MODES}, got {constraint_mode!r}"
            )
        if constraint_mode == "safe" and not names:
            raise ValueError(
                'constraint_mode="safe" needs constraints: declare their names with '
                'constraints=["c1", ...]'
            )
        beta = finite_number("beta_c", beta_c)
        if not 0 <= beta <= MAX_BETA_C:
            raise ValueError(f"beta_c must be in [0, {MAX_BETA_C:g}], got {beta_c!r}")
        dim = int(lower.shape[0])
        points = np.empty((0, dim))
        if safe_points is not None:
            points = real_array("safe_points", safe_points)
            if points.ndim == 1 and points.shape == (dim,):
                points = points.reshape(1, dim)
            if points.ndim != 2 or points.shape[1] != dim:
                raise ValueError(
                    f"safe_points must have shape (k, {dim}) (original units), got {points.shape}"
                )
            if not np.isfinite(points).all():
                raise ValueError("safe_points contain NaN or infinite values")
            tol = 1e-9 * (upper - lower)
            outside = (points < lower - tol) | (points > upper + tol)
            if outside.any():
                i, j = (int(v) for v in np.argwhere(outside)[0])
                raise ValueError(
                    f"safe_points[{i}, {j}] = {points[i, j]} lies outside the domain "
                    f"[{lower[j]}, {upper[j]}]"
                )
            points = np.clip(points, lower, upper)
            if candidates is not None:
                tol = 1e-9 * np.maximum(upper - lower, 1.0)
                for i, point in enumerate(points):
                    if not (np.abs(candidates - point) <= tol).all(axis=1).any():
                        raise ValueError(
                            f"safe_points[{i}] = {point.tolist()} is not one of the candidates"
                        )
        if constraint_mode == "safe" and len(points) == 0:
            raise ValueError(
                'constraint_mode="safe" needs at least one safe seed point: '
                "safe_points=[[...], ...] (original units, inside the bounds)"
            )
        step = None
        if max_step is not None:
            step = real_array("max_step", max_step).reshape(-1)
            if step.shape == (1,):
                step = np.full(dim, float(step[0]))
            if step.shape != (dim,):
                raise ValueError(
                    f"max_step must be one number or {dim} numbers (original units), "
                    f"got {step.shape[0]}"
                )
            if not (np.isfinite(step).all() and (step > 0).all()):
                raise ValueError(f"max_step must be positive and finite, got {step.tolist()}")
        if fallback not in FALLBACKS:
            raise ValueError(f"safe_fallback must be one of {FALLBACKS}, got {fallback!r}")
        return cls(names, str(constraint_mode), beta, points, step, fallback=str(fallback))

    @property
    def enabled(self) -> bool:
        """Whether the search is anything but the plain acquisition's."""
        return bool(self.names) or self.max_step is not None

    # ------------------------------------------------------------------ observations
    def values(self, constraints: Any, max_abs: float, row: int | None = None) -> np.ndarray:
        """``(J,)`` the constraint values of one observation, checked.

        Args:
            constraints: ``name -> value`` (every declared name, nothing else), or
                ``None`` (or ``{}``) when the policy declares none.
            max_abs: the largest ``|value|`` the model takes.
            row: the row of an ``observe_additional`` batch (for messages).

        Raises:
            ValueError: constraints given to a policy without declared constraints, or
                a name missing or unknown, or a value that is not a finite real number.
        """
        if not self.names:
            # an empty mapping says "no constraints" as None does
            if constraints is not None and not (
                isinstance(constraints, Mapping) and not constraints
            ):
                raise ValueError(
                    "constraints were given, but the policy declares none (make it with "
                    'constraints=["name", ...])'
                )
            return np.empty(0)
        if not isinstance(constraints, Mapping):
            raise ValueError(
                f"constraints: this policy declares {list(self.names)}; give "
                f"constraints={{name: value, ...}} with every observation, got {constraints!r}"
            )
        given = {str(k) for k in constraints}
        missing = [n for n in self.names if n not in constraints]
        extra = sorted(given - set(self.names))
        if missing or extra:
            what = [f"missing {', '.join(map(repr, missing))}"] if missing else []
            what += [f"unknown {', '.join(map(repr, extra))}"] if extra else []
            raise ValueError(
                f"constraints: {' and '.join(what)} (declared: {', '.join(self.names)})"
            )
        suffix = "" if row is None else f"[{row}]"
        out = np.array(
            [finite_number(f"constraints[{n!r}]{suffix}", constraints[n]) for n in self.names]
        )
        for name, value in zip(self.names, out):
            if abs(value) > max_abs:
                raise ValueError(f"constraints[{name!r}]{suffix} = {value} is too large to model")
        return out

    def value_rows(self, constraints: Any, m: int, max_abs: float) -> list[np.ndarray]:
        """The ``m`` rows of ``observe_additional``'s ``constraints`` (``name -> (m,)``)."""
        if not self.names:
            self.values(constraints, max_abs)  # only None passes
            return [np.empty(0)] * m
        if not isinstance(constraints, Mapping):
            self.values(constraints, max_abs)  # raises, naming what is expected
        columns = {}
        for name, column in constraints.items():
            array = real_array(f"constraints[{name!r}]", column).reshape(-1)
            if array.shape != (m,):
                raise ValueError(f"constraints[{name!r}] must have shape ({m},), got {array.shape}")
            columns[name] = array
        return [self.values({k: v[i] for k, v in columns.items()}, max_abs, i) for i in range(m)]

    def expecting(self, rows: Sequence[np.ndarray]) -> Safety:
        """This safety with ``rows`` (constraint values) waiting for :meth:`appended`."""
        return replace(self, arriving=tuple(rows))

    def appended(self, x: np.ndarray) -> tuple[np.ndarray, Safety]:
        """The next arriving row's values and the safety that has seen ``x`` applied.

        Args:
            x: ``(d,)`` the observed point, original units.

        Returns:
            ``(values (J,), safety)``: ``x`` is the last applied setting, and the last
            confirmed safe point if every value is ``>= 0``.
        """
        if self.names and not self.arriving:
            raise RuntimeError("an observation was appended without its constraint values")
        values = self.arriving[0] if self.arriving else np.empty(0)
        x = np.asarray(x, dtype=float).reshape(-1).copy()
        rest = replace(self, applied=x, arriving=self.arriving[1:])
        if not self.names:
            return values, rest
        # older confirmations of this very point are superseded by this measurement
        confirmed = [p for p in self._confirmations() if not _same_point(p, x)]
        if bool((values >= 0).all()):
            confirmed.append(x)
        # else: a point measured unsafe after its confirmation is confirmed no longer
        # (without this, an empty safe set sent the query back to the point it had
        # just measured unsafe, again and again while the drift kept it unsafe)
        confirmed = confirmed[-(MAX_CONFIRMED_KEPT + 1) :]
        return values, replace(
            rest,
            confirmed=confirmed[-1] if confirmed else None,
            confirmed_earlier=tuple(confirmed[:-1]),
        )

    def _confirmations(self) -> list[np.ndarray]:
        """The confirmed points not revoked, oldest first (``confirmed`` last)."""
        latest = [] if self.confirmed is None else [self.confirmed]
        return list(self.confirmed_earlier) + latest

    def fallbacks(self) -> list[tuple[np.ndarray, str]]:
        """``[(point (d,), source), ...]`` where an empty safe set may send the query:
        with ``fallback="confirmed"`` the latest confirmed safe point (``"confirmed"``)
        once there is one, else (and with ``"seed"``) the safe seeds (``"seed"``)."""
        if self.fallback == "confirmed" and self.confirmed is not None:
            return [(self.confirmed, "confirmed")]
        return [(point, "seed") for point in self.safe_points]

    def reference(self) -> np.ndarray | None:
        """``(d,)`` where the step limit is measured from: the last applied setting, or
        before any observation the first safe seed point, or ``None`` (no limit yet)."""
        if self.applied is not None:
            return self.applied
        return self.safe_points[0] if len(self.safe_points) else None

    # ------------------------------------------------------------------ persistence
    def state(self) -> dict[str, Any]:
        """The remembered points as plain values (the settings are the policy's options)."""
        return {
            "applied": None if self.applied is None else self.applied.tolist(),
            "confirmed": None if self.confirmed is None else self.confirmed.tolist(),
            "confirmed_earlier": [point.tolist() for point in self.confirmed_earlier],
        }

    def restored(self, state: Mapping[str, Any] | None, dim: int) -> Safety:
        """This safety with the points of :meth:`state` (``None``: nothing remembered).

        Raises:
            ValueError: a point that is not ``dim`` finite numbers.
        """
        state = state or {}
        points: dict[str, np.ndarray | None] = {}
        for key in ("applied", "confirmed"):
            value = state.get(key)
            if value is not None:
                value = real_array(key, value).reshape(-1)
                if value.shape != (dim,) or not np.isfinite(value).all():
                    raise ValueError(f"constraint state: {key} must be {dim} finite numbers")
            points[key] = value
        earlier = []
        # absent from states saved before revocation existed: nothing earlier
        for value in state.get("confirmed_earlier") or []:
            value = real_array("confirmed_earlier", value).reshape(-1)
            if value.shape != (dim,) or not np.isfinite(value).all():
                raise ValueError(
                    f"constraint state: confirmed_earlier must hold {dim} finite numbers each"
                )
            earlier.append(value)
        return replace(self, arriving=(), confirmed_earlier=tuple(earlier), **points)


class SafeAcquisition:
    """The acquisition a constrained search maximizes (see the module docstring).

    Args:
        acquisition: the policy's acquisition (a UCB: ``__call__`` on unit points,
            ``inputs``, ``gp``, ``sign``).
        models: the constraint GPs (possibly none: a step limit alone).
        safety: the settings.
        lower, upper: ``(dim,)`` the search box's corners in the unit box (the step box),
            or ``None`` for the whole box; the search runs over ``[0, 1]^dim`` mapped
            onto it (:meth:`to_unit`).
        floor: ``L``, the UCB's lower bound (standardized units).

    Calling it on ``(m, dim)`` search points returns ``(m,)`` values, differentiable.
    It remembers the best safe point it has evaluated (:attr:`best_safe`).
    """

    def __init__(
        self,
        acquisition: Any,
        models: ConstraintModels,
        safety: Safety,
        lower: torch.Tensor | None,
        upper: torch.Tensor | None,
        floor: float,
    ) -> None:
        self.acquisition = acquisition
        self.models = models
        self.safety = safety
        self.lower, self.upper = lower, upper
        self.floor = floor
        self.best_safe: tuple[torch.Tensor, float] | None = None
        self._scales = None

    @property
    def raw_batch(self) -> int:
        """Points per raw-sample batch (the wrapped acquisition's)."""
        return int(getattr(self.acquisition, "raw_batch", 8192))

    def to_unit(self, points: torch.Tensor) -> torch.Tensor:
        """Search points -> unit-box points (the spatial columns mapped onto the step box;
        a look-ahead's time column unchanged)."""
        if self.lower is None or self.upper is None:
            return points
        d = self.lower.shape[0]
        spatial = self.lower + (self.upper - self.lower) * points[..., :d]
        return torch.cat([spatial, points[..., d:]], dim=-1)

    def from_unit(self, unit: torch.Tensor) -> torch.Tensor:
        """Unit-box points inside the step box -> search points (inverse of :meth:`to_unit`)."""
        if self.lower is None or self.upper is None:
            return unit
        d = self.lower.shape[0]
        width = (self.upper - self.lower).clamp_min(1e-300)
        spatial = ((unit[..., :d] - self.lower) / width).clamp(0.0, 1.0)
        return torch.cat([spatial, unit[..., d:]], dim=-1)

    def margins(self, unit: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Constraint posteriors at unit points: ``(mean, sd)``, each ``(m, J)``, original
        units, at the acquisition's time."""
        return self.models.predict(self.acquisition.inputs(unit))

    def lower_margin(self, mean: torch.Tensor, sd: torch.Tensor) -> torch.Tensor:
        """``(m,)`` ``min_j (mu_j - beta_c sigma_j) / s_j``: the smallest lower bound in each
        constraint's standardized units (``s_j`` its target scale); ``>= 0``: safe."""
        if self._scales is None:
            self._scales = torch.tensor(
                [gp.target_scale for gp in self.models.gps], dtype=mean.dtype, device=mean.device
            )
        return ((mean - self.safety.beta_c * sd) / self._scales).min(dim=-1).values

    def __call__(self, points: torch.Tensor) -> torch.Tensor:
        unit = self.to_unit(points)
        base = self.acquisition(unit)
        if not self.safety.names:
            return base
        mean, sd = self.margins(unit)
        if self.safety.mode == "feasibility":
            log_pof = torch.special.log_ndtr(mean / sd).sum(dim=-1)
            return torch.log((base - self.floor).clamp_min(_TINY)) + log_pof
        margin = self.lower_margin(mean, sd)
        safe = margin >= 0
        # every unsafe point below every safe one, and rising towards the safe set
        level = self.floor - 1.0
        values = torch.where(safe, base.clamp_min(level), level + margin)
        self._remember(points, values, safe)
        return values

    def value_and_gradient(self, points: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
        """Values ``(m,)`` at ``(m, dim)`` search points and their gradients ``(m, dim)`` in
        closed form: the wrapped acquisition's and each constraint GP's
        (:meth:`~dynbo.models.SpatioTemporalGP.posterior_with_gradient`), by the chain rule
        through the step box. The same numbers as autograd through :meth:`__call__` to
        rounding; ``None`` where a part has no closed form (a look-ahead window, a
        constraint GP without data): the search then differentiates :meth:`__call__`.
        """
        closed_form = getattr(self.acquisition, "value_and_gradient", None)
        unit = self.to_unit(points)
        result = None if closed_form is None else closed_form(unit)
        if result is None:
            return None
        values, gradient = result
        if self.safety.names:
            at = getattr(self.acquisition, "posterior_with_gradient", None)
            if at is not None:  # the UCB's: each constraint GP told the search's time
                posteriors = [at(gp, unit) for gp in self.models.gps]
            else:
                inputs = self.acquisition.inputs(unit)
                posteriors = [gp.posterior_with_gradient(inputs) for gp in self.models.gps]
            if any(p is None for p in posteriors):
                return None
            # each constraint in its standardized units: c_j = m_j + s_j (mu_j ...), so
            # mu_j / sigma_j and the margins are those of the original units
            parts = [
                (p, gp.target_mean / gp.target_scale, p.variance.sqrt())
                for p, gp in zip(posteriors, self.models.gps)
            ]
            if self.safety.mode == "feasibility":
                values, gradient = self._feasibility(values, gradient, parts)
            else:
                values, gradient = self._safe(points, values, gradient, parts)
        if self.lower is None or self.upper is None:
            return values, gradient
        d = self.lower.shape[0]
        scale = torch.cat([self.upper - self.lower, gradient.new_ones(gradient.shape[-1] - d)])
        return values, gradient * scale

    def _feasibility(
        self, base: torch.Tensor, gradient: torch.Tensor, parts: list[tuple[Any, float, Any]]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``log max(UCB - L, tiny) + sum_j log Phi(z_j)`` and its gradient; ``parts``: each
        constraint's (posterior with gradient, ``m_j / s_j``, standardized ``sigma_j``)."""
        shifted = base - self.floor
        above = shifted > _TINY
        values = torch.log(shifted.clamp_min(_TINY))
        gradient = torch.where(above[:, None], gradient / shifted.clamp_min(_TINY)[:, None], 0.0)
        for posterior, offset, sd in parts:
            z = (posterior.mean + offset) / sd
            log_cdf = torch.special.log_ndtr(z)
            # d log Phi(z) / dz = phi(z) / Phi(z), in logs: stable far in the tail
            ratio = torch.exp(-0.5 * z * z - _HALF_LOG_2PI - log_cdf)
            dz = (
                posterior.mean_gradient / sd[:, None]
                - (z / (2 * sd * sd))[:, None] * posterior.variance_gradient
            )
            values = values + log_cdf
            gradient = gradient + ratio[:, None] * dz
        return values, gradient

    def _safe(
        self,
        points: torch.Tensor,
        base: torch.Tensor,
        gradient: torch.Tensor,
        parts: list[tuple[Any, float, Any]],
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The safe mode's value (see :meth:`__call__`) and its gradient (``parts`` as
        :meth:`_feasibility`'s)."""
        beta = self.safety.beta_c
        margins = torch.stack([p.mean + o - beta * sd for p, o, sd in parts], dim=-1)
        margin, worst = margins.min(dim=-1)
        slopes = torch.stack(
            [
                p.mean_gradient - (beta / (2 * sd))[:, None] * p.variance_gradient
                for p, _, sd in parts
            ],
            dim=1,
        )  # (m, J, d)
        safe = margin >= 0
        level = self.floor - 1.0
        values = torch.where(safe, base.clamp_min(level), level + margin)
        worst_slope = slopes[torch.arange(len(worst)), worst]
        kept = (safe & (base > level))[:, None]
        gradient = torch.where(kept, gradient, torch.where(safe[:, None], 0.0, worst_slope))
        self._remember(points, values, safe)
        return values, gradient

    def _remember(self, points: torch.Tensor, values: torch.Tensor, safe: torch.Tensor) -> None:
        with torch.no_grad():
            if not bool(safe.any()):
                return
            masked = values.detach().masked_fill(~safe, -math.inf)
            i = int(torch.argmax(masked))
            if self.best_safe is None or float(masked[i]) > self.best_safe[1]:
                self.best_safe = (points[i].detach().clamp(0.0, 1.0).clone(), float(masked[i]))


def _step_box(
    safety: Safety, lower: np.ndarray, upper: np.ndarray, dtype: torch.dtype, device: Any
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """``(lo, hi)`` unit-box corners of the step box, or ``None`` without a limit yet."""
    reference = safety.reference()
    if safety.max_step is None or reference is None:
        return None
    width = upper - lower
    centre = np.clip((reference - lower) / width, 0.0, 1.0)
    step = safety.max_step / width * (1.0 - _STEP_SHRINK)
    lo, hi = np.clip(centre - step, 0.0, 1.0), np.clip(centre + step, 0.0, 1.0)
    return (
        torch.as_tensor(lo, dtype=dtype, device=device),
        torch.as_tensor(hi, dtype=dtype, device=device),
    )


def _ucb_floor(acquisition: Any, data_unit: torch.Tensor, searches_time: bool) -> float:
    """``L = min(0, min_i sign mu(x_i) - 6 sigma(x_i))`` at the kept inputs, at the
    acquisition's time (standardized units; BoTorch's ``get_infeasible_cost``)."""
    if data_unit.shape[0] == 0:
        return 0.0
    points = data_unit
    if searches_time:
        points = torch.cat([points, points.new_zeros((points.shape[0], 1))], dim=1)
    with torch.no_grad():
        mean, var = acquisition.gp.predict(acquisition.inputs(points), standardized=True)
    sign = float(getattr(acquisition, "sign", 1.0))
    lowest = float((sign * mean - _FLOOR_SDS * var.clamp_min(0).sqrt()).min())
    return min(0.0, lowest) if math.isfinite(lowest) else 0.0


def maximize_safely(
    acquisition: Any,
    dim: int,
    *,
    safety: Safety,
    models: ConstraintModels,
    lower: np.ndarray,
    upper: np.ndarray,
    data_unit: torch.Tensor,
    candidates: torch.Tensor | None = None,
    searches_time: bool = False,
    search: BoxSearch | None = None,
    generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
    record: dict[str, Any] | None = None,
) -> torch.Tensor:
    """:func:`~dynbo.acquisition.optimize.maximize_acquisition` under the constraints and
    the step limit of ``safety`` (the module docstring says how).

    Args:
        acquisition: the policy's acquisition (a UCB, possibly over a look-ahead window).
        dim: spatial dimension ``d``.
        safety: the settings and the remembered points.
        models: the constraint GPs.
        lower, upper: ``(d,)`` the domain's corners (original units).
        data_unit: ``(n, d)`` the kept inputs in the unit box (for the UCB's floor ``L``).
        candidates, searches_time, search, generator, dtype, device: as
            :func:`~dynbo.acquisition.optimize.maximize_acquisition`.
        record: as there; with constraints or a step limit it also receives
            ``"constraints"``, the report of ``diagnostics.extra["constraints"]``: ``mode``,
            ``names``, ``beta_c``, ``safe_set_empty``, ``fallback`` (``None``,
            ``"confirmed"`` or ``"seed"``), ``fallback_clipped`` (the fallback point lay
            beyond the step limit), ``probability_of_feasibility``, ``lower_bounds`` and
            ``means`` (``name -> value``, original units) at the chosen point,
            ``step_limit_active`` (the step box was smaller than the domain) and
            ``step_limit_binding`` (the query lies on its edge).

    Returns:
        The unit-box query: ``(d,)``, or ``(d + 1,)`` with ``searches_time``.
    """
    common = dict(
        searches_time=searches_time,
        search=search or BoxSearch(),
        generator=generator,
        dtype=dtype,
        device=device,
        record=record,
    )
    if not safety.enabled:
        return maximize_acquisition(acquisition, dim, candidates=candidates, **common)
    box = _step_box(safety, lower, upper, dtype, device)
    active = box is not None and bool(((box[0] > 0) | (box[1] < 1)).any())
    floor = _ucb_floor(acquisition, data_unit, searches_time) if safety.names else 0.0
    to_unit = _unit_map(lower, upper, dtype, device)
    report: dict[str, Any] = {"mode": safety.mode if safety.names else None}
    chosen: torch.Tensor | None = None
    if candidates is not None:
        wrapped = SafeAcquisition(acquisition, models, safety, None, None, floor)
        if box is not None:
            slack = 1e-12 + box[1].new_tensor(_STEP_SHRINK)
            inside = ((candidates >= box[0] - slack) & (candidates <= box[1] + slack)).all(dim=1)
            candidates = candidates[inside]
        if candidates.shape[0]:
            chosen = maximize_acquisition(wrapped, dim, candidates=candidates, **common)
        else:  # no candidate within the step: the one nearest the last setting
            chosen = _with_time(to_unit(safety.reference()), searches_time)
    else:
        lo, hi = (None, None) if box is None else box
        wrapped = SafeAcquisition(acquisition, models, safety, lo, hi, floor)
        starts = _known_safe_starts(safety, models, to_unit, wrapped, dim, searches_time)
        found = maximize_acquisition(wrapped, dim, extra_starts=starts, **common)
        chosen = wrapped.to_unit(found)
    fallback = None
    if safety.names and safety.mode == "safe":
        mean, sd = wrapped.margins(chosen.reshape(1, -1))
        if float(wrapped.lower_margin(mean, sd)[0]) < 0:
            if wrapped.best_safe is not None and candidates is None:
                chosen = wrapped.to_unit(wrapped.best_safe[0])
            else:
                fallback = _fallback(safety, wrapped, to_unit, searches_time)
        report["safe_set_empty"] = fallback is not None
        if fallback is not None:
            point = to_unit(fallback[0])
            clipped = point if box is None else torch.maximum(torch.minimum(point, box[1]), box[0])
            report["fallback_clipped"] = bool((clipped != point).any())
            chosen = _with_time(clipped, searches_time)
    report.setdefault("safe_set_empty", None)  # not a question outside safe mode
    report["fallback"] = None if fallback is None else fallback[1]
    report.update(_at_point(wrapped, chosen, safety))
    report["step_limit_active"] = active
    report["step_limit_binding"] = active and _on_edge(chosen[:dim], box)
    if record is not None:
        record["constraints"] = report
    return chosen


def _unit_map(
    lower: np.ndarray, upper: np.ndarray, dtype: torch.dtype, device: Any
) -> Callable[[np.ndarray], torch.Tensor]:
    def to_unit(point: np.ndarray) -> torch.Tensor:
        unit = np.clip((np.asarray(point, dtype=float) - lower) / (upper - lower), 0.0, 1.0)
        return torch.as_tensor(unit, dtype=dtype, device=device)

    return to_unit


def _fallback(
    safety: Safety,
    wrapped: SafeAcquisition,
    to_unit: Callable[[np.ndarray], torch.Tensor],
    searches_time: bool,
) -> tuple[np.ndarray, str] | None:
    """Where to go when no point is safe: among :meth:`Safety.fallbacks` (the latest
    confirmed point, or the seeds), the one whose lower bound is highest under the
    current model (the first on a tie)."""
    options = safety.fallbacks()
    if not options:
        return None
    points = torch.stack([_with_time(to_unit(point), searches_time) for point, _ in options])
    margin = wrapped.lower_margin(*wrapped.margins(points))
    return options[int(torch.argmax(margin))]


def admissible(
    points: torch.Tensor,
    reference: torch.Tensor,
    safety: Safety,
    predict: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]],
) -> torch.Tensor:
    """``(m,)`` which of ``(m, d)`` points (original units) a query may go to now: within
    the step limit of ``(d,)`` ``reference`` (when there is one) and, in safe mode, with
    every lower bound ``mu_j - beta_c sigma_j >= 0`` under ``predict`` (points ->
    ``(mean, sd)``, each ``(m, J)``, original units, at the query time).

    For queries made beside the main one (SparQ-GP-UCB's re-evaluations of past inputs),
    which the search of :func:`maximize_safely` never sees.
    """
    keep = torch.ones(points.shape[0], dtype=torch.bool, device=points.device)
    if safety.max_step is not None and points.shape[0]:
        step = torch.as_tensor(safety.max_step, dtype=points.dtype, device=points.device)
        keep &= ((points - reference).abs() <= step).all(dim=1)
    if safety.names and safety.mode == "safe" and points.shape[0]:
        mean, sd = predict(points)
        keep &= ((mean - safety.beta_c * sd) >= 0).all(dim=1).to(keep.device)
    return keep


def _same_point(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two ``(d,)`` settings are the same up to rounding (a fallback query comes
    back through the unit box)."""
    return bool((np.abs(a - b) <= 1e-9 * np.maximum(1.0, np.abs(a))).all())


def _with_time(unit: torch.Tensor, searches_time: bool) -> torch.Tensor:
    """A spatial unit point as a query: with a look-ahead, at the window's start (now)."""
    return torch.cat([unit, unit.new_zeros(1)]) if searches_time else unit


def _known_safe_starts(
    safety: Safety,
    models: ConstraintModels,
    to_unit: Callable[[np.ndarray], torch.Tensor],
    wrapped: SafeAcquisition,
    dim: int,
    searches_time: bool,
) -> torch.Tensor | None:
    """Points measured or declared safe, as search points inside the step box: the seeds,
    the confirmed point and the newest ``_MAX_SAFE_STARTS`` kept observations whose
    measured constraints were all ``>= 0``. The box search evaluates them with its raw
    samples, so a safe set too small for the quasi-random sample is still found."""
    if not safety.names:
        return None
    points = [to_unit(p) for p in safety.safe_points]
    if safety.confirmed is not None:
        points.append(to_unit(safety.confirmed))
    unit = torch.stack(points) if points else None
    if models.n:
        measured = (models.values >= 0).all(dim=1).nonzero().reshape(-1)[-_MAX_SAFE_STARTS:]
        inputs = models.gps[0].inputs  # the model's dtype and device, as to_unit's points
        kept = inputs[measured.to(inputs.device), :dim]
        unit = kept if unit is None else torch.cat([unit, kept])
    if unit is None:
        return None
    if wrapped.lower is not None and wrapped.upper is not None:
        inside = ((unit >= wrapped.lower) & (unit <= wrapped.upper)).all(dim=1)
        unit = unit[inside]
    if unit.shape[0] == 0:
        return None
    search = wrapped.from_unit(unit)
    if searches_time:
        search = torch.cat([search, search.new_zeros((search.shape[0], 1))], dim=1)
    return search


def _at_point(wrapped: SafeAcquisition, chosen: torch.Tensor, safety: Safety) -> dict[str, Any]:
    """The constraints' posterior at the query: PoF, lower bounds and means by name."""
    if not safety.names:
        return {}
    with torch.no_grad():
        mean, sd = wrapped.margins(chosen.reshape(1, -1))
        pof = float(torch.special.ndtr(mean / sd).prod())
    lower = mean - safety.beta_c * sd
    return {
        "names": list(safety.names),
        "beta_c": safety.beta_c,
        "probability_of_feasibility": pof,
        "lower_bounds": {n: float(v) for n, v in zip(safety.names, lower[0])},
        "means": {n: float(v) for n, v in zip(safety.names, mean[0])},
    }


def _on_edge(unit: torch.Tensor, box: tuple[torch.Tensor, torch.Tensor] | None) -> bool:
    """Whether ``unit`` lies on a face of the step box that is inside the domain."""
    if box is None:
        return False
    lo, hi = box
    near_lo = ((unit - lo).abs() <= 1e-7) & (lo > 0)
    near_hi = ((unit - hi).abs() <= 1e-7) & (hi < 1)
    return bool((near_lo | near_hi).any())
