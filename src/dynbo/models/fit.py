"""Maximum exact marginal likelihood for ``(lambda, l_S, l_T, sigma^2)``.

The free hyperparameters are optimized in log space, inside box bounds, warm-started from
the GP's current values and capped in iterations: a TVBO policy refits at every
iteration, and successive optima are close. Two local searches: SciPy's L-BFGS-B with
the analytic gradient, or a projected Newton method with the analytic Hessian, which from
a nearby start converges in a few evaluations (see :func:`fit_hyperparameters`). Value,
gradient and Hessian come in closed form from one Cholesky factorization, without
autograd (checked against finite differences in the tests). The distance matrices are
computed once per fit; each evaluation only rescales them.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import scipy.linalg
import scipy.optimize
import torch

from dynbo import deadline
from dynbo.kernels import correlation_and_scale_derivative, correlation_and_scale_derivatives
from dynbo.models.gp import SpatioTemporalGP
from dynbo.models.kernel import HyperparameterBounds, Hyperparameters, _squared_distance
from dynbo.models.linalg import (
    CholeskyJitterWarning,
    NumericalError,
    cholesky_inverse,
    robust_cholesky,
)

__all__ = [
    "FIT_METHODS",
    "FitResult",
    "NegativeLogMarginalLikelihood",
    "StartOutcome",
    "epsilon_gradient",
    "fit_hyperparameters",
]

_NAMES = ("outputscale", "lengthscale_space", "lengthscale_time", "noise")

#: objective reported where the covariance cannot be factorized: far above any real
#: value (targets up to 1e150 give values up to ~1e300 / noise), so the line search
#: backs off, yet finite, which L-BFGS-B needs
_FAILED_EVALUATION = 1e305

#: local searches of :func:`fit_hyperparameters`: SciPy's L-BFGS-B (gradient only) or a
#: projected Newton method with the analytic Hessian
FIT_METHODS = ("l-bfgs-b", "newton")

#: Newton stops once the decrease its model predicts, half the Newton decrement, is below
#: this fraction of ``max(1, |value|)``: about L-BFGS-B's own relative tolerance (1e7
#: machine epsilons) divided by 20, so that a converged Newton fit is never the less
#: precise of the two; in float32, 10 machine epsilons (what its evaluations resolve)
_NEWTON_TOLERANCE = 1e-10
#: the largest Newton step, in log units of any one hyperparameter (a factor e^2): the
#: quadratic model is trusted that far, so a flat direction cannot throw a lengthscale
#: across its whole box in one step
_NEWTON_LONGEST_STEP = 2.0
#: a matrix of the evaluations: a torch tensor, or a NumPy array (see _evaluate_numpy)
_Matrix = torch.Tensor | np.ndarray
#: LAPACK's Cholesky factorization and solve of float64 matrices, called directly
#: (scipy.linalg's wrappers check their input, which costs more than the factorization of
#: a small matrix)
_POTRF, _POTRS = scipy.linalg.lapack.get_lapack_funcs(("potrf", "potrs"), dtype=np.float64)
#: evaluations of at most this many observations run in NumPy on a CPU (see
#: ``NegativeLogMarginalLikelihood._evaluate_numpy``), those with the Hessian up to
#: :data:`_NUMPY_HESSIAN_LARGEST`: there a NumPy operation costs a fraction of a
#: torch one's fixed overhead, and OpenBLAS (NumPy's and SciPy's) runs each call on one
#: thread. On larger matrices it runs the factorization, the solves and (the Hessian's)
#: products on several threads if it may, and on a loaded 2-CPU machine waking them cost
#: about 8 ms per call: with 2 threads, value and gradient took 8.0-15.9 ms from n = 114
#: on against 0.58 ms at 98, with the Hessian 9.9-16 ms at n = 82-98 against 0.77 ms at 66
#: (``benchmarks/fit_evaluation_cost.py --threads 2``). torch's elementwise passes are as
#: fast there, and its thread pool is the one a run pins. (Below these sizes every
#: OpenBLAS call here runs on one thread, so the results do not depend on the thread
#: count, which is tested; a dot product of more than 10^4 entries, n >= 101, would be
#: split between threads. The restart rule's ``every_fit_size`` is the same 96: the
#: fresh start's L-BFGS-B search is cheap where its evaluations run in NumPy.)
_NUMPY_LARGEST = 96
_NUMPY_HESSIAN_LARGEST = 64
#: sufficient decrease of the projected backtracking line search (Armijo)
_ARMIJO = 1e-4
_BACKTRACKS = 30
#: a full Newton step (not shortened) from a point without clearly negative curvature
#: whose predicted decrease (half the decrement) is below this fraction of
#: ``max(1, |value|)`` is expected to be the last one (Newton's quadratic convergence:
#: the next decrement is about the square of this one), so its trial points are
#: evaluated without the Hessian, and convergence at the accepted one, if the full step
#: was accepted, is checked with the Hessian of the point the step came from; otherwise,
#: or if that check fails, the Hessian is computed at the new point (one
#: value-and-gradient evaluation wasted)
_LAST_STEP = 1e-4


@dataclass(frozen=True)
class FitResult:
    """Outcome of one hyperparameter fit.

    Attributes:
        hyperparameters: the values now set on the GP.
        negative_log_likelihood: ``-log p(y_std)`` at those values.
        iterations: iterations of the local search that found them.
        evaluations: likelihood evaluations used, over every start.
        jitter: largest diagonal jitter any evaluation needed (0 if none).
        message: the optimizer's termination message.
        starts: local searches run (the warm start, ``initial`` and the ``restarts`` that
            ran).
        restart_reason: why the ``restarts`` ran (``None``: they did not run, or there were
            none; ``"always"``: no ``restart_if`` was given).
        optima: ``(objective, hyperparameters)`` where each local search ended, in the
            order run (the warm start's first).
        hessian_evaluations: how many of the ``evaluations`` also computed the Hessian.
    """

    hyperparameters: Hyperparameters
    negative_log_likelihood: float
    iterations: int
    evaluations: int
    jitter: float
    message: str
    starts: int = 1
    restart_reason: str | None = None
    optima: tuple[tuple[float, Hyperparameters], ...] = ()
    hessian_evaluations: int = 0


@dataclass(frozen=True)
class StartOutcome:
    """Where one local search of a fit ended, for a rule that decides on more starts.

    Attributes:
        start: the hyperparameters it started from (clipped into the bounds).
        hyperparameters: where it ended.
        negative_log_likelihood: the objective there (MAP: with the priors' terms).
        gain: how much the search lowered the objective from its start (nats, ``>= 0``).
        size: the number of observations fitted.
        iterations: its iterations.
        converged: whether it stopped on its convergence test (not on its iteration cap,
            a failed line search or a start that could not be evaluated).
        message: why it stopped.
        reached_bounds: the free hyperparameters (``"noise"``, ``"lengthscale_space"``,
            ...) that ended on a bound they did not start on.
        largest_log_change: the largest change of a free log-hyperparameter.
    """

    start: Hyperparameters
    hyperparameters: Hyperparameters
    negative_log_likelihood: float
    gain: float
    size: int
    iterations: int
    converged: bool
    message: str
    reached_bounds: tuple[str, ...]
    largest_log_change: float


@dataclass(frozen=True)
class _LocalResult:
    """One local search: the best point and how the search ended."""

    value: float
    theta: np.ndarray
    iterations: int
    converged: bool
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
                # each a number, or one per value of the hyperparameter (ARD lengthscales)
                parameters = []
                for what, v in (("concentration", prior[1]), ("rate", prior[2])):
                    values = np.asarray(v, dtype=float)
                    width = gp.kernel.num_spatial_lengthscales
                    if values.ndim > 0 and (
                        name != "lengthscale_space" or values.shape != (width,)
                    ):
                        raise ValueError(
                            f"gamma prior {what} of {name} must be a number or one per "
                            f"spatial lengthscale ({width}), got {v!r}"
                        )
                    if not (np.all(np.isfinite(values)) and np.all(values > 0)):
                        raise ValueError(
                            f"gamma prior {what} of {name} must be positive, got {v!r}"
                        )
                    parameters.append(values)
                self.priors[name] = ("gamma", *parameters)
            elif len(prior) != 2 or not (math.isfinite(prior[1]) and prior[1] > 0):
                raise ValueError(f"prior scale of {name} must be positive, got {prior!r}")
        self.kernel = gp.kernel
        self.fixed = frozenset(fixed)
        self.base = gp.hyperparameters
        # the distances below are the fit's fixed O(n^2 d) work: a budget skips them when
        # they and the first evaluation would not fit
        deadline.check(deadline.LIKELIHOOD_SETUP, after=(deadline.FIT,))
        z = gp.inputs
        d = self.kernel.dim
        # A given arm covariance is a fixed k_S: computed once, no lengthscale to fit.
        self._arm_corr = (
            self.kernel.arms.covariance(z[:, :d], z[:, :d])
            if self.kernel.arms is not None
            else None
        )
        # ARD needs per-dimension squared differences; isotropic only their sum.
        if self.kernel.ard:
            diff = z[:, None, :d] - z[None, :, :d]
            self._sq = diff * diff
        else:
            self._sq = _squared_distance(z[:, :d], z[:, :d])
        self._dt = (
            self.kernel.temporal_argument(z[:, d], z[:, d]) if self.kernel.uses_time else None
        )
        deadline.end()
        self._y = gp.standardized_targets
        self._noise_scale = gp.noise_scale
        self.max_jitter = 0.0
        self.evaluations = 0
        self.hessian_evaluations = 0
        # theta's bytes -> (value, gradient, Hessian or None)
        self._memo: dict[bytes, tuple[float, np.ndarray, np.ndarray | None]] = {}
        self._last_factor: tuple[bytes, torch.Tensor] | None = None
        # the fixed values and each free name's position in theta (see _values)
        self._layout: tuple[dict, dict] | None = None
        # evaluations in NumPy, with the Hessian or without (CPU, float64, small; see
        # _evaluate_numpy and _NUMPY_LARGEST)
        in_numpy = self._y.device.type == "cpu" and self._y.dtype == torch.float64
        self._numpy = in_numpy and self._y.shape[0] <= _NUMPY_LARGEST
        self._numpy_hessian = in_numpy and self._y.shape[0] <= _NUMPY_HESSIAN_LARGEST
        self._arrays: dict[str, np.ndarray | None] | None = None

    # -------------------------------------------------------------- packing
    def _slots(self) -> list[tuple[str, int]]:
        """``(name, count)`` of the free hyperparameters, in :meth:`pack`'s order (fixed at
        construction; computed once: every evaluation walks it)."""
        cached = self.__dict__.get("_slot_list")
        if cached is not None:
            return cached
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
        self._slot_list = slots
        return slots

    @property
    def dtype(self) -> torch.dtype:
        """The dtype the evaluations compute in (the GP's)."""
        return self._y.dtype

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

    def _values(self, theta: np.ndarray) -> _Values:
        """The numbers :meth:`unpack` puts in its :class:`Hyperparameters`, without building
        (and validating) one: that costs as much as the arithmetic of a small evaluation."""
        if self._layout is None:
            base = self.base.for_kernel(self.kernel)
            fixed = {
                "outputscale": base.outputscale,
                "lengthscale_space": base.lengthscale_space,
                "lengthscale_time": base.lengthscale_time,
                "noise": base.noise,
            }
            slots, i = {}, 0
            for name, k in self._slots():
                slots[name] = (i, k)
                i += k
            self._layout = (fixed, slots)
        fixed, slots = self._layout
        values = np.exp(np.asarray(theta, dtype=float)).tolist()
        out = {}
        for name, default in fixed.items():
            if name not in slots:
                out[name] = default
                continue
            i, k = slots[name]
            out[name] = tuple(values[i : i + k]) if name == "lengthscale_space" else values[i]
        return _Values(**out)

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
        value, gradient, _ = self._remembered(theta, with_hessian=False)
        return value, gradient

    def with_hessian(self, theta: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        """Value, gradient ``(p,)`` and Hessian ``(p, p)`` at ``theta`` (``p`` = :attr:`size`).

        ``H_ab = (1/2) <W, dDelta_ab> - (1/2) tr(Delta^{-1} dDelta_a Delta^{-1} dDelta_b)
        + (dDelta_a alpha)^T Delta^{-1} (dDelta_b alpha)`` with ``W = Delta^{-1} - alpha
        alpha^T``, plus the priors' (diagonal) curvature. On top of a gradient evaluation it
        costs one ``(n, n)`` product per lengthscale (``Delta^{-1} dDelta_a``; the scale's and
        the noise's follow from ``Delta^{-1}`` itself) and ``O(p^2 n^2)`` elementwise work.
        Where the covariance cannot be factorized the value is huge, the gradient and
        Hessian zero. One likelihood evaluation (and one deadline check) unless remembered.
        """
        value, gradient, hessian = self._remembered(theta, with_hessian=True)
        assert hessian is not None
        return value, gradient, hessian

    def factor_at(self, theta: np.ndarray) -> torch.Tensor | None:
        """The lower Cholesky factor ``(n, n)`` of ``Delta`` at ``theta`` if the last
        evaluation computed it there in torch without jitter, else ``None``."""
        key = np.asarray(theta, dtype=float).tobytes()
        if self._last_factor is None or self._last_factor[0] != key:
            return None
        return self._last_factor[1]

    def _remembered(
        self, theta: np.ndarray, *, with_hessian: bool
    ) -> tuple[float, np.ndarray, np.ndarray | None]:
        """A remembered evaluation at ``theta`` (copies) if it has what is asked, else a new
        one (counted, after a deadline check)."""
        theta = np.asarray(theta, dtype=float)
        key = theta.tobytes()
        # L-BFGS-B evaluates each start first; the fit compares against it afterwards,
        # so remembered values spare an O(n^3) evaluation per start
        known = self._memo.get(key)
        if known is not None and (known[2] is not None or not with_hessian):
            value, gradient, hessian = known
            return value, gradient.copy(), None if hessian is None else hessian.copy()
        deadline.check(deadline.FIT)
        self.evaluations += 1
        self.hessian_evaluations += int(with_hessian)
        try:
            if with_hessian:
                value, gradient, hessian = self._evaluate(theta, with_hessian=True)
            else:
                value, gradient = self._evaluate(theta)[:2]
                hessian = None
        except NumericalError:
            # An indefinite matrix at a trial point: report a huge value so the line
            # search backs off, never a made-up likelihood.
            value, gradient = _FAILED_EVALUATION, np.zeros_like(theta)
            hessian = np.zeros((theta.size, theta.size)) if with_hessian else None
        deadline.end()
        self._memo[key] = (
            value,
            gradient.copy(),
            None if hessian is None else hessian.copy(),
        )
        return value, gradient, hessian

    def _evaluate(
        self, theta: np.ndarray, with_hessian: bool = False
    ) -> tuple[float, np.ndarray, np.ndarray | None]:
        """Value, gradient and (if asked) Hessian at ``theta``: every evaluation passes
        here. Those of a small dataset on a CPU (:data:`_NUMPY_LARGEST`) are computed in NumPy
        (:meth:`_evaluate_numpy`), the others in torch (:meth:`_evaluate_torch`)."""
        if self._numpy_hessian if with_hessian else self._numpy:
            evaluated = self._evaluate_numpy(theta, with_hessian)
            if evaluated is not None:
                return evaluated
        return self._evaluate_torch(theta, with_hessian)

    def _evaluate_torch(
        self, theta: np.ndarray, with_hessian: bool = False
    ) -> tuple[float, np.ndarray, np.ndarray | None]:
        """Value, gradient and (if asked) Hessian at ``theta``, in torch (any device)."""
        h = self._values(theta)
        y = self._y
        n = y.shape[0]
        kernel = self._kernel_parts(
            h, {"sq": self._sq, "dt": self._dt, "arm_corr": self._arm_corr}, with_hessian
        )
        signal = kernel["signal"]
        noise = h.noise * self._noise_scale
        delta = signal.clone()
        delta.diagonal().add_(noise)
        factor, info = torch.linalg.cholesky_ex(delta)
        jitter = 0.0
        if int(info) != 0:
            factor, jitter = robust_cholesky(delta, warn=False)
            self.max_jitter = max(self.max_jitter, jitter)
        del delta
        # the GP takes the factor of the fit's optimum from here when it was the last one
        # computed (a fresh factorization at the optimum is one more O(n^3) per fit)
        self._last_factor = (
            (np.asarray(theta, dtype=float).tobytes(), factor) if jitter == 0.0 else None
        )
        alpha = torch.cholesky_solve(y.reshape(-1, 1), factor).reshape(-1)
        value = 0.5 * float(y.dot(alpha)) + float(torch.log(factor.diagonal()).sum())
        value += 0.5 * n * math.log(2 * math.pi)
        # W = Delta^{-1} - alpha alpha^T; every derivative is (1/2) <W, dDelta>, taken as a
        # dot product of flattened matrices (no product matrix is formed).
        inverse = cholesky_inverse(factor)  # row-major, as every other (n, n) tensor here
        del factor
        # the Hessian needs Delta^{-1} itself as well; the gradient alone reuses its buffer
        w = (
            inverse.addr(alpha, alpha, alpha=-1.0)
            if with_hessian
            else inverse.addr_(alpha, alpha, alpha=-1.0)
        )
        parts = _EvaluationParts(
            outputscale=h.outputscale,
            noise=noise,
            jitter=jitter,
            inverse=inverse,
            w=w,
            alpha=alpha,
            **kernel,
        )
        return self._derivatives(theta, value, parts, with_hessian)

    def _kernel_parts(
        self, h: _Values, inputs: Mapping[str, _Matrix | None], with_hessian: bool
    ) -> dict[str, _Matrix | None]:
        """The signal ``lambda k_S k_T`` ``(n, n)``, its factors with their first and (if
        asked) second derivatives in ``log l``, the scaled distances ``r`` and (ARD) the
        per-dimension squared scaled differences, from the fixed ``inputs`` (``sq``,
        ``dt``, ``arm_corr``): the same operations on torch tensors and NumPy arrays."""
        sq, dt, arm_corr = inputs["sq"], inputs["dt"], inputs["arm_corr"]
        in_numpy = isinstance(sq if arm_corr is None else arm_corr, np.ndarray)
        scaled = r = None
        # second derivatives in log l only where a Hessian is asked for
        d2corr_s = d2corr_t = None
        if arm_corr is not None:
            corr_s, dcorr_s = arm_corr, None
        else:
            assert sq is not None
            if in_numpy:
                ls = np.asarray(h.lengthscale_space)
            else:
                # a 0-d tensor, not a Python float: on a GPU a division by a host scalar is
                # a multiplication by its reciprocal, and in float32 the square would be
                # rounded once instead of twice
                ls = torch.tensor(h.lengthscale_space, dtype=sq.dtype, device=sq.device)
            if self.kernel.ard:
                scaled = sq / (ls * ls)
                r = scaled.sum(-1)
            else:
                r = sq / (ls[0] * ls[0])
            if in_numpy:
                np.maximum(r, 1e-30, out=r)
                np.sqrt(r, out=r)
            else:
                r.clamp_min_(1e-30).sqrt_()
            if with_hessian:
                corr_s, dcorr_s, d2corr_s = correlation_and_scale_derivatives(
                    self.kernel.spatial, r
                )
            else:
                corr_s, dcorr_s = correlation_and_scale_derivative(self.kernel.spatial, r)
        if dt is not None:
            assert self.kernel.temporal is not None and h.lengthscale_time is not None
            if with_hessian:
                corr_t, dcorr_t, d2corr_t = self.kernel.temporal_factor_and_scale_derivatives(
                    dt / h.lengthscale_time
                )
            else:
                corr_t, dcorr_t = self.kernel.temporal_factor_and_scale_derivative(
                    dt / h.lengthscale_time
                )
            signal = corr_s * corr_t
        else:
            corr_t = dcorr_t = None
            signal = corr_s.copy() if in_numpy else corr_s.clone()
        signal *= h.outputscale
        return {
            "signal": signal,
            "corr_s": corr_s,
            "dcorr_s": dcorr_s,
            "d2corr_s": d2corr_s,
            "corr_t": corr_t,
            "dcorr_t": dcorr_t,
            "d2corr_t": d2corr_t,
            "r": r,
            "scaled": scaled,
        }

    def _derivatives(
        self, theta: np.ndarray, value: float, parts: _EvaluationParts, with_hessian: bool
    ) -> tuple[float, np.ndarray, np.ndarray | None]:
        """Value, gradient and (if asked) Hessian with the priors' terms, from what an
        evaluation computed (``value``: the likelihood's)."""
        gradient = self._likelihood_gradient(parts)
        hessian = self._likelihood_hessian(parts) if with_hessian else None
        return self._with_priors(theta, value, gradient, hessian)

    def _with_priors(
        self, theta: np.ndarray, value: float, gradient: np.ndarray, hessian: np.ndarray | None
    ) -> tuple[float, np.ndarray, np.ndarray | None]:
        """The likelihood's value, gradient and Hessian (if any) plus the priors' terms."""
        if self.priors:
            i = 0
            for name, k in self._slots():
                if name in self.priors:
                    prior, log_values = self.priors[name], theta[i : i + k]
                    term, term_gradient = _negative_log_prior(prior, log_values)
                    value += term
                    gradient[i : i + k] += term_gradient
                    if hessian is not None:
                        hessian[range(i, i + k), range(i, i + k)] += _negative_log_prior_curvature(
                            prior, log_values
                        )
                i += k
        return value, gradient, hessian

    def _likelihood_gradient(self, parts: _EvaluationParts) -> np.ndarray:
        """``(p,)`` the gradient of ``-log p(y_std | theta)``: ``(1/2) <W, dDelta/dtheta>``
        per free parameter, each a dot product of flattened ``(n, n)`` matrices (no product
        matrix is formed). Torch tensors or NumPy arrays alike (:meth:`_evaluate_torch`,
        :meth:`_evaluate_numpy`)."""
        lam, w, noise, r, scaled = parts.outputscale, parts.w, parts.noise, parts.r, parts.scaled
        corr_s, dcorr_s, corr_t, dcorr_t = parts.corr_s, parts.dcorr_s, parts.corr_t, parts.dcorr_t
        inner = _inner
        einsum = np.einsum if isinstance(w, np.ndarray) else torch.einsum
        grads: list[float] = []
        for name, _ in self._slots():
            if name == "outputscale":
                grads.append(0.5 * inner(w, parts.signal))
            elif name == "noise":
                grads.append(0.5 * float((w.diagonal() * noise).sum()))
            elif name == "lengthscale_time":
                assert dcorr_t is not None
                grads.append(0.5 * lam * inner(w * corr_s, dcorr_t))
            elif dcorr_s is None:
                raise AssertionError("a given arm covariance has no spatial lengthscale")
            elif self.kernel.ard:
                # d r / d log l_j = -(diff_j / l_j)^2 / r, and -r k'(r) is what we have
                if corr_t is None:
                    chain = w * dcorr_s
                else:
                    chain = w * corr_t
                    chain *= dcorr_s
                chain /= r
                chain /= r
                grads.extend((0.5 * lam * einsum("ij,ijk->k", chain, scaled)).tolist())
            else:
                weights = w if corr_t is None else w * corr_t
                grads.append(0.5 * lam * inner(weights, dcorr_s))
        return np.asarray(grads, dtype=float)

    def _evaluate_numpy(
        self, theta: np.ndarray, with_hessian: bool = False
    ) -> tuple[float, np.ndarray, np.ndarray | None] | None:
        """Value, gradient and (if asked) Hessian, as :meth:`_evaluate_torch` computes
        them, in NumPy and SciPy's LAPACK: on a CPU a NumPy operation on a small matrix
        costs a fraction of a torch operation's fixed overhead, which is most of an
        evaluation's cost below ~100 observations (:data:`_NUMPY_LARGEST`,
        :data:`_NUMPY_HESSIAN_LARGEST`; ``benchmarks/fit_evaluation_cost.py``). The same
        formulas in the same order (the gradient and the Hessian are the torch path's own
        code, on arrays); the results differ from the torch ones by rounding (the
        exponential and LAPACK are other implementations). ``None`` where ``Delta`` is not
        positive definite to working precision: :meth:`_evaluate_torch` then adds the
        jitter. (At the edge of positive definiteness one LAPACK may factorize what the
        other needs jitter for: the GP's own factorization, in torch, then adds jitter
        that its fit did not.)"""
        arrays = self._numpy_arrays()
        h = self._values(theta)
        y = arrays["y"]
        n = y.shape[0]
        kernel = self._kernel_parts(h, arrays, with_hessian)
        noise = h.noise * arrays["noise_scale"]
        delta = kernel["signal"].copy()
        delta.flat[:: n + 1] += noise
        # a symmetric row-major matrix is its own column-major transpose: LAPACK works on
        # it in place, without a copy
        factor, info = _POTRF(delta.T, lower=1, clean=1, overwrite_a=1)
        if info != 0:
            return None
        alpha, _ = _POTRS(factor, y, lower=1)
        value = 0.5 * float(y @ alpha) + float(np.log(factor.diagonal()).sum())
        value += 0.5 * n * math.log(2 * math.pi)
        # Delta^{-1} by solving against the identity: POTRI's result depends on how many
        # threads OpenBLAS runs (even at n = 17), a solve's column by column does not. The
        # solve is symmetric to rounding; the mean with its transpose is exactly so (and
        # two passes, where mirroring a triangle took several)
        solved = _POTRS(factor, arrays["identity"], lower=1)[0]
        inverse = solved.T + solved
        inverse *= 0.5
        # not handed to the GP (factor_at): its own factorization is torch's, which LAPACK's
        # here differs from by rounding, and a policy restored from its state, which
        # factorizes in torch, must predict exactly as the live one (a small matrix's
        # factorization costs microseconds)
        self._last_factor = None
        parts = _EvaluationParts(
            outputscale=h.outputscale,
            noise=noise,
            jitter=0.0,
            inverse=inverse,
            w=inverse - np.outer(alpha, alpha),
            alpha=alpha,
            **kernel,
        )
        return self._derivatives(theta, value, parts, with_hessian)

    def _numpy_arrays(self) -> dict[str, np.ndarray | None]:
        """The fixed inputs of :meth:`_evaluate_numpy` as NumPy arrays (made once)."""
        if self._arrays is None:
            as_array = lambda t: None if t is None else t.numpy()  # noqa: E731
            self._arrays = {
                "y": as_array(self._y),
                "noise_scale": as_array(self._noise_scale),
                "sq": as_array(self._sq),
                "dt": as_array(self._dt),
                "arm_corr": as_array(self._arm_corr),
                "identity": np.eye(self._y.shape[0], order="F"),
            }
        return self._arrays

    @staticmethod
    def _trace_products(
        parts: _EvaluationParts,
        names: list[tuple[str, int]],
        derivatives: list[torch.Tensor | None],
    ) -> np.ndarray:
        """``tr(Delta^{-1} dDelta_a Delta^{-1} dDelta_b)`` for every pair, ``(p, p)``.

        One ``(n, n)`` product ``A_a = Delta^{-1} dDelta_a`` per lengthscale; the noise's
        ``A = Delta^{-1} N`` and the scale's ``A = I - Delta^{-1} D`` (``N`` the noise
        diagonal, ``D`` with the jitter) enter through closed forms: ``tr(Delta^{-1} V A_b)
        = sum_j v_j (A_b o Delta^{-1})_j.`` (row sums) and ``tr(Delta^{-1} U Delta^{-1} V) =
        u^T (Delta^{-1} o Delta^{-1}) v`` for diagonals ``U``, ``V``.
        """
        inverse = parts.inverse
        noise = parts.noise
        diagonal = noise if parts.jitter == 0.0 else noise + parts.jitter
        dense = {
            i: inverse @ derivative
            for i, ((name, _), derivative) in enumerate(zip(names, derivatives, strict=True))
            if name not in ("noise", "outputscale")
        }
        # row sums of A_b o Delta^{-1}: tr(Delta^{-1} V A_b) = v . rows_b for a diagonal V
        rows = {i: (product * inverse).sum(1) for i, product in dense.items()}
        squared = inverse * inverse
        inverse_diagonal = inverse.diagonal()
        n = inverse.shape[0]

        def pair(u: torch.Tensor, v: torch.Tensor) -> float:
            return float(u @ (squared @ v))

        # the scale's A is I - Delta^{-1} D, the noise's Delta^{-1} N
        def trace_with_diagonal(i: int, name: str) -> float:
            if i in dense:
                trace = float(dense[i].diagonal().sum())
                if name == "noise":
                    return float(noise @ rows[i])
                return trace - float(diagonal @ rows[i])
            if name == "noise":
                return float(inverse_diagonal @ noise) - pair(diagonal, noise)
            return n - 2.0 * float(inverse_diagonal @ diagonal) + pair(diagonal, diagonal)

        p = len(names)
        traces = np.empty((p, p))
        for b in range(p):
            # tr(A_a A_b) = <A_a, A_b^T>: each transpose copied once (one held at a time)
            transposed = dense[b].T.reshape(-1) if b in dense else None
            for a in range(b + 1):
                name_a, name_b = names[a][0], names[b][0]
                if a in dense and transposed is not None:
                    value = _inner(dense[a], transposed)
                elif name_a == name_b == "noise":
                    value = pair(noise, noise)
                elif a in dense or b in dense:
                    i, other = (a, name_b) if a in dense else (b, name_a)
                    value = trace_with_diagonal(i, other)
                else:  # the scale with itself or with the noise
                    value = trace_with_diagonal(-1, "noise" if "noise" in (name_a, name_b) else "")
                traces[a, b] = traces[b, a] = value
        return traces

    def _likelihood_hessian(self, parts: _EvaluationParts) -> np.ndarray:
        """Hessian of ``-log p(y_std | theta)`` in the free log-parameters (see
        :meth:`with_hessian`); ``(p, p)``.

        Per parameter ``a``: ``dDelta_a`` (the noise's is diagonal), ``A_a = Delta^{-1}
        dDelta_a`` and ``dDelta_a alpha``. The scale's ``A`` is ``I - Delta^{-1} D`` with
        ``D`` the noise (and jitter) diagonal, since ``dDelta / d log lambda`` is the signal
        ``Delta - D``: no product for it. ARD lengthscales use the share of each dimension
        in the squared distance, ``P_a = (diff_a / l_a)^2 / r^2`` (bounded where ``r -> 0``):
        ``dk / d log l_a = g P_a`` and ``d^2 k / d log l_a d log l_b = (g' + 2 g) P_a P_b -
        2 g P_a [a = b]``, with ``g`` and ``g'`` the first and second derivatives of the
        isotropic correlation in ``log l``.
        """
        lam, w, inverse = parts.outputscale, parts.w, parts.inverse
        corr_t, dcorr_t = parts.corr_t, parts.dcorr_t
        inner = _inner
        # dense dDelta_a (None for the noise), slot name and ARD dimension per parameter
        derivatives: list[torch.Tensor | None] = []
        names: list[tuple[str, int]] = []
        shares = None
        for name, k in self._slots():
            if name == "outputscale":
                derivatives.append(parts.signal)
            elif name == "noise":
                derivatives.append(None)
            elif name == "lengthscale_time":
                assert dcorr_t is not None
                derivatives.append(parts.corr_s * dcorr_t * lam)
            else:
                assert parts.dcorr_s is not None and parts.r is not None
                base = parts.dcorr_s * lam if corr_t is None else parts.dcorr_s * corr_t * lam
                if self.kernel.ard:
                    assert parts.scaled is not None
                    shares = parts.scaled / (parts.r * parts.r)[..., None]
                    derivatives.extend(base * shares[..., j] for j in range(k))
                else:
                    derivatives.append(base)
            names.extend((name, j) for j in range(k))
        p = len(derivatives)
        moved = []  # dDelta_a alpha
        for (name, _), derivative in zip(names, derivatives, strict=True):
            if name == "noise":
                moved.append(parts.noise * parts.alpha)
            else:
                assert derivative is not None
                moved.append(derivative @ parts.alpha)
        stacked = np.stack(moved, axis=1) if isinstance(w, np.ndarray) else torch.stack(moved, 1)
        data_term = _host(stacked.T @ (inverse @ stacked))
        trace_term = self._trace_products(parts, names, derivatives)
        # <W, d^2 Delta / d theta_a d theta_b>
        second = np.zeros((p, p))
        position = {key: i for i, key in enumerate(names)}
        for a, (name, _) in enumerate(names):
            if name == "noise":
                second[a, a] = float((w.diagonal() * parts.noise).sum())
            elif name == "outputscale":
                # every signal term is linear in lambda: d/d log lambda leaves it unchanged
                for b, other in enumerate(derivatives):
                    if other is not None:
                        second[a, b] = second[b, a] = inner(w, other)
        spatial = [i for i, (name, _) in enumerate(names) if name == "lengthscale_space"]
        time_index = position.get(("lengthscale_time", 0))
        if time_index is not None:
            assert parts.d2corr_t is not None
            second[time_index, time_index] = lam * inner(w * parts.corr_s, parts.d2corr_t)
        if spatial:
            assert parts.dcorr_s is not None and parts.d2corr_s is not None
            if shares is None:
                (i,) = spatial
                weights = w if corr_t is None else w * corr_t
                second[i, i] = lam * inner(weights, parts.d2corr_s)
                if time_index is not None:
                    assert dcorr_t is not None
                    second[i, time_index] = second[time_index, i] = lam * inner(
                        w * parts.dcorr_s, dcorr_t
                    )
            else:
                d = len(spatial)
                curvature = parts.d2corr_s + 2.0 * parts.dcorr_s
                if corr_t is None:
                    weights = w * curvature
                else:
                    weights = w * corr_t
                    weights *= curvature
                flat = shares.reshape(-1, d)
                block = lam * _host((flat * weights.reshape(-1, 1)).T @ flat)
                for jj, i in enumerate(spatial):
                    block[jj, jj] -= 2.0 * inner(w, derivatives[i])  # type: ignore[arg-type]
                second[np.ix_(spatial, spatial)] = block
                if time_index is not None:
                    assert dcorr_t is not None
                    cross = w * dcorr_t
                    cross *= parts.dcorr_s
                    column = lam * _host((flat * cross.reshape(-1, 1)).sum(0))
                    second[spatial, time_index] = column
                    second[time_index, spatial] = column
        hessian = 0.5 * second - 0.5 * trace_term + data_term
        return 0.5 * (hessian + hessian.T)


def _inner(a: _Matrix, b: _Matrix) -> float:
    """``<a, b>``: the dot product of two matrices flattened, torch or NumPy."""
    if isinstance(a, np.ndarray):
        return float(np.dot(a.reshape(-1), b.reshape(-1)))
    return float(torch.dot(a.reshape(-1), b.reshape(-1)))


def _host(x: _Matrix) -> np.ndarray:
    """``x`` as a NumPy array on the host (a tensor copied from its device)."""
    return x if isinstance(x, np.ndarray) else x.cpu().numpy()


@dataclass(slots=True)
class _Values:
    """The hyperparameters at one ``theta`` as plain numbers (see
    :meth:`NegativeLogMarginalLikelihood._values`). Not frozen, like
    :class:`_EvaluationParts`: both are built at every evaluation, and a frozen
    dataclass sets each field through ``object.__setattr__``."""

    outputscale: float
    lengthscale_space: tuple[float, ...]
    lengthscale_time: float | None
    noise: float


@dataclass(slots=True)
class _EvaluationParts:
    """What one evaluation computed that the gradient and the Hessian read
    (:meth:`NegativeLogMarginalLikelihood._derivatives`), torch tensors or NumPy arrays:
    the scale, the noise diagonal ``(n,)`` and jitter, the signal, ``Delta^{-1}`` and
    ``W`` ``(n, n)``, ``alpha`` ``(n,)``, the spatial and temporal factors with their first
    and second ``log l`` derivatives, the scaled distances ``r`` and (ARD) the
    per-dimension squared scaled differences ``(n, n, d)``."""

    outputscale: float
    noise: _Matrix
    jitter: float
    signal: _Matrix
    inverse: _Matrix
    w: _Matrix
    alpha: _Matrix
    corr_s: _Matrix
    dcorr_s: _Matrix | None
    d2corr_s: _Matrix | None
    corr_t: _Matrix | None
    dcorr_t: _Matrix | None
    d2corr_t: _Matrix | None
    r: _Matrix | None
    scaled: _Matrix | None


def _negative_log_prior_curvature(prior: tuple, log_values: np.ndarray) -> np.ndarray:
    """Second derivative of :func:`_negative_log_prior` in each ``log v`` (its Hessian is
    diagonal): ``rate v`` (Gamma) or ``1 / sd^2`` (log-normal)."""
    if len(prior) == 3:
        return prior[2] * np.exp(log_values)
    return np.full(log_values.shape, 1.0 / prior[1] ** 2)


def _negative_log_prior(prior: tuple, log_values: np.ndarray) -> tuple[float, np.ndarray]:
    """``-log p(v)`` at ``v = exp(log_values)`` (up to a constant) and its gradient in ``log v``.

    The density is that of ``v`` itself, as GPyTorch's priors add it to the objective:
    ``(mean, sd)`` is a log-normal (mode ``exp(mean - sd^2)``, median ``exp(mean)``),
    ``("gamma", a, b)`` a Gamma density of concentration ``a`` and rate ``b`` (mode
    ``(a - 1) / b``; each a number or one per value, e.g. per ARD lengthscale).
    """
    if len(prior) == 3:
        _, concentration, rate = prior
        v = np.exp(log_values)
        value = float(np.sum(rate * v - (concentration - 1.0) * log_values))
        return value, rate * v - (concentration - 1.0)
    mean, scale = prior
    if log_values.shape == (1,):
        # one value: the same operations on Python floats (a NumPy operation on a
        # one-element array costs microseconds, several per evaluation)
        log_value = float(log_values[0])
        z = (log_value - mean) / scale
        return 0.5 * (z * z) + log_value, np.array([z / scale + 1.0])
    z = (log_values - mean) / scale
    return float(0.5 * np.sum(z * z) + np.sum(log_values)), z / scale + 1.0


def fit_hyperparameters(
    gp: SpatioTemporalGP,
    *,
    bounds: HyperparameterBounds | None = None,
    max_iterations: int = 50,
    initial: Sequence[Hyperparameters] = (),
    priors: Mapping[str, tuple] | None = None,
    method: str = "l-bfgs-b",
    restarts: Sequence[Hyperparameters] = (),
    restart_if: Callable[[StartOutcome], str | None] | None = None,
    restart_method: str | None = None,
) -> FitResult:
    """Fit the GP's hyperparameters by maximum exact marginal likelihood, in place.

    The targets are restandardized first. The search starts from the GP's current
    hyperparameters (the warm start), then from every element of ``initial`` and then,
    if ``restart_if`` asks for them, from those of ``restarts``; the best local optimum
    is kept and set on the GP.

    Args:
        gp: the GP (needs at least one observation).
        bounds: box bounds and fixed names (defaults: :class:`HyperparameterBounds`).
        max_iterations: cap on iterations per start.
        initial: additional starting points.
        priors: Gaussian priors on log-hyperparameters (see
            :class:`NegativeLogMarginalLikelihood`); ``None`` fits by maximum likelihood.
        method: the local search (:data:`FIT_METHODS`): ``"l-bfgs-b"`` (SciPy, gradient
            only) or ``"newton"``: projected Newton with the analytic Hessian
            (:func:`_projected_newton`), a few evaluations from a nearby start.
        restarts: starting points searched only when ``restart_if`` asks for them.
        restart_if: called with the :class:`StartOutcome` of the best local search so far
            (the warm start's and ``initial``'s); the ``restarts`` run only when it returns
            a reason (a non-empty string), which the result records. ``None``: they always
            run.
        restart_method: the local search from the ``restarts`` (``None``: ``method``).
            An L-BFGS-B restart of a Newton fit ends with Newton from where it stopped.

    Returns:
        A :class:`FitResult`. A :class:`~dynbo.models.linalg.CholeskyJitterWarning`
        is emitted if any evaluation needed jitter.
    """
    if bounds is None:
        bounds = HyperparameterBounds()
    if not isinstance(max_iterations, int) or max_iterations < 1:
        raise ValueError(f"max_iterations must be a positive integer, got {max_iterations!r}")
    for what, name in (("method", method), ("restart_method", restart_method or method)):
        if name not in FIT_METHODS:
            raise ValueError(f"{what} must be one of {FIT_METHODS}, got {name!r}")
    if gp.n == 0:
        raise ValueError("cannot fit hyperparameters without observations")
    gp.restandardize()
    objective = NegativeLogMarginalLikelihood(gp, bounds.fixed, priors)
    starts = [bounds.clip(gp.hyperparameters.for_kernel(gp.kernel))]
    starts += [bounds.clip(h.for_kernel(gp.kernel)) for h in initial]
    always = len(starts)
    starts += [bounds.clip(h.for_kernel(gp.kernel)) for h in restarts]
    best: _LocalResult | None = None
    best_start = starts[0]
    reason = None
    optima: list[tuple[float, Hyperparameters]] = []
    if objective.size == 0:
        value, _ = objective(np.zeros(0))
        best = _LocalResult(value, np.zeros(0), 0, True, "all hyperparameters fixed")
        optima.append((value, objective.unpack(best.theta)))
    else:
        log_bounds = objective.bounds(bounds)
        for index, start in enumerate(starts):
            if index == always:
                assert best is not None
                reason = (
                    "always"
                    if restart_if is None
                    else restart_if(_outcome(objective, best_start, best, log_bounds, gp.n))
                )
                if not reason:
                    reason = None
                    break
            theta0 = objective.pack(start)
            if (method if index < always else restart_method or method) == "newton":
                local = _projected_newton(objective, theta0, log_bounds, max_iterations)
            else:
                local = _lbfgsb(objective, theta0, log_bounds, max_iterations)
                if method == "newton":
                    # L-BFGS-B stops on a relative decrease of 1e7 machine epsilons, up to
                    # ~1e-5 away from the optimum along a flat direction: Newton from there
                    # (an evaluation or two) ends where a Newton search would
                    polished = _projected_newton(objective, local.theta, log_bounds, max_iterations)
                    if polished.value <= local.value:
                        local = dataclasses.replace(
                            polished, iterations=local.iterations + polished.iterations
                        )
            optima.append((local.value, objective.unpack(local.theta)))
            # Newton fits: searches that meet in one optimum end within rounding noise of
            # each other, and which is lower is noise too; the earlier start keeps it unless
            # beaten by more than the convergence tolerance (the same data in another time
            # unit then give the same fit). L-BFGS-B fits compare as they always did.
            if best is None:
                best, best_start = local, start
                continue
            margin = _NEWTON_TOLERANCE * max(1.0, abs(best.value)) if method == "newton" else 0.0
            if local.value < best.value - margin:
                best, best_start = local, start
    assert best is not None
    value, theta = best.value, best.theta
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
    gp.set_hyperparameters(hyper, factor=objective.factor_at(theta))
    return FitResult(
        hyperparameters=hyper,
        negative_log_likelihood=value,
        iterations=best.iterations,
        evaluations=objective.evaluations,
        jitter=objective.max_jitter,
        message=best.message,
        starts=len(optima),
        restart_reason=reason,
        optima=tuple(optima),
        hessian_evaluations=objective.hessian_evaluations,
    )


def _lbfgsb(
    objective: NegativeLogMarginalLikelihood,
    theta0: np.ndarray,
    log_bounds: list[tuple[float, float]],
    max_iterations: int,
) -> _LocalResult:
    """SciPy's L-BFGS-B from ``theta0``, at most ``max_iterations`` iterations."""
    result = scipy.optimize.minimize(
        objective,
        theta0,
        jac=True,
        method="L-BFGS-B",
        bounds=log_bounds,
        options={"maxiter": max_iterations},
    )
    # Keep the start if the optimizer ended somewhere worse (it can, when it stops on an
    # evaluation failure).
    start_value = objective(theta0)[0]
    if start_value < float(result.fun):
        value, theta = start_value, theta0
    else:
        value, theta = float(result.fun), np.asarray(result.x)
    return _LocalResult(value, theta, int(result.nit), bool(result.success), str(result.message))


def _projected_newton(
    objective: NegativeLogMarginalLikelihood,
    theta0: np.ndarray,
    log_bounds: list[tuple[float, float]],
    max_iterations: int,
) -> _LocalResult:
    """Minimize ``objective`` in its log-space box by projected Newton from ``theta0``.

    Bertsekas (1982), "Projected Newton methods for optimization problems with simple
    constraints": the parameters on a bound whose gradient points out of the box are held
    there; on the others, a Newton step with the analytic Hessian
    (:meth:`NegativeLogMarginalLikelihood.with_hessian`), its eigenvalues replaced by
    their absolute values (at least ``1e-8`` of the largest) where it is not positive
    definite, the step shortened to :data:`_NEWTON_LONGEST_STEP` log units, projected onto
    the box and halved until it decreases the objective enough (Armijo). It stops when
    half the Newton decrement (the decrease the quadratic model predicts) is below
    :data:`_NEWTON_TOLERANCE` ``* max(1, |value|)`` with a positive semi-definite Hessian
    (up to the eigenvalue floor), or after ``max_iterations`` steps. Near a minimum it
    converges quadratically: from the previous fit's optimum it takes a few evaluations,
    and it ends within ~1e-8 (log units) of the optimum, so that the same data in another
    time unit give the same fit. (A BFGS update in place of the Hessian after short steps
    saves half of each evaluation's cost but stops ~1e-5 away along flat directions.)
    Every evaluation computes value, gradient and Hessian together, from one Cholesky
    factorization, except on the step that is expected to be the last
    (:data:`_LAST_STEP`): its trial points get value and gradient only, and the stopping
    test at the accepted one uses the Hessian of the point the step came from; where that
    test passes, the result is the point the test with its own Hessian would have
    stopped at in all but borderline cases, one Hessian cheaper.
    """
    lower = np.array([b[0] for b in log_bounds])
    upper = np.array([b[1] for b in log_bounds])
    relative = max(_NEWTON_TOLERANCE, 10.0 * torch.finfo(objective.dtype).eps)
    theta = np.clip(theta0, lower, upper)
    value, gradient, hessian = objective.with_hessian(theta)
    if value >= _FAILED_EVALUATION:
        return _LocalResult(value, theta, 0, False, "the start could not be evaluated")
    iterations = 0
    while True:
        free = _free_parameters(theta, gradient, lower, upper)
        if not free.any():
            return _LocalResult(value, theta, iterations, True, "every parameter on a bound")
        model = _NewtonModel.of(hessian, gradient, free)
        if model.converged(value, relative):
            return _LocalResult(value, theta, iterations, True, "Newton decrement below tolerance")
        vectors, coefficients, curvature = model.vectors, model.coefficients, model.curvature
        decrement, tolerance = model.decrement, relative * max(1.0, abs(value))
        if iterations >= max_iterations:
            return _LocalResult(value, theta, iterations, False, "iteration cap reached")
        step = np.zeros_like(theta)
        step[free] = -(vectors @ (coefficients / curvature))
        longest = float(np.abs(step).max())
        if longest > _NEWTON_LONGEST_STEP:
            step *= _NEWTON_LONGEST_STEP / longest
        iterations += 1
        # the last step (see _LAST_STEP): from a minimum's neighbourhood (no clearly
        # negative curvature), a full Newton step, not shortened to the longest trusted
        last = (
            model.eigenvalues.min() > -model.floor
            and longest <= _NEWTON_LONGEST_STEP
            and 0.5 * decrement <= _LAST_STEP * max(1.0, abs(value))
        )
        length, accepted = 1.0, None
        for _ in range(_BACKTRACKS):
            trial = np.clip(theta + length * step, lower, upper)
            if np.array_equal(trial, theta):
                break
            evaluation = objective(trial) if last else objective.with_hessian(trial)
            if evaluation[0] <= value + _ARMIJO * float(gradient @ (trial - theta)):
                accepted = (trial, *evaluation)
                break
            length *= 0.5
        if accepted is None:
            # no decrease along the step: converged to the precision of the evaluations
            # when the model promised next to nothing, stuck otherwise
            converged = 0.5 * decrement <= 1e3 * tolerance
            message = "no decrease along the Newton step"
            return _LocalResult(value, theta, iterations, converged, message)
        if last:
            trial, trial_value, trial_gradient = accepted
            # the previous Hessian is trusted only where the full step was taken
            if length == 1.0 and _converged_with(
                hessian, trial, trial_value, trial_gradient, lower, upper, relative
            ):
                message = "Newton decrement below tolerance"
                return _LocalResult(trial_value, trial, iterations, True, message)
            accepted = (trial, *objective.with_hessian(trial))
        theta, value, gradient, hessian = accepted


@dataclass(frozen=True)
class _NewtonModel:
    """The quadratic model of a projected Newton step on the free parameters: the
    Hessian's eigen-decomposition with its eigenvalues replaced by their absolute values
    (at least ``floor``), the gradient's coordinates in its eigenvectors, and the Newton
    decrement ``g^T H^+ g``."""

    eigenvalues: np.ndarray
    vectors: np.ndarray
    floor: float
    curvature: np.ndarray
    coefficients: np.ndarray
    decrement: float

    @classmethod
    def of(cls, hessian: np.ndarray, gradient: np.ndarray, free: np.ndarray) -> _NewtonModel:
        eigenvalues, vectors = np.linalg.eigh(hessian[np.ix_(free, free)])
        floor = 1e-8 * max(1.0, float(np.abs(eigenvalues).max()))
        curvature = np.maximum(np.abs(eigenvalues), floor)
        coefficients = vectors.T @ gradient[free]
        decrement = float(coefficients @ (coefficients / curvature))
        return cls(eigenvalues, vectors, floor, curvature, coefficients, decrement)

    def converged(self, value: float, relative: float) -> bool:
        """The stopping test: a minimum, not a saddle (no direction of clearly negative
        curvature; a flat one, such as l_S when every observation is at one point, is
        allowed), and half the decrement below ``relative * max(1, |value|)``."""
        tolerance = relative * max(1.0, abs(value))
        return bool(self.eigenvalues.min() > -self.floor and 0.5 * self.decrement <= tolerance)


def _free_parameters(
    theta: np.ndarray, gradient: np.ndarray, lower: np.ndarray, upper: np.ndarray
) -> np.ndarray:
    """``(p,)`` which parameters a projected Newton step moves: all but those on a bound
    whose gradient points out of the box (Bertsekas 1982)."""
    held = ((theta <= lower) & (gradient > 0)) | ((theta >= upper) & (gradient < 0))
    return ~held


def _converged_with(
    hessian: np.ndarray,
    theta: np.ndarray,
    value: float,
    gradient: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    relative: float,
) -> bool:
    """:func:`_projected_newton`'s stopping test at ``theta`` with a given ``hessian``
    (that of the point the last step came from): the same held parameters, eigenvalue
    floor and tolerance as the test with ``theta``'s own."""
    free = _free_parameters(theta, gradient, lower, upper)
    if not free.any():
        return False  # every parameter on a bound: left to the loop's own test
    return _NewtonModel.of(hessian, gradient, free).converged(value, relative)


def _outcome(
    objective: NegativeLogMarginalLikelihood,
    start: Hyperparameters,
    best: _LocalResult,
    log_bounds: list[tuple[float, float]],
    size: int,
) -> StartOutcome:
    """The :class:`StartOutcome` of a local search that started from ``start``."""
    theta0 = objective.pack(start)
    lower = np.array([b[0] for b in log_bounds])
    upper = np.array([b[1] for b in log_bounds])
    on_bound = lambda theta: (theta <= lower) | (theta >= upper)  # noqa: E731
    reached = on_bound(best.theta) & ~on_bound(theta0)
    names: list[str] = []
    for name, k in objective._slots():
        names.extend([name] * k)
    change = np.abs(best.theta - theta0)
    return StartOutcome(
        start=start,
        hyperparameters=objective.unpack(best.theta),
        negative_log_likelihood=best.value,
        gain=max(0.0, objective(theta0)[0] - best.value),
        size=size,
        iterations=best.iterations,
        converged=best.converged,
        message=best.message,
        reached_bounds=tuple(sorted({names[i] for i in np.flatnonzero(reached)})),
        largest_log_change=float(change.max()) if change.size else 0.0,
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
