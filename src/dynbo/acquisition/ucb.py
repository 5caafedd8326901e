"""GP-UCB: ``mu(x) + kappa * sigma(x)`` and the exploration schedules of the papers.

Papers differ in whether the width multiplies sigma by ``sqrt(beta)`` (Srinivas et al.,
Bogunovic et al., ET-GP-UCB, W-DBO, BoTorch) or by ``beta`` itself (the SparQ family,
whose ``beta_t`` is already a confidence radius); see ``docs/design.md``. Here a
schedule returns ``beta`` and :class:`UpperConfidenceBound` takes ``kappa`` directly, so
each policy states which convention it follows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from dynbo.acquisition.optimize import raw_batch_size
from dynbo.models.gp import SpatioTemporalGP
from dynbo.validation import finite_number

__all__ = [
    "BetaSchedule",
    "Exploration",
    "MAX_SIGMA_MULTIPLIER",
    "DatasetSizeBeta",
    "LogTimeBeta",
    "ConstantBeta",
    "InformationGainBeta",
    "SparQBeta",
    "RGPUCBTheoryBeta",
    "TVGPUCBTheoryBeta",
    "make_beta_schedule",
    "UpperConfidenceBound",
]


def _check_delta(delta: float) -> None:
    # below 1e-300, 2 / delta overflows the log the radii take of it
    if not 1e-300 <= delta < 1.0:
        raise ValueError(f"beta schedule parameter delta must be in [1e-300, 1), got {delta}")


def _information_gain(gp: SpatioTemporalGP | None) -> float:
    """The information gain of the data ``gp`` holds (0 without data)."""
    return 0.0 if gp is None or gp.n == 0 else gp.information_gain()


class BetaSchedule(Protocol):
    """``beta`` from the dataset size ``n``, the iteration ``k`` (1-based), ``d`` and the model.

    ``gp`` is the policy's fitted model (only :class:`InformationGainBeta` reads it).
    """

    def __call__(
        self, *, n: int, iteration: int, dim: int, gp: SpatioTemporalGP | None = None
    ) -> float: ...

    def as_dict(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class DatasetSizeBeta:
    """``beta = scale * d * log(2 n)`` (default ``scale = 0.2``).

    The schedule of the official W-DBO code, used for every policy in the W-DBO and BOLT
    comparisons. ``n`` is the dataset size, at least 1.
    """

    scale: float = 0.2

    def __call__(
        self, *, n: int, iteration: int, dim: int, gp: SpatioTemporalGP | None = None
    ) -> float:
        return max(0.0, self.scale * dim * math.log(2 * max(n, 1)))

    def as_dict(self) -> dict[str, Any]:
        return {"kind": "dataset_size", "scale": self.scale}


@dataclass(frozen=True)
class LogTimeBeta:
    """``beta_t = c1 log(c2 t)``, clamped at 0 (Bogunovic et al. 2016, Sec. 5; ET-GP-UCB).

    ``t`` is the 1-based iteration index. Defaults ``c1 = 0.8, c2 = 4`` (synthetic
    experiments of Bogunovic, Scarlett & Cevher 2016). ``c1 log(c2 t)`` is negative for
    ``t < 1/c2``, hence the clamp.
    """

    c1: float = 0.8
    c2: float = 4.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.c1) and self.c1 >= 0):
            raise ValueError(f"beta schedule parameter c1 must be finite and >= 0, got {self.c1}")
        if not (math.isfinite(self.c2) and self.c2 > 0):
            raise ValueError(f"beta schedule parameter c2 must be finite and > 0, got {self.c2}")

    def __call__(
        self, *, n: int, iteration: int, dim: int, gp: SpatioTemporalGP | None = None
    ) -> float:
        return max(0.0, self.c1 * math.log(self.c2 * max(iteration, 1)))

    def as_dict(self) -> dict[str, Any]:
        return {"kind": "log_time", "c1": self.c1, "c2": self.c2}


@dataclass(frozen=True)
class ConstantBeta:
    """A fixed ``beta`` (UI-TVBO uses ``beta = 2``)."""

    value: float = 2.0

    def __call__(
        self, *, n: int, iteration: int, dim: int, gp: SpatioTemporalGP | None = None
    ) -> float:
        return self.value

    def as_dict(self) -> dict[str, Any]:
        return {"kind": "constant", "value": self.value}


@dataclass(frozen=True)
class InformationGainBeta:
    """``beta_t = B + R sqrt(2 (gamma_t + 1 + ln(1/delta)))``: a confidence *radius*.

    The kernel-ridge (IGP-UCB style) radius of the frequentist baselines SW-, BR- and
    W-GP-UCB (Zhou & Shroff 2021; Deng et al. 2022), with the maximum information gain
    ``gamma_t`` replaced by the information gain of the data the model holds,
    ``gamma = (1/2) log det(I + N^{-1/2} K N^{-1/2})`` (``N`` the per-observation
    regularizers; :meth:`SpatioTemporalGP.information_gain`). ``B`` bounds the RKHS norm
    of the standardized objective, ``R`` is the sub-Gaussian noise scale (``None``: the
    model's noise standard deviation). Policies that use it multiply ``sigma`` by
    ``beta`` itself (``kappa = beta``).
    """

    B: float = 1.0
    R: float | None = None
    delta: float = 0.1

    def __post_init__(self) -> None:
        _check_delta(self.delta)

    def __call__(
        self, *, n: int, iteration: int, dim: int, gp: SpatioTemporalGP | None = None
    ) -> float:
        gain = _information_gain(gp)
        if self.R is not None:
            scale = self.R
        elif gp is not None:
            scale = math.sqrt(gp.hyperparameters.noise)
        else:
            scale = 0.0
        return self.B + scale * math.sqrt(2.0 * (gain + 1.0 + math.log(1.0 / self.delta)))

    def as_dict(self) -> dict[str, Any]:
        return {"kind": "information_gain", "B": self.B, "R": self.R, "delta": self.delta}


@dataclass(frozen=True)
class SparQBeta:
    """SparQ-GP-UCB's radius (Mauduit, Berthier & Simonetto (2025), eq. 12), used as ``kappa``.

    ``beta_t = sqrt(2 log(2 |Sigma_t + K_t|^{1/2} / (delta |Sigma_t|^{1/2}))) + B
    = sqrt(2 ln(2 / delta) + log det(I + Sigma_t^{-1} K_t)) + B``, computed on the
    regression set the model holds (``Sigma_t`` its per-observation noise variances, with
    the uncertainty injection), i.e. ``sqrt(2 ln(2/delta) + 2 gamma) + B`` with ``gamma``
    :meth:`SpatioTemporalGP.information_gain`. ``B`` bounds the RKHS norm of ``f_t``
    (5 in the paper's synthetic benchmark); ``delta`` is not given by the paper (0.1).
    """

    B: float = 5.0
    delta: float = 0.1

    def __post_init__(self) -> None:
        _check_delta(self.delta)

    def __call__(
        self, *, n: int, iteration: int, dim: int, gp: SpatioTemporalGP | None = None
    ) -> float:
        gain = _information_gain(gp)
        return math.sqrt(2.0 * math.log(2.0 / self.delta) + 2.0 * gain) + self.B

    def as_dict(self) -> dict[str, Any]:
        return {"kind": "sparq", "B": self.B, "delta": self.delta}


def _theory_beta(t: int, dim: int, delta: float, a: float, b: float, r: float, tv: bool) -> float:
    t2 = float(max(t, 1)) ** 2
    pi2 = math.pi**2
    if tv:
        first, inner = pi2 * t2 / (2 * delta), dim * a * pi2 * t2 / (2 * delta)
    else:
        first, inner = 2 * pi2 * t2 / (3 * delta), 2 * dim * a * pi2 * t2 / (3 * delta)
    return max(
        0.0,
        2 * math.log(first) + 2 * dim * math.log(r * dim * b * t2 * math.sqrt(math.log(inner))),
    )


@dataclass(frozen=True)
class RGPUCBTheoryBeta:
    """R-GP-UCB's theoretical schedule (Bogunovic, Scarlett & Cevher 2016, eq. 16).

    ``beta_T = 2 log(2 pi^2 T^2 / (3 delta)) + 2 d log(r d b T^2 sqrt(log(2 d a pi^2 T^2
    / (3 delta))))`` with ``T`` the iteration, ``a, b`` the constants of the kernel's
    derivative tail bound and ``r`` the domain's side length; clamped at 0.
    """

    delta: float = 0.1
    a: float = 1.0
    b: float = 1.0
    r: float = 1.0

    def __post_init__(self) -> None:
        _check_delta(self.delta)
        for name in ("a", "b", "r"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"beta schedule parameter {name} must be finite and positive")
        # The bound's sqrt(log(c a T^2 / delta)) needs c a / delta > 1 already at T = 1
        # (with d = 1; it grows with d and T), and a finite value: say which parameters.
        try:
            value = self(n=1, iteration=1, dim=1)
        except (ValueError, OverflowError):
            value = math.nan
        if not math.isfinite(value):
            tv = isinstance(self, TVGPUCBTheoryBeta)
            needs = "a pi^2 / (2 delta)" if tv else "2 a pi^2 / (3 delta)"
            raise ValueError(
                f"beta schedule {self.as_dict()['kind']} is undefined for a = {self.a:g}, "
                f"b = {self.b:g}, r = {self.r:g}, delta = {self.delta:g}: it needs "
                f"{needs} > 1 and finite values"
            )

    def __call__(
        self, *, n: int, iteration: int, dim: int, gp: SpatioTemporalGP | None = None
    ) -> float:
        return _theory_beta(iteration, dim, self.delta, self.a, self.b, self.r, tv=False)

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": "r_gp_ucb_theory",
            "delta": self.delta,
            "a": self.a,
            "b": self.b,
            "r": self.r,
        }


@dataclass(frozen=True)
class TVGPUCBTheoryBeta(RGPUCBTheoryBeta):
    """TV-GP-UCB's theoretical schedule (Bogunovic, Scarlett & Cevher 2016, eq. 19).

    ``beta_T = 2 log(pi^2 T^2 / (2 delta)) + 2 d log(r d b T^2 sqrt(log(d a pi^2 T^2 /
    (2 delta))))``; parameters as :class:`RGPUCBTheoryBeta`.
    """

    def __call__(
        self, *, n: int, iteration: int, dim: int, gp: SpatioTemporalGP | None = None
    ) -> float:
        return _theory_beta(iteration, dim, self.delta, self.a, self.b, self.r, tv=True)

    def as_dict(self) -> dict[str, Any]:
        return {**super().as_dict(), "kind": "tv_gp_ucb_theory"}


#: the largest exploration scale or fixed multiplier of sigma a policy accepts
MAX_SIGMA_MULTIPLIER = 1e6


@dataclass(frozen=True)
class Exploration:
    """How a policy turns its ``beta`` into ``kappa``, the multiplier of ``sigma`` in UCB.

    By default ``kappa = scale * sqrt(beta)``, or ``scale * beta`` for a policy whose
    ``beta`` is a confidence radius (the kernel-ridge and SparQ families: see the module
    docstring); ``scale`` is 1 unless tuned. ``fixed`` replaces the schedule: ``kappa``
    is that constant at every iteration, whatever the policy's ``beta``, so that a
    comparison can give every policy the same exploration (a constant ``beta`` would
    not: it gives ``sqrt(beta)`` to some policies and ``beta`` to the radius family).

    Attributes:
        beta_is_radius: whether ``beta`` multiplies ``sigma`` itself.
        scale: multiplier of the schedule's ``kappa``, in ``[0, 1e6]``.
        fixed: the constant ``kappa`` in ``[0, 1e6]``, or ``None`` (the schedule's).
    """

    beta_is_radius: bool = False
    scale: float = 1.0
    fixed: float | None = None

    def __post_init__(self) -> None:
        for name, option in (("scale", "exploration_scale"), ("fixed", "sigma_multiplier")):
            value = getattr(self, name)
            if value is None:
                continue
            value = finite_number(option, value)
            if not 0.0 <= value <= MAX_SIGMA_MULTIPLIER:
                raise ValueError(
                    f"{option} must be in [0, {MAX_SIGMA_MULTIPLIER:g}], got {value!r}"
                )
            object.__setattr__(self, name, float(value))
        if self.fixed is not None and self.scale != 1.0:
            raise ValueError(
                "give sigma_multiplier (a fixed multiplier of sigma, replacing the beta "
                "schedule) or exploration_scale (a multiplier of the schedule's), not both"
            )

    def kappa(self, beta: Any) -> float:
        """``kappa`` for the coming iteration; ``beta`` is a callable returning the
        schedule's value (not called when ``fixed`` replaces it)."""
        if self.fixed is not None:
            return self.fixed
        value = max(float(beta()), 0.0)
        return self.scale * (value if self.beta_is_radius else math.sqrt(value))


def make_beta_schedule(spec: BetaSchedule | dict[str, Any] | str | float | None) -> BetaSchedule:
    """Build a schedule from a schedule, a dict (``{"kind": ..., params}``), a name or a number.

    Names: ``"dataset_size"`` (default), ``"log_time"``, ``"constant"``,
    ``"information_gain"``, ``"r_gp_ucb_theory"``, ``"tv_gp_ucb_theory"``, ``"sparq"``; a
    number means
    :class:`ConstantBeta`.
    """
    if spec is None:
        return DatasetSizeBeta()
    if isinstance(spec, tuple(_KINDS.values())):
        return spec  # type: ignore[return-value]
    if isinstance(spec, bool):
        raise ValueError(f"invalid beta schedule {spec!r}")
    if isinstance(spec, (int, float)):
        spec = {"kind": "constant", "value": finite_number("beta", spec)}
    if isinstance(spec, str):
        spec = {"kind": spec}
    if not isinstance(spec, dict) or "kind" not in spec or not isinstance(spec["kind"], str):
        raise ValueError(f"invalid beta schedule {spec!r}")
    params: dict[str, float | None] = {}
    for key, value in spec.items():
        if key == "kind":
            continue
        if value is None and key == "R":
            params[key] = None
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"beta schedule parameter {key} must be a number, got {value!r}")
        params[key] = finite_number(f"beta schedule parameter {key}", value)
    kinds = _KINDS
    if spec["kind"] not in kinds:
        raise ValueError(
            f"unknown beta schedule kind {spec['kind']!r}; expected one of {sorted(kinds)}"
        )
    for name, value in params.items():
        if value is not None and (not math.isfinite(value) or value < 0):
            raise ValueError(f"beta schedule parameter {name} must be finite and >= 0, got {value}")
        if value is not None and value > MAX_BETA_PARAMETER:
            raise ValueError(
                f"beta schedule parameter {name} must be at most {MAX_BETA_PARAMETER:g} (a "
                f"wider confidence multiplier than that is no longer a number), got {value}"
            )
    try:
        schedule = kinds[spec["kind"]](**params)
    except TypeError as err:
        raise ValueError(f"invalid parameters for beta schedule {spec['kind']!r}: {err}") from None
    return schedule


#: the largest parameter of a beta schedule given by its options: ``beta`` stays a
#: finite number however many iterations a run makes
MAX_BETA_PARAMETER = 1e12

_KINDS: dict[str, type] = {
    "dataset_size": DatasetSizeBeta,
    "log_time": LogTimeBeta,
    "constant": ConstantBeta,
    "information_gain": InformationGainBeta,
    "r_gp_ucb_theory": RGPUCBTheoryBeta,
    "tv_gp_ucb_theory": TVGPUCBTheoryBeta,
    "sparq": SparQBeta,
}


class UpperConfidenceBound:
    """``mu(x, t) + kappa sigma(x, t)`` of a GP at a fixed time, in standardized units.

    Args:
        gp: the model: a :class:`SpatioTemporalGP` or any view with its ``kernel`` and
            ``predict(inputs, standardized=True)`` (e.g. the weighted kernel-ridge view
            of :mod:`dynbo.models.ridge`, whose "variance" is its width squared).
        kappa: multiplier of the posterior standard deviation.
        time: the time at which the acquisition is evaluated (ignored by spatial kernels).
        time_window: ``(start, end)``: search time too (ABO's look-ahead). The points
            then have ``d + 1`` columns, the last one in ``[0, 1]`` mapped linearly onto
            the window; ``time`` is ignored.
        maximize: ``False`` for a minimization problem: the lower confidence bound
            ``-mu + kappa sigma`` is maximized instead (UI-TVBO's LQR costs).

    Calling it on unit-box points ``(m, d)`` returns ``(m,)`` values, differentiable
    with respect to the points. In original units the value is
    ``target_mean + target_scale * ucb``: a positive affine map, so the argmax is the same.
    """

    def __init__(
        self,
        gp: SpatioTemporalGP,
        kappa: float,
        time: float | None = None,
        *,
        time_window: tuple[float, float] | None = None,
        maximize: bool = True,
    ) -> None:
        if not math.isfinite(kappa) or kappa < 0:
            raise ValueError(f"kappa must be finite and non-negative, got {kappa}")
        if time_window is not None:
            start, end = (float(v) for v in time_window)
            if not (math.isfinite(start) and math.isfinite(end) and start <= end):
                raise ValueError(f"time_window must be a finite (start, end), got {time_window}")
            time_window = (start, end)
        self.gp = gp
        self.kappa = float(kappa)
        self.time = time
        self.time_window = time_window
        self.sign = 1.0 if maximize else -1.0

    @property
    def raw_batch(self) -> int:
        """Points per batch of a raw-sample evaluation (:func:`raw_batch_size` of the
        model's dataset size), so that one batch's ``(m, n)`` matrices stay bounded."""
        return raw_batch_size(int(getattr(self.gp, "n", 0)))

    def query_time(self, points: torch.Tensor) -> torch.Tensor:
        """``(m,)`` times of ``(m, d + 1)`` points searched over ``time_window``."""
        assert self.time_window is not None
        start, end = self.time_window
        return start + (end - start) * points[..., -1]

    def inputs(self, points: torch.Tensor) -> torch.Tensor:
        """GP inputs for unit-box points: appends the time column if the kernel models time."""
        if not self.gp.kernel.uses_time:
            return points
        if self.time_window is not None:
            times = self.query_time(points)
            return torch.cat([points[..., :-1], times[..., None]], dim=-1)
        if self.time is None:
            raise ValueError("this GP models time: the acquisition needs a time")
        column = points.new_full((*points.shape[:-1], 1), float(self.time))
        return torch.cat([points, column], dim=-1)

    def posterior_with_gradient(self, model: Any, points: torch.Tensor) -> Any:
        """``model``'s closed-form posterior and gradient at ``(m, d)`` unit-box points
        (:meth:`SpatioTemporalGP.posterior_with_gradient` at :meth:`inputs`), or ``None``
        where it has none. Without a look-ahead window every point is at :attr:`time`:
        a :class:`SpatioTemporalGP` is told so, and computes its temporal factor against
        the data once per time instead of per call (the same numbers). Also for the
        constraint models of a safe search (:mod:`dynbo.acquisition.constraints`).
        """
        closed_form = getattr(model, "posterior_with_gradient", None)
        if closed_form is None:
            return None
        inputs = self.inputs(points)
        # inputs() appended the time column only where the objective's GP models time
        at_time = self.time_window is None and self.time is not None and self.gp.kernel.uses_time
        if at_time and isinstance(model, SpatioTemporalGP) and model.kernel.uses_time:
            return closed_form(inputs, time=float(self.time))
        return closed_form(inputs)

    def __call__(self, points: torch.Tensor) -> torch.Tensor:
        mean, var = self.gp.predict(self.inputs(points), standardized=True)
        return self.sign * mean + self.kappa * var.sqrt()

    def value_and_gradient(self, points: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
        """Values ``(m,)`` at ``(m, d)`` unit-box points and their gradients ``(m, d)``.

        In closed form (:meth:`SpatioTemporalGP.posterior_with_gradient`), the same
        numbers as autograd through :meth:`__call__` to rounding; ``None`` where there is
        none (a look-ahead window searches time too, the model or its kernel has no
        closed form, no data): the caller then differentiates :meth:`__call__`.
        """
        if self.time_window is not None:
            return None
        posterior = self.posterior_with_gradient(self.gp, points)
        if posterior is None:
            return None
        sd = posterior.variance.sqrt()
        values = torch.add(posterior.mean * self.sign, sd, alpha=self.kappa)
        # d sigma = d sigma^2 / (2 sigma)
        return values, posterior.gradient(self.sign, sd.reciprocal().mul_(0.5 * self.kappa))
