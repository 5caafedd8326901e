"""An exact GP with a cached Cholesky factor that a TVBO loop can afford.

The GP keeps ``L = chol(Delta)``, ``Delta = lambda * C(Z, Z) + diag(sigma^2 * s_i) + jitter I``
(``C`` the correlation of :class:`~dynbo.models.kernel.KernelSpec`, ``s_i`` a per-observation
noise scale, 1 by default) and ``alpha = Delta^{-1} y_std``. Adding or removing one
observation updates ``L`` and ``alpha`` in O(n^2); changing the hyperparameters
refactorizes (O(n^3)).

Targets are standardized: ``y_std = (y - target_mean) / target_scale``. The two
constants are computed by :meth:`SpatioTemporalGP.set_data` and
:meth:`SpatioTemporalGP.restandardize` (the hyperparameter fit calls the latter) and are
*kept* by :meth:`add` / :meth:`remove`, so that an add or a remove is an exact O(n^2)
change of one model, not a change of units. All hyperparameters are in standardized
units.

The scale is the unit of the hyperparameters (``lambda`` and ``sigma^2`` are in units of
``target_scale^2``), so it changes only where it can be estimated: from two or more
targets, and only when the caller does not ask to keep it (``keep_scale=True``: a policy
whose hyperparameters were fitted in the current units and are not refitted now, such as
one just reset to its newest observation). A dataset of one target, or none, keeps the
scale it had; the mean follows the data whenever there are any.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from dynbo.models.kernel import (
    CrossCovarianceGradient,
    Hyperparameters,
    KernelSpec,
    as_lengthscale_tensor,
)
from dynbo.models.linalg import (
    CholeskyJitterWarning,
    cholesky_append,
    cholesky_delete,
    cholesky_delete_rows,
    cholesky_rank_one_update,
    robust_cholesky,
)

__all__ = ["PosteriorGradient", "SpatioTemporalGP"]

_MIN_VARIANCE = 1e-12

#: remove_sequence refactorizes the changed block from one removal per this many of its
#: rows (CPU, one thread: a rank-one delete costs about 1/80 of that block's product
#: and factorization at n = 200 to 1000, measured)
_DELETES_PER_REFACTOR = 64


@dataclass(frozen=True)
class PosteriorGradient:
    """Posterior mean and variance at ``m`` points with their spatial gradients (standardized).

    The gradients are kept as contraction weights over the data (``d mu_i / dx_i =
    sum_j a_j dk_ij / dx_i``, ``d sigma_i^2 / dx_i = sum_j V_ij dk_ij / dx_i``) and formed
    on request, so that an acquisition that needs one combination of them (UCB:
    ``mu + kappa sigma``) pays for one contraction, :meth:`gradient`.

    Attributes:
        mean, variance: ``(m,)``; the variance floored at ``1e-12`` (its gradient is 0
            where the floor holds, as autograd's through the clamp).
        cross: the cross-covariance with the data and its gradients.
        mean_weights: ``(n,)`` ``a = Delta^{-1} y_std``.
        variance_weights: ``(m, n)`` ``V`` (``-2 (Delta^{-1} k(Z, x_i))_j`` for the GP),
            rows of zeros where the variance sits at its floor.
        representer: ``(n, m)`` ``Delta^{-1} k(Z, x)`` (the ridge widths need it).
    """

    mean: torch.Tensor
    variance: torch.Tensor
    cross: CrossCovarianceGradient
    mean_weights: torch.Tensor
    variance_weights: torch.Tensor
    representer: torch.Tensor

    def gradient(
        self, mean_coefficient: float, variance_coefficient: torch.Tensor | float
    ) -> torch.Tensor:
        """``(m, d)`` gradient of ``c_mu mu_i + c_var,i sigma_i^2`` in one contraction.

        Args:
            mean_coefficient: ``c_mu``.
            variance_coefficient: ``c_var``, a number or ``(m,)`` per point.
        """
        if isinstance(variance_coefficient, torch.Tensor):
            variance_part = self.variance_weights * variance_coefficient[:, None]
        else:
            variance_part = self.variance_weights * variance_coefficient
        return self.cross.contract(variance_part.add_(self.mean_weights, alpha=mean_coefficient))

    @property
    def mean_gradient(self) -> torch.Tensor:
        """``(m, d)`` ``d mu / dx`` in the unit-box coordinates."""
        return self.cross.contract(self.mean_weights)

    @property
    def variance_gradient(self) -> torch.Tensor:
        """``(m, d)`` ``d sigma^2 / dx`` in the unit-box coordinates (0 where floored)."""
        return self.gradient(0.0, 1.0)


class SpatioTemporalGP:
    """Exact GP regression on the separable kernel ``lambda k_S k_T``.

    Args:
        kernel: the kernel families and spatial dimension.
        hyperparameters: initial values (standardized units); defaults to
            ``lambda = 1, l_S = 0.2, l_T = 1, sigma^2 = 1e-2``.
        standardize: standardize the targets (the papers' default); with ``False`` the
            prior mean is 0 and the targets are used as they are (within-model
            benchmarks with a known prior).
        center: with ``standardize``, subtract the targets' mean (the default); with
            ``False`` the prior mean stays 0 in original units and the targets are only
            scaled, by their root mean square (a safe set's constraint GP: its prior
            must not call a point safe because the data seen elsewhere were).
        dtype: floating dtype of every tensor (default float64).
        device: torch device of every tensor.

    Inputs are ``(n, kernel.input_dim)`` tensors: spatial coordinates in the unit box,
    then (if the kernel models time) the time stamp.
    """

    def __init__(
        self,
        kernel: KernelSpec,
        hyperparameters: Hyperparameters | None = None,
        *,
        standardize: bool = True,
        center: bool = True,
        dtype: torch.dtype = torch.float64,
        device: torch.device | str | None = None,
    ) -> None:
        self.kernel = kernel
        if hyperparameters is None:
            hyperparameters = Hyperparameters(lengthscale_time=1.0 if kernel.uses_time else None)
        self._hyper = hyperparameters.for_kernel(kernel)
        self._lengthscale_cache: tuple[Hyperparameters, torch.Tensor] | None = None
        # (time, hyperparameters, inputs, k_T row): both are replaced, never modified,
        # when they change
        self._temporal_row_cache: (
            tuple[float, Hyperparameters, torch.Tensor, torch.Tensor] | None
        ) = None
        self.standardize = standardize
        self.center = center
        self.dtype = dtype
        self.device = torch.device(device) if device is not None else torch.device("cpu")
        D = kernel.input_dim
        self._inputs = torch.empty((0, D), dtype=dtype, device=self.device)
        self._targets = torch.empty((0,), dtype=dtype, device=self.device)
        self._noise_scale = torch.empty((0,), dtype=dtype, device=self.device)
        self._factor = torch.empty((0, 0), dtype=dtype, device=self.device)
        self._alpha = torch.empty((0,), dtype=dtype, device=self.device)
        self._target_mean = 0.0
        self._target_scale = 1.0
        self._jitter = 0.0

    # ------------------------------------------------------------------ properties
    @property
    def n(self) -> int:
        """Number of observations."""
        return int(self._targets.shape[0])

    @property
    def hyperparameters(self) -> Hyperparameters:
        return self._hyper

    @property
    def inputs(self) -> torch.Tensor:
        """``(n, input_dim)`` training inputs (a copy)."""
        return self._inputs.clone()

    @property
    def targets(self) -> torch.Tensor:
        """``(n,)`` training targets in original units (a copy)."""
        return self._targets.clone()

    @property
    def noise_scale(self) -> torch.Tensor:
        """``(n,)`` per-observation noise multipliers ``s_i`` (a copy)."""
        return self._noise_scale.clone()

    @property
    def noise_variances(self) -> torch.Tensor:
        """``(n,)`` noise variances ``sigma^2 s_i`` in standardized units."""
        return self._hyper.noise * self._noise_scale

    @property
    def cholesky_factor(self) -> torch.Tensor:
        """``(n, n)`` cached lower factor of ``Delta`` (a view; do not modify)."""
        return self._factor

    @property
    def alpha(self) -> torch.Tensor:
        """``(n,)`` ``Delta^{-1} y_std``."""
        return self._alpha

    @property
    def jitter(self) -> float:
        """Diagonal jitter inside the cached factor (0 unless a factorization needed it)."""
        return self._jitter

    @property
    def target_mean(self) -> float:
        return self._target_mean

    @property
    def target_scale(self) -> float:
        return self._target_scale

    @property
    def standardized_targets(self) -> torch.Tensor:
        """``(n,)`` ``(y - target_mean) / target_scale``."""
        return (self._targets - self._target_mean) / self._target_scale

    def leave_one_out(self, index: int) -> tuple[float, float]:
        """Mean and variance of the latent f at observation ``index`` given all the others
        (original units; the current hyperparameters and standardization).

        In closed form from the factor (Rasmussen & Williams 2006, eq. 5.12): with
        ``P = Delta^{-1}``, the held-out predictive of ``y_i`` has mean
        ``y_i - alpha_i / P_ii`` and variance ``1 / P_ii``; the latent variance removes
        observation ``i``'s noise. One column of ``P``: two triangular solves, O(n^2).
        """
        if not 0 <= index < self.n:
            raise ValueError(f"index must be in [0, {self.n}), got {index}")
        unit = torch.zeros((self.n, 1), dtype=self.dtype, device=self.device)
        unit[index] = 1.0
        column = torch.cholesky_solve(unit, self._factor, upper=False).reshape(-1)
        precision = float(column[index])
        y = float(self.standardized_targets[index])
        mean = y - float(self._alpha[index]) / precision
        # the factor's diagonal holds the noise and any jitter: neither is the latent f's
        noise = self.hyperparameters.noise * float(self._noise_scale[index]) + self._jitter
        variance = max(1.0 / precision - noise, 0.0)
        scale = self._target_scale
        return self._target_mean + scale * mean, scale * scale * variance

    # ------------------------------------------------------------------ kernel
    def covariance(self, inputs1: torch.Tensor, inputs2: torch.Tensor) -> torch.Tensor:
        """Prior covariance ``lambda C(inputs1, inputs2)``: ``(..., n1, n2)``."""
        h = self._hyper
        ls = as_lengthscale_tensor(h.lengthscale_space, inputs1)
        return h.outputscale * self.kernel.correlation(inputs1, inputs2, ls, h.lengthscale_time)

    def prior_variance(self, inputs: torch.Tensor) -> torch.Tensor:
        """Prior variance ``k(z, z)`` of each row of ``(..., n, input_dim)``: ``(..., n)``.

        ``lambda`` for the stationary kernels; it grows with time under a Wiener factor.
        """
        h = self._hyper
        return h.outputscale * self.kernel.diagonal(inputs, h.lengthscale_time)

    def _delta(self) -> torch.Tensor:
        cov = self.covariance(self._inputs, self._inputs)
        return cov + torch.diag(self.noise_variances)

    # ------------------------------------------------------------------ data
    def _as_inputs(self, inputs: torch.Tensor) -> torch.Tensor:
        inputs = torch.as_tensor(inputs, dtype=self.dtype, device=self.device)
        if inputs.ndim == 1:
            inputs = inputs.reshape(1, -1)
        if inputs.ndim != 2 or inputs.shape[1] != self.kernel.input_dim:
            raise ValueError(
                f"inputs must have shape (n, {self.kernel.input_dim}), got {tuple(inputs.shape)}"
            )
        if not torch.isfinite(inputs).all():
            raise ValueError("inputs contain NaN or infinite values")
        return inputs

    def _as_vector(self, values: torch.Tensor | float, n: int, name: str) -> torch.Tensor:
        v = torch.as_tensor(values, dtype=self.dtype, device=self.device).reshape(-1)
        if v.numel() == 1 and n != 1:
            v = v.expand(n).clone()
        if v.shape != (n,):
            raise ValueError(f"{name} must have {n} values, got {v.numel()}")
        if not torch.isfinite(v).all():
            raise ValueError(f"{name} contain NaN or infinite values")
        return v

    def set_data(
        self,
        inputs: torch.Tensor,
        targets: torch.Tensor,
        noise_scale: torch.Tensor | None = None,
        *,
        keep_scale: bool = False,
    ) -> None:
        """Replace the dataset, restandardize and refactorize (O(n^3)).

        Args:
            inputs: ``(n, input_dim)``.
            targets: ``(n,)`` in original units.
            noise_scale: ``(n,)`` positive multipliers of ``sigma^2`` (default ones).
            keep_scale: keep ``target_scale`` (the hyperparameters' units); only the
                mean follows the new targets (see the module docstring).
        """
        inputs = self._as_inputs(inputs) if len(inputs) else self._inputs[:0]
        n = inputs.shape[0]
        targets = self._as_vector(targets, n, "targets")
        scale = self._as_vector(1.0 if noise_scale is None else noise_scale, n, "noise_scale")
        if (scale <= 0).any():
            raise ValueError("noise_scale must be positive")
        self._inputs, self._targets, self._noise_scale = inputs, targets, scale
        self._compute_standardization(keep_scale)
        self.refactorize()

    def set_noise_scale(self, noise_scale: torch.Tensor, *, refactorize: bool = True) -> None:
        """Change the per-observation noise multipliers.

        Multipliers that did not change cost nothing. When the others all grew (the
        uncertainty injection of UI-TVBO and SparQ only ever adds noise) and they are
        fewer than ``n / 3``, the factor is updated by one O(n^2) rank-one update each
        (``Delta + s e_i e_i^T``); otherwise it is refactorized, O(n^3).

        ``refactorize=False`` leaves the cached factor stale: only for a caller that sets
        the hyperparameters next (which refactorizes), such as a hyperparameter fit.
        """
        scale = self._as_vector(noise_scale, self.n, "noise_scale")
        if (scale <= 0).any():
            raise ValueError("noise_scale must be positive")
        growth = (scale - self._noise_scale) * self._hyper.noise
        changed = torch.nonzero(growth != 0).reshape(-1)
        self._noise_scale = scale
        if not refactorize or changed.numel() == 0:
            return
        if bool((growth[changed] > 0).all()) and 3 * changed.numel() < self.n:
            factor = self._factor
            for index in changed.tolist():
                vector = torch.zeros(self.n, dtype=factor.dtype, device=factor.device)
                vector[index] = growth[index].sqrt()
                factor = cholesky_rank_one_update(factor, vector)
            self._factor = factor
            self._update_alpha()
        else:
            self.refactorize()

    def set_hyperparameters(
        self, hyperparameters: Hyperparameters, *, factor: torch.Tensor | None = None
    ) -> None:
        """Change the hyperparameters and refactorize (O(n^3)).

        Args:
            hyperparameters: the new values.
            factor: the lower Cholesky factor ``(n, n)`` of ``Delta`` at these values,
                computed without jitter, where the caller already has it (the
                hyperparameter fit's last evaluation at its optimum): taken instead of a
                new factorization (``O(n^2)``). The caller vouches that it is that matrix's.
        """
        if factor is not None and tuple(factor.shape) != (self.n, self.n):
            raise ValueError(f"factor must be ({self.n}, {self.n}), got {tuple(factor.shape)}")
        self._hyper = hyperparameters.for_kernel(self.kernel)
        if factor is None:
            self.refactorize()
            return
        self._factor, self._jitter = factor, 0.0
        self._update_alpha()

    def restandardize(self, *, keep_scale: bool = False) -> None:
        """Recompute ``target_mean`` / ``target_scale`` from the current targets (O(n^2)).

        Args:
            keep_scale: recompute the mean only (see the module docstring).
        """
        self._compute_standardization(keep_scale)
        self._update_alpha()

    def _compute_standardization(self, keep_scale: bool = False) -> None:
        if not self.standardize:
            self._target_mean, self._target_scale = 0.0, 1.0
            return
        if self.n == 0:
            return  # nothing to estimate from: the units stay those of the hyperparameters
        if not self.center:
            # the prior mean is 0 in original units; one point has a scale too (|y_1|)
            self._target_mean = 0.0
            if not keep_scale:
                rms = float(self._targets.square().mean().sqrt())
                self._target_scale = rms if rms > 0 else 1.0
            return
        self._target_mean = float(self._targets.mean())
        if keep_scale or self.n == 1:
            return
        std = float(self._targets.std())
        # A constant dataset has no scale to learn; keep unit scale rather than divide by 0.
        self._target_scale = std if std > 1e-12 * max(1.0, abs(self._target_mean)) else 1.0

    def refactorize(self) -> None:
        """Fresh Cholesky factorization of ``Delta`` (adds and reports jitter only if needed)."""
        self._factor, self._jitter = robust_cholesky(
            self._delta(), what="GP covariance matrix K + noise"
        )
        self._update_alpha()

    def _update_alpha(self) -> None:
        if self.n == 0:
            self._alpha = self._targets.new_zeros(0)
            return
        y = self.standardized_targets.reshape(-1, 1)
        self._alpha = torch.cholesky_solve(y, self._factor, upper=False).reshape(-1)

    def add(
        self,
        inputs: torch.Tensor,
        targets: torch.Tensor | float,
        noise_scale: torch.Tensor | float | None = None,
    ) -> None:
        """Append observations, updating the factor in O(n^2) per row.

        The standardization constants are kept (see the module docstring). If an update
        pivot is not safely positive (a near-duplicate input with tiny noise), the
        factor is recomputed with jitter and a :class:`CholeskyJitterWarning` is emitted.

        Args:
            inputs: ``(input_dim,)`` or ``(k, input_dim)``.
            targets: ``k`` values in original units.
            noise_scale: ``k`` positive noise multipliers (default 1).
        """
        inputs = self._as_inputs(inputs)
        k = inputs.shape[0]
        targets = self._as_vector(targets, k, "targets")
        scale = self._as_vector(1.0 if noise_scale is None else noise_scale, k, "noise_scale")
        if (scale <= 0).any():
            raise ValueError("noise_scale must be positive")
        was_empty = self.n == 0
        for row in range(k):
            z = inputs[row : row + 1]
            cross = self.covariance(self._inputs, z).reshape(-1)
            diag = (
                float(self.prior_variance(z)[0])
                + self._hyper.noise * float(scale[row])
                + self._jitter
            )
            new_factor = cholesky_append(self._factor, cross, diag)
            self._inputs = torch.cat([self._inputs, z])
            self._targets = torch.cat([self._targets, targets[row : row + 1]])
            self._noise_scale = torch.cat([self._noise_scale, scale[row : row + 1]])
            if new_factor is None:
                warnings.warn(
                    "adding an observation made the GP covariance matrix numerically "
                    "singular; refactorizing with jitter",
                    CholeskyJitterWarning,
                    stacklevel=2,
                )
                self._factor, self._jitter = robust_cholesky(
                    self._delta(), what="GP covariance matrix K + noise", warn=False
                )
            else:
                self._factor = new_factor
        if was_empty:
            self._compute_standardization()
        self._update_alpha()

    def remove(self, index: int) -> None:
        """Remove observation ``index`` (0-based), downdating the factor in O(n^2)."""
        n = self.n
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < n:
            raise IndexError(f"observation index {index!r} out of range for {n} observations")
        self._factor = cholesky_delete(self._factor, index)
        keep = torch.ones(n, dtype=torch.bool, device=self.device)
        keep[index] = False
        self._inputs = self._inputs[keep]
        self._targets = self._targets[keep]
        self._noise_scale = self._noise_scale[keep]
        self._update_alpha()

    def remove_sequence(self, indices: Sequence[int]) -> None:
        """Remove observations one after another, as ``for i in indices: remove(i)`` would.

        Each index is 0-based in the dataset left by the removals before it (the order
        a removal loop produces). A few removals are made exactly that way (the same
        factor, bit for bit); from about one removal per 64 rows of the factor that they
        change (the rows from the first removed one on), or 4 removals off the CPU, the
        changed block is refactorized once instead (:func:`cholesky_delete_rows`: the
        factor of the same matrix to rounding, one matrix product instead of a rank-one
        update per removal). ``alpha`` is recomputed once, at the end.
        """
        n = self.n
        positions = list(range(n))
        removed = []
        for index in indices:
            if isinstance(index, bool) or not isinstance(index, int):
                raise IndexError(f"observation index {index!r} is not an integer")
            if not 0 <= index < len(positions):
                raise IndexError(
                    f"observation index {index} out of range for {len(positions)} observations"
                )
            removed.append(positions.pop(index))
        if not removed:
            return
        changed_rows = n - min(removed)
        factor = None
        if _DELETES_PER_REFACTOR * len(removed) >= changed_rows or (
            self.device.type != "cpu" and len(removed) >= 4
        ):
            factor = cholesky_delete_rows(self._factor, removed)
        if factor is None:  # few removals, or a block that lost definiteness to rounding
            factor = self._factor
            for index in indices:
                factor = cholesky_delete(factor, index)
        self._factor = factor
        keep = torch.tensor(positions, dtype=torch.long, device=self.device)
        self._inputs = self._inputs.index_select(0, keep)
        self._targets = self._targets.index_select(0, keep)
        self._noise_scale = self._noise_scale.index_select(0, keep)
        self._update_alpha()

    # ------------------------------------------------------------------ persistence
    def state_dict(self) -> dict[str, object]:
        """Data, hyperparameters, standardization and the cached factor (exact copies)."""
        return {
            "hyperparameters": self._hyper.as_dict(),
            "inputs": self._inputs.detach().cpu().clone(),
            "targets": self._targets.detach().cpu().clone(),
            "noise_scale": self._noise_scale.detach().cpu().clone(),
            "factor": self._factor.detach().cpu().clone(),
            "alpha": self._alpha.detach().cpu().clone(),
            "target_mean": self._target_mean,
            "target_scale": self._target_scale,
            "jitter": self._jitter,
        }

    def load_state_dict(self, state: dict[str, object]) -> None:
        """Restore :meth:`state_dict` without refactorizing (bit-exact)."""

        def t(name: str) -> torch.Tensor:
            value = state[name]
            assert isinstance(value, torch.Tensor)
            return value.to(dtype=self.dtype, device=self.device).clone()

        self._hyper = Hyperparameters.from_dict(state["hyperparameters"]).for_kernel(self.kernel)  # type: ignore[arg-type]
        self._inputs, self._targets = t("inputs"), t("targets")
        self._noise_scale, self._factor, self._alpha = t("noise_scale"), t("factor"), t("alpha")
        names = ("target_mean", "target_scale", "jitter")
        mean, scale, jitter = (float(state[k]) for k in names)  # type: ignore[arg-type]
        if not (math.isfinite(mean) and math.isfinite(scale) and scale > 0):
            raise ValueError(f"target_mean, target_scale > 0 must be finite: {mean}, {scale}")
        if not (math.isfinite(jitter) and jitter >= 0):
            raise ValueError(f"jitter must be finite and >= 0, got {jitter}")
        self._target_mean, self._target_scale, self._jitter = mean, scale, jitter

    # ------------------------------------------------------------------ inference
    def predict(
        self,
        test_inputs: torch.Tensor,
        *,
        full_covariance: bool = False,
        standardized: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Posterior mean and variance (or covariance) of the latent f.

        Args:
            test_inputs: ``(..., m, input_dim)``; differentiable (autograd flows to it).
            full_covariance: return ``(..., m, m)`` covariances instead of ``(..., m)``
                variances.
            standardized: return moments in standardized units instead of original ones.

        Returns:
            ``(mean, variance)``: ``(..., m)`` and ``(..., m)`` or ``(..., m, m)``.
        """
        z = test_inputs.to(dtype=self.dtype, device=self.device)
        if z.shape[-1] != self.kernel.input_dim:
            raise ValueError(
                f"test inputs must have {self.kernel.input_dim} columns, got {z.shape[-1]}"
            )
        batch, m = z.shape[:-2], z.shape[-2]
        flat = z.reshape(-1, z.shape[-1])
        if self.n == 0:
            mean = flat.new_zeros(flat.shape[0])
            if full_covariance:
                cov = self.covariance(z, z)
            else:
                var = self.prior_variance(flat)
        else:
            cross = self.covariance(flat, self._inputs)  # (M, n)
            mean = cross @ self._alpha
            v = torch.linalg.solve_triangular(self._factor, cross.T, upper=False)  # (n, M)
            if full_covariance:
                vb = v.T.reshape(*batch, m, self.n)
                cov = self.covariance(z, z) - vb @ vb.transpose(-1, -2)
            else:
                var = (self.prior_variance(flat) - (v * v).sum(0)).clamp_min(_MIN_VARIANCE)
        mean = mean.reshape(*batch, m)
        if not standardized:
            mean = mean * self._target_scale + self._target_mean
        if full_covariance:
            out = cov if standardized else cov * self._target_scale**2
            return mean, out
        var = var.reshape(*batch, m)
        return mean, (var if standardized else var * self._target_scale**2)

    def posterior_with_gradient(
        self, test_inputs: torch.Tensor, *, time: float | None = None
    ) -> PosteriorGradient | None:
        """Posterior moments at ``(m, input_dim)`` points and their gradients in closed form.

        The acquisition's inner loop: ``d mu / dx = sum_j alpha_j dk_j / dx`` and
        ``d sigma^2 / dx = -2 sum_j (Delta^{-1} k)_j dk_j / dx`` through
        :meth:`KernelSpec.covariance_with_gradient`, with the same triangular solves as
        :meth:`predict` and no autograd graph: about twice as fast per call up to
        ``n = 200`` (``benchmarks/acquisition_gradient.py``). Time columns are held fixed.

        Args:
            test_inputs: ``(m, input_dim)`` points.
            time: the time of every row of ``test_inputs`` where the caller knows they
                share one (an acquisition at a given time): the temporal factor against
                the data is then computed once per time, data and hyperparameters, and
                reused (:meth:`temporal_row`). It must equal the rows' time column.

        Returns:
            a :class:`PosteriorGradient` in standardized units, or ``None`` where the
            kernel has no closed-form gradient (then use :meth:`predict` with autograd)
            or the GP holds no data.
        """
        if self.n == 0 or test_inputs.ndim != 2:
            return None
        z = test_inputs.to(dtype=self.dtype, device=self.device)
        h = self._hyper
        row = None if time is None or self.kernel.temporal is None else self.temporal_row(time)
        cross = self.kernel.covariance_with_gradient(
            z,
            self._inputs,
            self._lengthscale_space(),
            h.lengthscale_time,
            h.outputscale,
            temporal_row=row,
        )
        if cross is None:
            return None
        mean = cross.value @ self._alpha
        v = torch.linalg.solve_triangular(self._factor, cross.value.T, upper=False)  # (n, m)
        # the prior variance is the outputscale itself for the stationary kernels
        prior = h.outputscale if self.kernel.stationary else self.prior_variance(z)
        variance = (v * v).sum(0).neg_().add_(prior)
        representer = torch.linalg.solve_triangular(self._factor.T, v, upper=True)  # (n, m)
        # zero where the floor holds, as autograd's gradient through the clamp
        weights = representer.T.masked_fill((variance < _MIN_VARIANCE)[:, None], 0.0)
        return PosteriorGradient(
            mean=mean,
            variance=variance.clamp_min_(_MIN_VARIANCE),
            cross=cross,
            mean_weights=self._alpha,
            variance_weights=weights.mul_(-2.0),
            representer=representer,
        )

    def temporal_row(self, time: float) -> torch.Tensor:
        """``(n,)`` temporal factor ``k_T(time, t_j)`` of the data (no outputscale).

        ``time`` in the time unit of the inputs. Cached until the time, the data or the
        hyperparameters change: the same numbers as the factor of
        :meth:`KernelSpec.covariance_with_gradient` at that time.
        """
        if self.kernel.temporal is None:
            raise ValueError("this GP does not model time")
        time = float(time)
        cached = self._temporal_row_cache
        if (
            cached is None
            or cached[0] != time
            or cached[1] is not self._hyper
            or cached[2] is not self._inputs
        ):
            times = self._inputs[:, self.kernel.dim]
            at = times.new_full((1,), time)
            row = self.kernel.temporal_correlation(at, times, self._hyper.lengthscale_time)[0]
            self._temporal_row_cache = cached = (time, self._hyper, self._inputs, row)
        return cached[3]

    def _lengthscale_space(self) -> torch.Tensor:
        """``l_S`` as a tensor, cached until the hyperparameters change."""
        cached = self._lengthscale_cache
        if cached is None or cached[0] is not self._hyper:
            tensor = as_lengthscale_tensor(self._hyper.lengthscale_space, self._inputs)
            self._lengthscale_cache = cached = (self._hyper, tensor)
        return cached[1]

    def information_gain(self) -> float:
        """``(1/2) log det(I + N^{-1/2} K N^{-1/2})`` of the data held (nats).

        ``K`` is the prior covariance of the inputs and ``N = diag(noise variances)``;
        from the cached factor of ``K + N`` in O(n). The information the observations
        carry about ``f`` (Srinivas et al. 2010), used by confidence radii.
        """
        if self.n == 0:
            return 0.0
        log_det = 2.0 * float(torch.log(self._factor.diagonal()).sum())
        return 0.5 * (log_det - float(torch.log(self.noise_variances).sum()))

    def log_marginal_likelihood(self) -> float:
        """``log p(y_std | Z, theta)`` of the standardized targets under the cached factor."""
        if self.n == 0:
            return 0.0
        y = self.standardized_targets
        return float(
            -0.5 * y.dot(self._alpha)
            - torch.log(self._factor.diagonal()).sum()
            - 0.5 * self.n * math.log(2 * math.pi)
        )
