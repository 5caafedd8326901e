"""Maximum exact marginal likelihood for ``(lambda, l_S, l_T, sigma^2)``.

The free hyperparameters are optimized in log space, inside box bounds, with
L-BFGS-B (SciPy), warm-started from the GP's current values and capped in
iterations: a TVBO policy refits at every iteration, and successive optima are
close. Gradients come from torch autograd through the Cholesky factorization
(checked against finite differences in the tests). The distance matrices are
computed once per fit; each evaluation only rescales them.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import scipy.optimize
import torch

from dynbo import deadline
from dynbo.kernels import correlation_and_scale_derivative
from dynbo.models.gp import SpatioTemporalGP
from dynbo.models.kernel import HyperparameterBounds, Hyperparameters
from dynbo.models.linalg import CholeskyJitterWarning, NumericalError, robust_cholesky

__all__ = [
    "FitResult",
    "NegativeLogMarginalLikelihood",
    "epsilon_gradient",
    "fit_hyperparameters",
]

_NAMES = ("outputscale", "lengthscale_space", "lengthscale_time", "noise")

#: objective reported where the covariance cannot be factorized: far above any real
#: value (targets up to 1e150 give values up to ~1e300 / noise), so the line search
#: backs off, yet finite, which L-BFGS-B needs
_FAILED_EVALUATION = 1e305


@dataclass(frozen=True)
class FitResult:
    """Outcome of one hyperparameter fit.

    Attributes:
        hyperparameters: the values now set on the GP.
        negative_log_likelihood: ``-log p(y_std)`` at those values.
        iterations: L-BFGS-B iterations used.
        evaluations: likelihood evaluations used.
        jitter: largest diagonal jitter any evaluation needed (0 if none).
        message: the optimizer's termination message.
    """

    hyperparameters: Hyperparameters
    negative_log_likelihood: float
    iterations: int
    evaluations: int
    jitter: float
    message: str


class NegativeLogMarginalLikelihood:
    """``theta -> (-log p(y_std | theta) - log p(theta), gradient)`` (free log-hyperparameters).

    ``theta`` stacks, in this order and skipping the fixed ones: ``log lambda``,
    ``log l_S`` (one or ``d`` values), ``log l_T`` (if the kernel models time),
    ``log sigma^2``.

    Args:
        gp: the GP whose data (inputs, standardized targets, noise scales) is used.
        fixed: names of hyperparameters held at ``gp.hyperparameters``.
        priors: optional priors, ``name -> (mean, standard deviation)`` of ``log value``
            (log-normal) or ``name -> ("gamma", concentration, rate)`` (Gamma); the
            objective is then the negative log posterior (MAP) with the prior density
            taken on the value itself, as GPyTorch's ``LogNormalPrior`` and
            ``GammaPrior`` (log-normal mode ``exp(mean - sd^2)``). Without priors it is
            the exact negative log marginal likelihood.
    """

    def __init__(
        self,
        gp: SpatioTemporalGP,
        fixed: Sequence[str] = (),
        priors: Mapping[str, tuple] | None = None,
    ) -> None:
        self.gp = gp
        self.priors = dict(priors or {})
        for name, prior in self.priors.items():
            if name not in _NAMES:
                raise ValueError(f"unknown hyperparameter {name!r} in priors")
            if len(prior) == 3 and prior[0] == "gamma":
                for what, v in (("concentration", prior[1]), ("rate", prior[2])):
                    if not (math.isfinite(v) and v > 0):
                        raise ValueError(
                            f"gamma prior {what} of {name} must be positive, got {v!r}"
                        )
            elif len(prior) != 2 or not (math.isfinite(prior[1]) and prior[1] > 0):
                raise ValueError(f"prior scale of {name} must be positive, got {prior!r}")
        self.kernel = gp.kernel
        self.fixed = frozenset(fixed)
        self.base = gp.hyperparameters
        z = gp.inputs
        d = self.kernel.dim
        # A given arm covariance is a fixed k_S: computed once, no lengthscale to fit.
        self._arm_corr = (
            self.kernel.arms.covariance(z[:, :d], z[:, :d])
            if self.kernel.arms is not None
            else None
        )
        diff = z[:, None, :d] - z[None, :, :d]
        # ARD needs per-dimension squared differences; isotropic only their sum.
        self._sq = diff * diff if self.kernel.ard else (diff * diff).sum(-1)
        self._dt = (
            self.kernel.temporal_argument(z[:, d], z[:, d]) if self.kernel.uses_time else None
        )
        self._y = gp.standardized_targets
        self._noise_scale = gp.noise_scale
        self.max_jitter = 0.0
        self.evaluations = 0
        self._memo: dict[bytes, tuple[float, np.ndarray]] = {}

    # -------------------------------------------------------------- packing
    def _slots(self) -> list[tuple[str, int]]:
        slots = []
        for name in _NAMES:
            if name in self.fixed:
                continue
            if name == "lengthscale_space" and self.kernel.arms is not None:
                continue
            if name == "lengthscale_space":
                slots.append((name, self.kernel.num_spatial_lengthscales))
            elif name == "lengthscale_time":
                if self.kernel.uses_time:
                    slots.append((name, 1))
            else:
                slots.append((name, 1))
        return slots

    @property
    def size(self) -> int:
        """Number of free parameters."""
        return sum(k for _, k in self._slots())

    def pack(self, h: Hyperparameters) -> np.ndarray:
        """Free log-parameters of ``h``."""
        h = h.for_kernel(self.kernel)
        out: list[float] = []
        for name, _ in self._slots():
            if name == "lengthscale_space":
                out.extend(math.log(v) for v in h.lengthscale_space)
            else:
                out.append(math.log(getattr(h, name)))
        return np.asarray(out, dtype=float)

    def unpack(self, theta: np.ndarray) -> Hyperparameters:
        """Hyperparameters with the free entries taken from ``theta`` (others from the GP)."""
        theta = np.asarray(theta, dtype=float)
        values: dict[str, object] = {}
        i = 0
        for name, k in self._slots():
            chunk = np.exp(theta[i : i + k])
            values[name] = tuple(chunk.tolist()) if name == "lengthscale_space" else float(chunk[0])
            i += k
        b = self.base
        return Hyperparameters(
            outputscale=values.get("outputscale", b.outputscale),  # type: ignore[arg-type]
            lengthscale_space=values.get("lengthscale_space", b.lengthscale_space),  # type: ignore[arg-type]
            lengthscale_time=values.get("lengthscale_time", b.lengthscale_time),  # type: ignore[arg-type]
            noise=values.get("noise", b.noise),  # type: ignore[arg-type]
        ).for_kernel(self.kernel)

    def bounds(self, bounds: HyperparameterBounds) -> list[tuple[float, float]]:
        """Log-space bounds matching :meth:`pack`."""
        out = []
        for name, k in self._slots():
            low, high = getattr(bounds, name)
            out.extend([(math.log(low), math.log(high))] * k)
        return out

    # -------------------------------------------------------------- objective
    def __call__(self, theta: np.ndarray) -> tuple[float, np.ndarray]:
        """Value and gradient at ``theta`` (NumPy in, NumPy out), for SciPy.

        The gradient is ``(1/2) sum_ij (Delta^{-1} - alpha alpha^T)_ij dDelta_ij/dtheta``
        (Rasmussen & Williams eq. 5.9), with ``dDelta/dlog l`` from
        :func:`dynbo.kernels.correlation_and_scale_derivative`: one Cholesky, one
        inverse and a few elementwise passes, no autograd graph.
        """
        theta = np.asarray(theta, dtype=float)
        key = theta.tobytes()
        # L-BFGS-B evaluates each start first; the fit compares against it afterwards,
        # so remembered values spare an O(n^3) evaluation per start
        if key in self._memo:
            value, gradient = self._memo[key]
            return value, gradient.copy()
        deadline.check(deadline.FIT)
        self.evaluations += 1
        try:
            value, gradient = self._evaluate(theta)
        except NumericalError:
            # An indefinite matrix at a trial point: report a huge value so the line
            # search backs off, never a made-up likelihood.
            value, gradient = _FAILED_EVALUATION, np.zeros_like(theta)
        self._memo[key] = (value, gradient.copy())
        return value, gradient

    def _evaluate(self, theta: np.ndarray) -> tuple[float, np.ndarray]:
        h = self.unpack(theta)
        y = self._y
        dtype, device = y.dtype, y.device
        n = y.shape[0]
        ls = torch.tensor(h.lengthscale_space, dtype=dtype, device=device)
        if self._arm_corr is not None:
            corr_s, dcorr_s = self._arm_corr, None
        elif self.kernel.ard:
            scaled = self._sq / (ls * ls)
            r = scaled.sum(-1).clamp_min_(1e-30).sqrt_()
            corr_s, dcorr_s = correlation_and_scale_derivative(self.kernel.spatial, r)
        else:
            r = (self._sq / (ls[0] * ls[0])).clamp_min_(1e-30).sqrt_()
            corr_s, dcorr_s = correlation_and_scale_derivative(self.kernel.spatial, r)
        if self._dt is not None:
            assert self.kernel.temporal is not None and h.lengthscale_time is not None
            corr_t, dcorr_t = self.kernel.temporal_factor_and_scale_derivative(
                self._dt / h.lengthscale_time
            )
            signal = corr_s * corr_t
        else:
            corr_t = dcorr_t = None
            signal = corr_s.clone()
        signal.mul_(h.outputscale)
        noise = h.noise * self._noise_scale
        delta = signal.clone()
        delta.diagonal().add_(noise)
        factor, info = torch.linalg.cholesky_ex(delta)
        if int(info) != 0:
            factor, jitter = robust_cholesky(delta, warn=False)
            self.max_jitter = max(self.max_jitter, jitter)
        del delta
        alpha = torch.cholesky_solve(y.reshape(-1, 1), factor).reshape(-1)
        value = 0.5 * float(y.dot(alpha)) + float(torch.log(factor.diagonal()).sum())
        value += 0.5 * n * math.log(2 * math.pi)
        # W = Delta^{-1} - alpha alpha^T; every derivative is (1/2) <W, dDelta>, taken as a
        # dot product of flattened matrices (no product matrix is formed).
        w = torch.cholesky_inverse(factor)
        del factor
        w.addr_(alpha, alpha, alpha=-1.0)

        def inner(a: torch.Tensor, b: torch.Tensor) -> float:
            return float(torch.dot(a.reshape(-1), b.reshape(-1)))

        lam = h.outputscale
        grads: list[float] = []
        for name, _ in self._slots():
            if name == "outputscale":
                grads.append(0.5 * inner(w, signal))
            elif name == "noise":
                grads.append(0.5 * float((w.diagonal() * noise).sum()))
            elif name == "lengthscale_time":
                assert dcorr_t is not None
                grads.append(0.5 * lam * inner(w * corr_s, dcorr_t))
            elif dcorr_s is None:
                raise AssertionError("a given arm covariance has no spatial lengthscale")
            elif self.kernel.ard:
                # d r / d log l_j = -(diff_j / l_j)^2 / r, and -r k'(r) is what we have
                chain = w * dcorr_s if corr_t is None else (w * corr_t).mul_(dcorr_s)
                chain.div_(r).div_(r)
                grads.extend((0.5 * lam * torch.einsum("ij,ijk->k", chain, scaled)).tolist())
            else:
                weights = w if corr_t is None else w * corr_t
                grads.append(0.5 * lam * inner(weights, dcorr_s))
        gradient = np.asarray(grads, dtype=float)
        if self.priors:
            i = 0
            for name, k in self._slots():
                if name in self.priors:
                    term, term_gradient = _negative_log_prior(self.priors[name], theta[i : i + k])
                    value += term
                    gradient[i : i + k] += term_gradient
                i += k
        return value, gradient


def _negative_log_prior(prior: tuple, log_values: np.ndarray) -> tuple[float, np.ndarray]:
    """``-log p(v)`` at ``v = exp(log_values)`` (up to a constant) and its gradient in ``log v``.

    The density is that of ``v`` itself, as GPyTorch's priors add it to the objective:
    ``(mean, sd)`` is a log-normal (mode ``exp(mean - sd^2)``, median ``exp(mean)``),
    ``("gamma", a, b)`` a Gamma density of concentration ``a`` and rate ``b`` (mode
    ``(a - 1) / b``).
    """
    if len(prior) == 3:
        _, concentration, rate = prior
        v = np.exp(log_values)
        value = float(np.sum(rate * v - (concentration - 1.0) * log_values))
        return value, rate * v - (concentration - 1.0)
    mean, scale = prior
    z = (log_values - mean) / scale
    return float(0.5 * np.sum(z * z) + np.sum(log_values)), z / scale + 1.0


def fit_hyperparameters(
    gp: SpatioTemporalGP,
    *,
    bounds: HyperparameterBounds | None = None,
    max_iterations: int = 50,
    initial: Sequence[Hyperparameters] = (),
    priors: Mapping[str, tuple] | None = None,
) -> FitResult:
    """Fit the GP's hyperparameters by maximum exact marginal likelihood, in place.

    The targets are restandardized first. The search starts from the GP's current
    hyperparameters (the warm start) and from every element of ``initial``; the best
    local optimum is kept and set on the GP.

    Args:
        gp: the GP (needs at least one observation).
        bounds: box bounds and fixed names (defaults: :class:`HyperparameterBounds`).
        max_iterations: cap on L-BFGS-B iterations per start.
        initial: additional starting points.
        priors: Gaussian priors on log-hyperparameters (see
            :class:`NegativeLogMarginalLikelihood`); ``None`` fits by maximum likelihood.

    Returns:
        A :class:`FitResult`. A :class:`~dynbo.models.linalg.CholeskyJitterWarning`
        is emitted if any evaluation needed jitter.
    """
    if bounds is None:
        bounds = HyperparameterBounds()
    if not isinstance(max_iterations, int) or max_iterations < 1:
        raise ValueError(f"max_iterations must be a positive integer, got {max_iterations!r}")
    if gp.n == 0:
        raise ValueError("cannot fit hyperparameters without observations")
    gp.restandardize()
    objective = NegativeLogMarginalLikelihood(gp, bounds.fixed, priors)
    starts = [bounds.clip(gp.hyperparameters.for_kernel(gp.kernel))]
    starts += [bounds.clip(h.for_kernel(gp.kernel)) for h in initial]
    best: tuple[float, np.ndarray, int, str] | None = None
    if objective.size == 0:
        value, _ = objective(np.zeros(0))
        best = (value, np.zeros(0), 0, "all hyperparameters fixed")
    else:
        log_bounds = objective.bounds(bounds)
        for start in starts:
            theta0 = objective.pack(start)
            result = scipy.optimize.minimize(
                objective,
                theta0,
                jac=True,
                method="L-BFGS-B",
                bounds=log_bounds,
                options={"maxiter": max_iterations},
            )
            candidates = [(float(result.fun), np.asarray(result.x))]
            # Keep the start if the optimizer ended somewhere worse (it can, when it
            # stops on an evaluation failure).
            candidates.append((objective(theta0)[0], theta0))
            value, theta = min(candidates, key=lambda c: c[0])
            if best is None or value < best[0]:
                best = (value, theta, int(result.nit), str(result.message))
    assert best is not None
    value, theta, nit, message = best
    if not math.isfinite(value) or value >= _FAILED_EVALUATION:
        raise NumericalError(
            "marginal likelihood could not be evaluated at any starting point; "
            "the data or bounds are degenerate"
        )
    hyper = objective.unpack(theta)
    if objective.max_jitter > 0:
        warnings.warn(
            f"hyperparameter fit: the covariance matrix needed jitter up to "
            f"{objective.max_jitter:.3g} at some trial points",
            CholeskyJitterWarning,
            stacklevel=2,
        )
    gp.set_hyperparameters(hyper)
    return FitResult(
        hyperparameters=hyper,
        negative_log_likelihood=value,
        iterations=nit,
        evaluations=objective.evaluations,
        jitter=objective.max_jitter,
        message=message,
    )


def epsilon_gradient(gp: SpatioTemporalGP) -> float:
    """``d log p(y_std) / d eps`` of a GP whose temporal factor is ``(1 - eps)^{|i-j|/2}``.

    The GP's temporal kernel must be Matern-1/2 with ``l_T = -2 / ln(1 - eps)`` (time in
    steps; :func:`~dynbo.models.kernel.markov_lengthscale`): Bogunovic, Scarlett & Cevher
    (2016), App. B's ``(1/2) tr((alpha alpha^T - Delta^{-1}) (K o D'))``, obtained as the
    fit's own ``d/d log l_T`` times ``d log l_T / d eps = 1 / ((1 - eps) ln(1 - eps))``, so
    learning ``eps`` by marginal likelihood is the fit of ``l_T``.
    """
    if gp.kernel.temporal != "matern12" or gp.hyperparameters.lengthscale_time is None:
        raise ValueError("epsilon_gradient needs a GP with a Matern-1/2 temporal kernel")
    objective = NegativeLogMarginalLikelihood(
        gp, fixed=("outputscale", "lengthscale_space", "noise")
    )
    _, gradient = objective(objective.pack(gp.hyperparameters))
    epsilon = -math.expm1(-2.0 / gp.hyperparameters.lengthscale_time)
    return -float(gradient[0]) / ((1.0 - epsilon) * math.log1p(-epsilon))
