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

from dynbo.models.gp import SpatioTemporalGP

__all__ = [
    "BetaSchedule",
    "DatasetSizeBeta",
    "LogTimeBeta",
    "ConstantBeta",
    "make_beta_schedule",
    "UpperConfidenceBound",
]


class BetaSchedule(Protocol):
    """``beta`` as a function of the dataset size ``n``, the iteration ``k`` (1-based) and ``d``."""

    def __call__(self, *, n: int, iteration: int, dim: int) -> float: ...

    def as_dict(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class DatasetSizeBeta:
    """``beta = scale * d * log(2 n)`` (default ``scale = 0.2``).

    The schedule of the official W-DBO code, used for every policy in the W-DBO and BOLT
    comparisons. ``n`` is the dataset size, at least 1.
    """

    scale: float = 0.2

    def __call__(self, *, n: int, iteration: int, dim: int) -> float:
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

    def __call__(self, *, n: int, iteration: int, dim: int) -> float:
        return max(0.0, self.c1 * math.log(self.c2 * max(iteration, 1)))

    def as_dict(self) -> dict[str, Any]:
        return {"kind": "log_time", "c1": self.c1, "c2": self.c2}


@dataclass(frozen=True)
class ConstantBeta:
    """A fixed ``beta`` (UI-TVBO uses ``beta = 2``)."""

    value: float = 2.0

    def __call__(self, *, n: int, iteration: int, dim: int) -> float:
        return self.value

    def as_dict(self) -> dict[str, Any]:
        return {"kind": "constant", "value": self.value}


def make_beta_schedule(spec: BetaSchedule | dict[str, Any] | str | float | None) -> BetaSchedule:
    """Build a schedule from a schedule, a dict (``{"kind": ..., params}``), a name or a number.

    Names: ``"dataset_size"`` (default), ``"log_time"``, ``"constant"``; a number means
    :class:`ConstantBeta`.
    """
    if spec is None:
        return DatasetSizeBeta()
    if isinstance(spec, (DatasetSizeBeta, LogTimeBeta, ConstantBeta)):
        return spec
    if isinstance(spec, bool):
        raise ValueError(f"invalid beta schedule {spec!r}")
    if isinstance(spec, (int, float)):
        spec = {"kind": "constant", "value": float(spec)}
    if isinstance(spec, str):
        spec = {"kind": spec}
    if not isinstance(spec, dict) or "kind" not in spec:
        raise ValueError(f"invalid beta schedule {spec!r}")
    params = {k: float(v) for k, v in spec.items() if k != "kind"}
    kinds = {"dataset_size": DatasetSizeBeta, "log_time": LogTimeBeta, "constant": ConstantBeta}
    if spec["kind"] not in kinds:
        raise ValueError(
            f"unknown beta schedule kind {spec['kind']!r}; expected one of {sorted(kinds)}"
        )
    try:
        schedule = kinds[spec["kind"]](**params)
    except TypeError as err:
        raise ValueError(f"invalid parameters for beta schedule {spec['kind']!r}: {err}") from None
    for name, value in params.items():
        if not math.isfinite(value) or (name in ("scale", "value", "c1", "c2") and value < 0):
            raise ValueError(f"beta schedule parameter {name} must be finite and >= 0, got {value}")
    return schedule


class UpperConfidenceBound:
    """``mu(x, t) + kappa sigma(x, t)`` of a GP at a fixed time, in standardized units.

    Args:
        gp: the model.
        kappa: multiplier of the posterior standard deviation.
        time: the time at which the acquisition is evaluated (ignored by spatial kernels).

    Calling it on unit-box points ``(m, d)`` returns ``(m,)`` values, differentiable
    with respect to the points. In original units the value is
    ``target_mean + target_scale * ucb``: a positive affine map, so the argmax is the same.
    """

    def __init__(self, gp: SpatioTemporalGP, kappa: float, time: float | None = None) -> None:
        if not math.isfinite(kappa) or kappa < 0:
            raise ValueError(f"kappa must be finite and non-negative, got {kappa}")
        self.gp = gp
        self.kappa = float(kappa)
        self.time = time

    def inputs(self, points: torch.Tensor) -> torch.Tensor:
        """GP inputs for unit-box points: appends the time column if the kernel models time."""
        if not self.gp.kernel.uses_time:
            return points
        if self.time is None:
            raise ValueError("this GP models time: the acquisition needs a time")
        column = points.new_full((*points.shape[:-1], 1), float(self.time))
        return torch.cat([points, column], dim=-1)

    def __call__(self, points: torch.Tensor) -> torch.Tensor:
        mean, var = self.gp.predict(self.inputs(points), standardized=True)
        return mean + self.kappa * var.sqrt()
