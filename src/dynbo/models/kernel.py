"""The separable spatio-temporal kernel and its hyperparameters.

``k((x, t), (x', t')) = lambda * k_S(||x - x'|| / l_S) * k_T(|t - t'| / l_T)``
(W-DBO Assumption 3.2, BOLT Assumption 3.2), with ``k_S`` and ``k_T`` any of the
families of :mod:`dynbo.kernels`. Inputs are rows ``z = (x_1, ..., x_d, t)``: the
spatial coordinates (already mapped to the unit box by the policy) followed by the
time stamp in the policy's time unit (seconds or steps). A kernel with
``temporal=None`` ignores time and its inputs are the ``d`` spatial coordinates only.
With ``ard=True`` the spatial distance is ``sqrt(sum_j ((x_j - x'_j) / l_j)^2)``.

The temporal factor may also be the Wiener-process covariance of UI-TVBO (Brunzema,
von Rohr & Trimpe 2022), ``k_T(t, t') = 1 + min(t, t') / l_T`` for ``t, t' >= 0``:
with ``lambda = sigma_k^2`` and ``l_T = sigma_k^2 / sigma_w^2`` the kernel is
``k_S (sigma_k^2 + sigma_w^2 min(t, t'))``, a random walk of functions whose variance
grows by ``sigma_w^2`` per time unit (``temporal="wiener"``). It is not stationary, so
the relevancy criterion and the theory module, which need spectral densities, reject it.

Over a finite set of arms the spatial factor may instead be a user-given covariance
matrix (:class:`ArmCovariance`, e.g. the empirical covariance of sensors' past readings
in Bogunovic, Scarlett & Cevher 2016, Sec. 5.2): ``k_S(x_i, x_j) = K[a(x_i), a(x_j)]``
with ``a(x)`` the arm at ``x``. It has no spatial lengthscale (the fit leaves
``lengthscale_space`` alone) and is not stationary.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from dynbo.kernels import (
    Family,
    as_family,
    correlation,
    correlation_and_radial_derivative,
    correlation_and_scale_derivative,
    correlation_and_scale_derivatives,
)

__all__ = [
    "parse_initial_hyperparameters",
    "WIENER",
    "ArmCovariance",
    "CrossCovarianceGradient",
    "KernelSpec",
    "as_temporal",
    "names_temporal",
    "Hyperparameters",
    "HyperparameterBounds",
    "markov_epsilon",
    "markov_lengthscale",
]

_HYPERPARAMETER_NAMES = ("outputscale", "lengthscale_space", "lengthscale_time", "noise")

# Distances enter through sqrt(r^2); clamping r^2 keeps the autograd gradient of
# sqrt finite at coincident points (there the true gradient of an even kernel is 0).
_MIN_SQUARED_DISTANCE = 1e-30

#: the temporal "family" of the Wiener-process covariance ``1 + min(t, t') / l_T``.
WIENER = "wiener"


def as_temporal(family: Family | str) -> Family | str:
    """Parse a temporal factor name: a stationary family or ``"wiener"``.

    Raises:
        ValueError: naming the unknown family.
    """
    if isinstance(family, str) and family.lower() == WIENER:
        return WIENER
    try:
        return as_family(family)
    except ValueError:
        raise ValueError(
            f"unknown temporal kernel {family!r}; expected one of "
            "'se', 'matern12', 'matern32', 'matern52', 'wiener'"
        ) from None


def names_temporal(value: object, family: str) -> bool:
    """Whether ``value`` is ``None`` or a name of the temporal factor ``family``.

    Names are read as :func:`as_temporal` reads them (any case); for the policies whose
    temporal factor is fixed (TV-GP-UCB's Markov factor, UI-TVBO's Wiener process).
    """
    if value is None:
        return True
    if not isinstance(value, str):
        return False
    try:
        return as_temporal(value) == as_temporal(family)
    except ValueError:
        return False


class ArmCovariance:
    """A given covariance matrix over a finite set of arms: the spatial factor ``k_S``.

    Args:
        points: ``(N, d)`` the arms' coordinates in the unit box (distinct).
        matrix: ``(N, N)`` symmetric positive semi-definite covariance, ``matrix[i, j] =
            k_S(points[i], points[j])`` (in the units of the standardized targets times
            the outputscale, which multiplies it as it multiplies any ``k_S``).

    A point that is not one of the arms is read as the nearest arm; policies only ever
    evaluate the kernel at arms (their candidates).
    """

    def __init__(self, points: torch.Tensor, matrix: torch.Tensor) -> None:
        if points.ndim != 2 or matrix.shape != (points.shape[0], points.shape[0]):
            raise ValueError(
                f"arm covariance must be (N, N) for N = {points.shape[0]} arms, "
                f"got {tuple(matrix.shape)}"
            )
        self.points = points
        self.matrix = matrix

    def index(self, x: torch.Tensor) -> torch.Tensor:
        """``(..., n)`` index of the arm nearest to each row of ``(..., n, d)``."""
        points = self.points.to(dtype=x.dtype, device=x.device)
        return _squared_distance(x, points).argmin(-1)

    def covariance(self, x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
        """``(..., n1, n2)`` entries ``K[a(x1_i), a(x2_j)]`` for ``(..., n, d)`` inputs."""
        matrix = self.matrix.to(dtype=x1.dtype, device=x1.device)
        i1, i2 = self.index(x1), self.index(x2)
        return matrix[i1[..., :, None], i2[..., None, :]]

    def variance(self, x: torch.Tensor) -> torch.Tensor:
        """``(..., n)`` diagonal entries ``K[a(x_i), a(x_i)]``."""
        return self.matrix.diagonal().to(dtype=x.dtype, device=x.device)[self.index(x)]


@dataclass(frozen=True)
class CrossCovarianceGradient:
    """A cross-covariance and its gradients in the spatial coordinates of its first inputs.

    For a stationary spatial factor, ``d value_ij / d x_i = radial_ij (x_i - x'_j) / l^2``
    (``l^2`` per dimension under ARD), so every gradient the acquisition needs is a
    weighted sum over the data, :meth:`contract`: two matrix products instead of an
    autograd graph of the whole prediction.

    Attributes:
        value: ``(m, n)`` covariances ``k(z_i, z'_j)``.
        radial: ``(m, n)`` the factors above (the scale and the temporal factor included).
        points: ``(m, d)`` spatial coordinates ``x_i`` of the first inputs.
        data: ``(n, d)`` spatial coordinates ``x'_j`` of the second inputs.
        inverse_square_lengthscale: ``(1,)`` or ``(d,)`` ``1 / l^2``.
    """

    value: torch.Tensor
    radial: torch.Tensor
    points: torch.Tensor
    data: torch.Tensor
    inverse_square_lengthscale: torch.Tensor

    def contract(self, weights: torch.Tensor) -> torch.Tensor:
        """``sum_j weights_ij d value_ij / d x_i``: ``(m, d)`` for ``(m, n)`` or ``(n,)``."""
        w = self.radial * weights
        return (w.sum(-1, keepdim=True) * self.points - w @ self.data).mul_(
            self.inverse_square_lengthscale
        )


@dataclass(frozen=True)
class KernelSpec:
    """Which correlation families a GP uses, and on how many spatial dimensions.

    Attributes:
        dim: number of spatial dimensions ``d``.
        spatial: family of ``k_S`` (default Matern-5/2, the papers' default).
        temporal: family of ``k_T`` (default Matern-3/2), ``"wiener"`` for the
            Wiener-process factor ``1 + min(t, t') / l_T`` (time since the start,
            ``t >= 0``), or ``None`` for a purely spatial kernel that ignores time.
        ard: one spatial lengthscale per dimension instead of one shared lengthscale.
        arms: a given covariance over a finite set of arms that replaces ``k_S`` (then
            ``spatial`` and ``ard`` are not used), or ``None``.
    """

    dim: int
    spatial: Family = Family.MATERN52
    temporal: Family | str | None = Family.MATERN32
    ard: bool = False
    arms: ArmCovariance | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.dim, int) or isinstance(self.dim, bool) or self.dim < 1:
            raise ValueError(f"kernel dimension must be a positive integer, got {self.dim!r}")
        object.__setattr__(self, "spatial", as_family(self.spatial))
        if self.temporal is not None:
            object.__setattr__(self, "temporal", as_temporal(self.temporal))

    @property
    def uses_time(self) -> bool:
        """Whether the last input column is a time stamp."""
        return self.temporal is not None

    @property
    def stationary(self) -> bool:
        """Whether ``k`` depends on the inputs only through their differences."""
        return self.temporal != WIENER and self.arms is None

    def temporal_argument(self, t1: torch.Tensor, t2: torch.Tensor) -> torch.Tensor:
        """What the temporal factor reads: ``|t - t'|``, or ``min(t, t')`` for Wiener.

        Args:
            t1: ``(..., n1)`` time stamps; t2: ``(..., n2)``.

        Returns:
            ``(..., n1, n2)``, in time units (divide by ``l_T`` for the factor).
        """
        if self.temporal == WIENER:
            return torch.minimum(t1[..., :, None], t2[..., None, :])
        return (t1[..., :, None] - t2[..., None, :]).abs()

    def temporal_factor(self, scaled: torch.Tensor) -> torch.Tensor:
        """``k_T`` at ``scaled = temporal_argument / l_T`` (any shape)."""
        if self.temporal == WIENER:
            return 1.0 + scaled
        assert self.temporal is not None
        return correlation(self.temporal, scaled)

    def temporal_correlation(
        self, t1: torch.Tensor, t2: torch.Tensor, lengthscale_time: torch.Tensor | float
    ) -> torch.Tensor:
        """``(..., n1, n2)`` ``k_T`` of ``(..., n1)`` against ``(..., n2)`` time stamps, at
        ``l_T = lengthscale_time`` (in their time unit)."""
        return self.temporal_factor(self.temporal_argument(t1, t2) / lengthscale_time)

    def temporal_factor_and_scale_derivative(
        self, scaled: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``k_T`` and its derivative in ``log l_T`` at ``scaled`` (the fit's gradient).

        For Wiener, ``d (1 + m / l) / d log l = -m / l``; for the stationary families see
        :func:`dynbo.kernels.correlation_and_scale_derivative`.
        """
        if self.temporal == WIENER:
            return 1.0 + scaled, -scaled
        assert self.temporal is not None
        return correlation_and_scale_derivative(self.temporal, scaled)

    def temporal_factor_and_scale_derivatives(
        self, scaled: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``k_T`` and its first two derivatives in ``log l_T`` at ``scaled`` (the fit's
        Hessian).

        For Wiener, ``(1 + m / l, -m / l, m / l)``; for the stationary families see
        :func:`dynbo.kernels.correlation_and_scale_derivatives`.
        """
        if self.temporal == WIENER:
            return 1.0 + scaled, -scaled, scaled * 1.0  # a copy, of a tensor or an array
        assert self.temporal is not None
        return correlation_and_scale_derivatives(self.temporal, scaled)

    def diagonal(
        self, inputs: torch.Tensor, lengthscale_time: torch.Tensor | float | None
    ) -> torch.Tensor:
        """``k_S(z, z) k_T(z, z)`` of each row of ``(..., n, input_dim)``: ``(..., n)``.

        1 for the stationary kernels; ``1 + t / l_T`` for the Wiener factor, whose
        prior variance grows with time; ``K[a, a]`` of each row's arm under a given arm
        covariance.
        """
        if self.arms is not None:
            out = self.arms.variance(inputs[..., : self.dim])
        else:
            out = inputs.new_ones(inputs.shape[:-1])
        if self.temporal == WIENER:
            assert lengthscale_time is not None
            return out * (1.0 + inputs[..., self.dim] / lengthscale_time)
        return out

    @property
    def input_dim(self) -> int:
        """Number of input columns: ``d + 1`` with time, ``d`` without."""
        return self.dim + (1 if self.uses_time else 0)

    @property
    def num_spatial_lengthscales(self) -> int:
        return self.dim if self.ard else 1

    def correlation(
        self,
        inputs1: torch.Tensor,
        inputs2: torch.Tensor,
        lengthscale_space: torch.Tensor,
        lengthscale_time: torch.Tensor | float | None,
    ) -> torch.Tensor:
        """Correlation matrix ``k_S * k_T`` (without the scale lambda).

        Args:
            inputs1: ``(..., n1, input_dim)``.
            inputs2: ``(..., n2, input_dim)``.
            lengthscale_space: ``(1,)`` or ``(d,)`` tensor, in unit-box units.
            lengthscale_time: scalar in the time unit of the inputs (ignored if the
                kernel has no temporal part).

        Returns:
            ``(..., n1, n2)`` correlations in ``[0, 1]`` (Wiener: ``k_S (1 + min / l_T)``;
            a given arm covariance: its entries times ``k_T``).
        """
        d = self.dim
        if self.arms is not None:
            corr = self.arms.covariance(inputs1[..., :d], inputs2[..., :d])
        else:
            x1 = inputs1[..., :d] / lengthscale_space
            x2 = inputs2[..., :d] / lengthscale_space
            sq = _squared_distance(x1, x2)
            corr = correlation(self.spatial, sq.clamp_min(_MIN_SQUARED_DISTANCE).sqrt())
        if self.temporal is not None:
            assert lengthscale_time is not None
            corr = corr * self.temporal_correlation(
                inputs1[..., d], inputs2[..., d], lengthscale_time
            )
        return corr

    def covariance_with_gradient(
        self,
        inputs1: torch.Tensor,
        inputs2: torch.Tensor,
        lengthscale_space: torch.Tensor,
        lengthscale_time: torch.Tensor | float | None,
        scale: float = 1.0,
        temporal_row: torch.Tensor | None = None,
    ) -> CrossCovarianceGradient | None:
        """``scale * k_S * k_T`` of ``(m, input_dim)`` against ``(n, input_dim)`` inputs.

        The gradients are in the spatial coordinates of ``inputs1``; its time column (if
        any) is held fixed, as when an acquisition is maximized at a given time.
        ``temporal_row``: ``(n,)`` ``k_T`` of that one time against ``inputs2``'s, where
        every row of ``inputs1`` has the same time (computed here from the time columns
        if ``None``; an acquisition's search evaluates it once instead of per call).

        Returns:
            a :class:`CrossCovarianceGradient`, or ``None`` where ``k_S`` has no gradient
            everywhere (Matern-1/2 at zero distance) or is a given arm covariance.
        """
        if self.arms is not None or self.spatial is Family.MATERN12:
            return None
        d = self.dim
        inverse_lengthscale = lengthscale_space.reciprocal()
        points, data = inputs1[:, :d], inputs2[:, :d]
        # differences, not the |a|^2 + |b|^2 - 2ab expansion (see _squared_distance)
        r = torch.cdist(
            points * inverse_lengthscale,
            data * inverse_lengthscale,
            compute_mode="donot_use_mm_for_euclid_dist",
        )
        value, radial = correlation_and_radial_derivative(self.spatial, r)
        factor: torch.Tensor | float = scale
        if self.temporal is not None and temporal_row is not None:
            factor = temporal_row * scale  # (n,), the same for every row
        elif self.temporal is not None:
            assert lengthscale_time is not None
            factor = self.temporal_correlation(inputs1[:, d], inputs2[:, d], lengthscale_time)
            factor.mul_(scale)
        return CrossCovarianceGradient(
            value=value.mul_(factor),
            radial=radial.mul_(factor),
            points=points,
            data=data,
            inverse_square_lengthscale=inverse_lengthscale * inverse_lengthscale,
        )

    def spatial_only(self) -> KernelSpec:
        """The same spatial part without time."""
        return replace(self, temporal=None)


#: the most elements of the ``(..., n1, n2, d)`` difference tensor that
#: :func:`_squared_distance` builds at once (32 MiB in float64): larger products are
#: taken in row chunks, so that the memory of a call grows as ``n1 * n2``, not
#: ``n1 * n2 * d`` (a raw-sample batch of 8192 points against 1000 observations in
#: 64 dimensions was a 4 GiB tensor, twice).
DIFFERENCE_CHUNK_ELEMENTS = 1 << 22

#: up to this many input dimensions :func:`_squared_distance` lays the differences out
#: dimension first (faster for few dimensions; at d = 64 the last-axis sum is as fast)
_LEADING_DIMENSION_AT_MOST = 16


def _squared_distance(x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
    """``(..., n1, n2)`` squared Euclidean distances of ``(..., n1, d)`` and ``(..., n2, d)``.

    Explicit differences, not the ``|a|^2 + |b|^2 - 2ab`` expansion: the expansion loses
    all digits for nearby points, which the posterior variance needs. Row chunks (see
    ``DIFFERENCE_CHUNK_ELEMENTS``) give the same numbers as one pass: each entry is the
    same sum.
    """
    rows, cols, dim = x1.shape[-2], x2.shape[-2], x1.shape[-1]
    batch = math.prod(torch.broadcast_shapes(x1.shape[:-2], x2.shape[:-2]))
    per_row = max(1, batch * cols * dim)
    if rows * per_row <= DIFFERENCE_CHUNK_ELEMENTS:
        if 0 < dim <= _LEADING_DIMENSION_AT_MOST:
            # dimension first, the d contiguous (n1, n2) slices added one after the other,
            # where a sum over a short last axis is a strided reduction 10x slower (n = 200,
            # d = 3: 0.16 ms against 1.6 ms). Every entry is the sum in dimension order, so
            # the matrix of a set with itself is exactly symmetric (a reduction's order can
            # depend on an entry's place), and for d <= 3 the last-axis sum's numbers
            first1 = x1.transpose(-1, -2).contiguous()  # (..., d, n1)
            first2 = x2.transpose(-1, -2).contiguous()
            diff = first1[..., :, None] - first2[..., None, :]
            squares = diff * diff
            out = squares[..., 0, :, :].clone()
            for k in range(1, dim):
                out += squares[..., k, :, :]
            return out
        diff = x1[..., :, None, :] - x2[..., None, :, :]
        return (diff * diff).sum(-1)
    step = max(1, DIFFERENCE_CHUNK_ELEMENTS // per_row)
    if torch.is_grad_enabled() and (x1.requires_grad or x2.requires_grad):
        parts = []
        for start in range(0, rows, step):
            diff = x1[..., start : start + step, None, :] - x2[..., None, :, :]
            parts.append((diff * diff).sum(-1))
        return torch.cat(parts, dim=-2)
    # Without autograd, one difference buffer serves every chunk: a fresh 32 MiB tensor
    # per chunk made glibc's allocator grow the heap chunk after chunk (an 8192 x 1000
    # x 64 raw-sample batch peaked at 8.7 GB of resident memory and ran 15x slower from
    # page faults) although only one chunk is alive at a time.
    x1b, x2b = torch.broadcast_tensors(x1[..., :, None, :], x2[..., None, :, :])
    out = torch.empty(x1b.shape[:-1], dtype=x1b.dtype, device=x1b.device)
    buffer = torch.empty((*x1b.shape[:-3], step, cols, dim), dtype=x1b.dtype, device=x1b.device)
    for start in range(0, rows, step):
        stop = min(start + step, rows)
        diff = buffer[..., : stop - start, :, :]
        torch.sub(x1b[..., start:stop, :, :], x2b[..., start:stop, :, :], out=diff)
        diff.mul_(diff)
        torch.sum(diff, dim=-1, out=out[..., start:stop, :])
    return out


@dataclass(frozen=True)
class Hyperparameters:
    """Values of the kernel and likelihood hyperparameters (targets in standardized units).

    Attributes:
        outputscale: ``lambda > 0``, the prior variance of f.
        lengthscale_space: ``l_S`` per spatial dimension (length 1 if isotropic), in
            unit-box units.
        lengthscale_time: ``l_T`` in the policy's time unit, ``None`` for spatial kernels.
        noise: ``sigma^2 >= 0``, the homoscedastic noise variance; per-observation noise
            is ``noise * noise_scale_i`` (see :class:`dynbo.models.SpatioTemporalGP`).
    """

    outputscale: float = 1.0
    lengthscale_space: tuple[float, ...] = (0.2,)
    lengthscale_time: float | None = None
    noise: float = 1e-2

    def __post_init__(self) -> None:
        ls = self.lengthscale_space
        if isinstance(ls, (int, float)):
            ls = (float(ls),)
        object.__setattr__(self, "lengthscale_space", tuple(float(v) for v in ls))
        _check_positive("outputscale", self.outputscale)
        for v in self.lengthscale_space:
            _check_positive("lengthscale_space", v)
        if self.lengthscale_time is not None:
            _check_positive("lengthscale_time", self.lengthscale_time)
        if not (math.isfinite(self.noise) and self.noise >= 0.0):
            raise ValueError(f"noise must be a finite non-negative number, got {self.noise!r}")

    def as_dict(self) -> dict[str, object]:
        return {
            "outputscale": self.outputscale,
            "lengthscale_space": list(self.lengthscale_space),
            "lengthscale_time": self.lengthscale_time,
            "noise": self.noise,
        }

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> Hyperparameters:
        return cls(
            outputscale=float(data["outputscale"]),  # type: ignore[arg-type]
            lengthscale_space=tuple(data["lengthscale_space"]),  # type: ignore[arg-type]
            lengthscale_time=(
                None if data["lengthscale_time"] is None else float(data["lengthscale_time"])  # type: ignore[arg-type]
            ),
            noise=float(data["noise"]),  # type: ignore[arg-type]
        )

    def for_kernel(self, kernel: KernelSpec) -> Hyperparameters:
        """Broadcast/validate the lengthscales against a kernel spec."""
        ls = self.lengthscale_space
        want = kernel.num_spatial_lengthscales
        if len(ls) == 1 and want > 1:
            ls = ls * want
        elif len(ls) != want:
            raise ValueError(f"lengthscale_space has {len(ls)} values but the kernel needs {want}")
        lt = self.lengthscale_time
        if kernel.uses_time and lt is None:
            raise ValueError("the kernel models time but lengthscale_time is None")
        if not kernel.uses_time:
            lt = None
        return replace(self, lengthscale_space=ls, lengthscale_time=lt)


def _check_positive(name: str, value: float) -> None:
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a finite positive number, got {value!r}")


#: the widest bounds a fit may search: inputs are in the unit box (space) and within
#: ``1e12`` (time), so these keep every scaled distance below ``2e18`` and its square
#: finite even in float32, and the standardized targets' variances within reason
HYPERPARAMETER_RANGE = {
    "outputscale": (1e-12, 1e12),
    "lengthscale_space": (1e-6, 1e6),
    "lengthscale_time": (1e-6, 1e15),
    "noise": (1e-12, 1e12),
}
HYPERPARAMETER_RANGE_REASON = (
    "beyond them the kernel's scaled distances or the covariance overflow (the targets "
    "are standardized, space is the unit box)"
)


@dataclass(frozen=True)
class HyperparameterBounds:
    """Box bounds for maximum-likelihood fitting (each a ``(low, high)`` pair).

    Defaults are wide enough for targets standardized to unit variance, inputs in the
    unit box and time in seconds or steps. The noise floor ``1e-4`` (BoTorch's default
    for standardized targets) keeps maximum likelihood away from interpolating
    solutions with vanishing noise and lengthscales. ``fixed`` names hyperparameters that the
    fit must leave at their current value (e.g. ``{"noise"}`` when the noise is known).
    """

    outputscale: tuple[float, float] = (1e-2, 1e2)
    lengthscale_space: tuple[float, float] = (1e-2, 1e1)
    lengthscale_time: tuple[float, float] = (1e-2, 1e5)
    noise: tuple[float, float] = (1e-4, 2.0)
    fixed: frozenset[str] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        for name in ("outputscale", "lengthscale_space", "lengthscale_time", "noise"):
            low, high = getattr(self, name)
            if not (math.isfinite(low) and math.isfinite(high) and 0 < low < high):
                raise ValueError(
                    f"bounds for {name} must satisfy 0 < low < high (finite), got {(low, high)}"
                )
            least, most = HYPERPARAMETER_RANGE[name]
            if low < least or high > most:
                raise ValueError(
                    f"bounds for {name} must lie within [{least:g}, {most:g}], got "
                    f"{(low, high)}: {HYPERPARAMETER_RANGE_REASON}"
                )
        object.__setattr__(self, "fixed", frozenset(self.fixed))
        unknown = set(self.fixed) - set(_HYPERPARAMETER_NAMES)
        if unknown:
            raise ValueError(f"unknown hyperparameter names in fixed: {sorted(unknown)}")

    @classmethod
    def from_options(cls, spec: Mapping[str, Any] | None) -> HyperparameterBounds:
        """Defaults overridden by a mapping such as ``{"noise": (1e-4, 1.0), "fixed": ["noise"]}``.

        Raises:
            ValueError: naming an unknown key or a value that is not a ``(low, high)``
                pair of positive numbers (``fixed``: a name or a list of names).
        """
        if spec is None:
            return cls()
        if not isinstance(spec, Mapping):
            raise ValueError(f"hyperparameter_bounds must be a mapping, got {spec!r}")
        unknown = set(spec) - {*_HYPERPARAMETER_NAMES, "fixed"}
        if unknown:
            raise ValueError(f"unknown hyperparameter_bounds keys: {sorted(map(str, unknown))}")
        kwargs: dict[str, Any] = {}
        for key, value in spec.items():
            if key == "fixed":
                names = [value] if isinstance(value, str) else value
                if not isinstance(names, (list, tuple, set, frozenset)) or not all(
                    isinstance(v, str) for v in names
                ):
                    raise ValueError(
                        f"hyperparameter_bounds['fixed'] must be a name or a list of names, "
                        f"got {value!r}"
                    )
                kwargs[key] = frozenset(names)
                continue
            pair = None
            if isinstance(value, (list, tuple)) and len(value) == 2:
                if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
                    try:
                        pair = (float(value[0]), float(value[1]))
                    except OverflowError:
                        raise ValueError(
                            f"hyperparameter_bounds[{key!r}] holds an integer too large to be "
                            "a float"
                        ) from None
            if pair is None:
                raise ValueError(
                    f"hyperparameter_bounds[{key!r}] must be a (low, high) pair, got {value!r}"
                )
            kwargs[key] = pair
        return cls(**kwargs)

    def clip(self, h: Hyperparameters) -> Hyperparameters:
        """Project hyperparameters into the bounds (fixed ones are left untouched)."""

        def c(name: str, v: float) -> float:
            if name in self.fixed:
                return v
            low, high = getattr(self, name)
            return min(max(v, low), high)

        return Hyperparameters(
            outputscale=c("outputscale", h.outputscale),
            lengthscale_space=tuple(c("lengthscale_space", v) for v in h.lengthscale_space),
            lengthscale_time=(
                None if h.lengthscale_time is None else c("lengthscale_time", h.lengthscale_time)
            ),
            noise=c("noise", h.noise),
        )


def as_lengthscale_tensor(values: Sequence[float], like: torch.Tensor) -> torch.Tensor:
    """Lengthscales as a tensor with the dtype/device of ``like``."""
    return torch.as_tensor(list(values), dtype=like.dtype, device=like.device)


def markov_lengthscale(epsilon: float) -> float:
    """Matern-1/2 lengthscale ``-2 / ln(1 - eps)`` of the Markov-chain temporal factor.

    Bogunovic, Scarlett & Cevher (2016), eq. 3-4: ``f_{t+1} = sqrt(1 - eps) f_t +
    sqrt(eps) g_{t+1}`` gives ``Cov(f_i, f_j) = (1 - eps)^{|i - j| / 2} k`` =
    ``exp(-|i - j| / l)`` with this ``l`` (in steps).
    """
    if not 0.0 < epsilon < 1.0:
        raise ValueError(f"epsilon must be in (0, 1), got {epsilon!r}")
    return -2.0 / math.log1p(-epsilon)


def markov_epsilon(lengthscale: float) -> float:
    """Inverse of :func:`markov_lengthscale`: ``eps = 1 - exp(-2 / l)``."""
    if not lengthscale > 0:
        raise ValueError(f"lengthscale must be positive, got {lengthscale!r}")
    return -math.expm1(-2.0 / lengthscale)


def parse_initial_hyperparameters(
    spec: Mapping[str, Any] | None, kernel: KernelSpec
) -> dict[str, Any]:
    """A policy's ``initial_hyperparameters`` option, checked against ``kernel``.

    Args:
        spec: ``None`` or a mapping of some of ``outputscale``, ``lengthscale_space`` (one
            value or one per dimension), ``lengthscale_time``, ``noise``.
        kernel: the policy's kernel.

    Returns:
        The overrides as floats (``lengthscale_space`` a tuple).

    Raises:
        ValueError: not a mapping, an unknown key, or a value that is not a valid
            hyperparameter for ``kernel`` (naming the field).
    """
    from dynbo.validation import finite_number

    if spec is None:
        return {}
    if not isinstance(spec, Mapping):
        raise ValueError(f"initial_hyperparameters must be a mapping, got {spec!r}")
    allowed = {"outputscale", "lengthscale_space", "lengthscale_time", "noise"}
    unknown = set(spec) - allowed
    if unknown:
        raise ValueError(f"unknown initial_hyperparameters keys: {sorted(unknown)}")
    out = dict(spec)
    if "lengthscale_space" in out:
        ls = out["lengthscale_space"]
        out["lengthscale_space"] = tuple(ls) if isinstance(ls, (list, tuple)) else (ls,)
    for key, value in out.items():
        values = value if key == "lengthscale_space" else (value,)
        checked = tuple(finite_number(f"initial_hyperparameters[{key!r}]", v) for v in values)
        least, most = HYPERPARAMETER_RANGE[key]
        if any(not least <= v <= most for v in checked):
            raise ValueError(
                f"initial_hyperparameters[{key!r}] must lie within [{least:g}, {most:g}], got "
                f"{value!r}: {HYPERPARAMETER_RANGE_REASON}"
            )
        out[key] = checked if key == "lengthscale_space" else checked[0]
    # validate now, so that a bad value fails at construction naming the field
    Hyperparameters(**{"lengthscale_time": 1.0 if kernel.uses_time else None, **out}).for_kernel(
        kernel
    )
    return out
