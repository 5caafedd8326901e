"""Approximate k-DPP sampling by a lazy swap Markov chain.

A k-DPP over ``N`` candidates with kernel matrix ``K`` draws a subset ``Z`` of size ``M``
with probability ``det(K_ZZ) / sum_{|Z'| = M} det(K_Z'Z')``: subsets of points far apart
under the kernel are likely, near-duplicates are not. SparQ-GP-UCB (Mauduit, Berthier &
Simonetto 2025) picks the past inputs it re-queries this way, with "the Markov chain sampling
algorithm" of Burt, Rasmussen & van der Wilk (2020, Convergence of sparse variational
inference in Gaussian processes regression), which is the swap chain of Anari, Oveis
Gharan & Rezaei (2016, Monte Carlo Markov chain algorithms for sampling strongly Rayleigh
distributions and determinantal point processes):

1. exact duplicate candidates are removed (they make every determinant containing both
   zero);
2. initialization by greedy MAP (pivoted Cholesky): repeatedly add the candidate of
   largest conditional variance ``k(x, x) - k_Z^T K_ZZ^{-1} k_Z``, ties broken at random;
3. lazy swap steps: with probability 1/2 nothing; otherwise ``s`` uniform in ``Z`` and
   ``t`` uniform outside it, and ``Z <- Z - s + t`` with probability
   ``min(1, det K_{Z-s+t} / det K_Z)``. Swaps whose new determinant is numerically 0
   are rejected.

The chain maintains ``A = K_ZZ^{-1}``. With ``w = A k_{Z,t}`` (the regression
coefficients of ``t`` on ``Z``) and ``r_t = k(t, t) - k_{Z,t}^T w`` (its conditional
variance), the acceptance ratio is

    det K_{Z-s+t} / det K_Z = A_ss r_t + w_s^2

(dropping regressor ``s`` raises the residual variance of ``t`` by ``w_s^2 / A_ss``, and
``1 / A_ss`` is the conditional variance of ``s`` given the rest): O(M^2) per step, and an
accepted swap is two rank-one corrections of ``A``, O(M^2). From the last fresh
factorization ``A`` drifts by round-off; it is recomputed from a fresh Cholesky factor
every ``refresh_every`` accepted swaps (the reference implementation warns of drift after
about 10^4 steps).

Step count (the project's choice; the paper gives only the order of the cost,
``docs/policies/sparq.md``): ``ceil(c_mix N M (ln ln(N + 2) + ln M + 2 ln(1 / eps)))`` with
``eps = 1 / N``, at most ``max_steps = 10^4``.

The size ``M`` itself can come from the approximation condition of SparQ (Mauduit et al.,
Prop. 3.2 and the proof of Thm. 3.10): ``E[tr(K - U_Z)] / sigma^2 <= eta``, the expectation
over the M-DPP, ``U_Z = K_XZ K_ZZ^+ K_ZX`` the Nystrom approximation of ``K`` from ``Z``.
That expectation has a closed form (Deshpande, Rademacher, Vempala & Wang 2006, Matrix
approximation and projective clustering via volume sampling, the identity behind its
bound; Belabbas & Wolfe 2009, Spectral methods in machine learning and new strategies for
very large datasets)::

    E_{|Z| = M}[tr(K - U_Z)] = (M + 1) e_{M+1}(lambda) / e_M(lambda)

with ``e_j`` the elementary symmetric polynomials of the eigenvalues ``lambda`` of ``K``
(:func:`expected_residual_traces`, :func:`approximation_size`). It is deterministic: no
sample is drawn to choose ``M``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

__all__ = [
    "KDPPSample",
    "SwapChain",
    "approximation_size",
    "chain_steps",
    "expected_residual_traces",
    "greedy_subset",
    "nystrom_residual_trace",
    "sample_kdpp",
]

#: a conditional variance at or below this fraction of the prior variance is a zero
#: determinant (the point lies in the span of the others)
RELATIVE_ZERO = 1e-10


@dataclass(frozen=True)
class KDPPSample:
    """A k-DPP draw.

    Attributes:
        indices: ``(M,)`` indices into the candidates given (first occurrences of
            duplicated rows), in the chain's order.
        steps: swap-chain steps run (lazy steps included).
        accepted: swaps accepted.
    """

    indices: np.ndarray
    steps: int
    accepted: int


def chain_steps(n: int, size: int, c_mix: float = 1.0, max_steps: int = 10_000) -> int:
    """``ceil(c_mix N M (ln ln(N + 2) + ln M + 2 ln N))``, at most ``max_steps``.

    The cost Mauduit, Berthier & Simonetto (2025) quote for their sampler, ``t Q (log log t
    + log Q + log(1/eps^2))`` steps with ``eps = 1/N``; 0 when there is nothing to choose
    (``N <= M``).
    """
    if n <= size or size < 1:
        return 0
    raw = c_mix * n * size * (math.log(math.log(n + 2)) + math.log(size) + 2 * math.log(n))
    # compared before rounding: an infinite product (a huge c_mix) is max_steps, not an error
    return max_steps if not raw < max_steps else int(math.ceil(raw))


def greedy_subset(kernel: np.ndarray, size: int, ties: np.ndarray) -> list[int]:
    """Greedy MAP initialization by pivoted Cholesky, O(N M^2).

    Args:
        kernel: ``(N, N)`` positive semi-definite matrix.
        size: ``M``.
        ties: ``(M,)`` uniforms in ``[0, 1)`` that break ties at each pick.

    Returns:
        Up to ``M`` indices: fewer when the kernel's rank is below ``M`` (no subset of
        size ``M`` has a positive determinant).
    """
    n = kernel.shape[0]
    residual = np.diag(kernel).astype(float).copy()
    scale = max(float(residual.max(initial=0.0)), 1e-300)
    rows = np.zeros((size, n))
    chosen: list[int] = []
    for j in range(min(size, n)):
        best = float(residual.max())
        if best <= RELATIVE_ZERO * scale:
            break
        candidates = np.flatnonzero(residual >= best * (1 - 1e-9))
        pick = int(candidates[min(int(ties[j] * candidates.size), candidates.size - 1)])
        row = (kernel[pick] - rows[:j, pick] @ rows[:j]) / math.sqrt(residual[pick])
        rows[j] = row
        residual = residual - row * row
        residual[pick] = 0.0
        chosen.append(pick)
    return chosen


class SwapChain:
    """The lazy swap chain's state: the subset ``Z`` and ``A = K_ZZ^{-1}``.

    Args:
        kernel: ``(N, N)`` positive semi-definite matrix (float64).
        subset: the initial ``Z`` (indices with ``det K_ZZ > 0``).
    """

    def __init__(self, kernel: np.ndarray, subset: list[int]) -> None:
        self.kernel = np.asarray(kernel, dtype=float)
        self.subset = np.asarray(subset, dtype=np.int64)
        inside = np.zeros(self.kernel.shape[0], dtype=bool)
        inside[self.subset] = True
        self.outside = [int(i) for i in np.flatnonzero(~inside)]
        # K[:, Z], row t contiguous: the proposals read one row each
        self.cross = np.ascontiguousarray(self.kernel[:, self.subset])
        self.refresh()

    def refresh(self) -> None:
        """Recompute ``A`` from a fresh Cholesky factor of ``K_ZZ``."""
        factor = np.linalg.cholesky(self.kernel[np.ix_(self.subset, self.subset)])
        inverse_factor = np.linalg.solve(factor, np.eye(len(self.subset)))
        self.inverse = inverse_factor.T @ inverse_factor

    def coefficients(self, candidate: int) -> tuple[np.ndarray, float]:
        """``(w, r)``: regression coefficients ``A k_{Z,t}`` of ``t`` on ``Z`` and its
        conditional variance ``k(t, t) - k_{Z,t}^T w``, O(M^2)."""
        cross = self.cross[candidate]
        w = self.inverse @ cross
        return w, float(self.kernel[candidate, candidate] - cross @ w)

    def ratio(self, position: int, candidate: int) -> float:
        """``det K_{Z - Z[position] + candidate} / det K_Z = A_ss r_t + w_s^2``, O(M^2)."""
        w, r = self.coefficients(candidate)
        return float(self.inverse[position, position] * r + w[position] ** 2)

    def swap(
        self,
        position: int,
        outside_position: int,
        proposal: tuple[np.ndarray, float] | None = None,
    ) -> None:
        """Replace ``Z[position]`` by ``outside[outside_position]``, O(M^2).

        Removing ``s`` is ``A' = A - a a^T / A_ss`` (``a = A[:, s]``); adding ``t`` at the
        freed position then adds ``b b^T / c`` with ``b = w - a w_s / A_ss`` (the
        coefficients of ``t`` on ``Z - s``) except ``b_s = -1``, and ``c = r_t + w_s^2 /
        A_ss`` (its conditional variance given ``Z - s``): two rank-one corrections from
        the proposal's ``(w, r_t)`` (:meth:`coefficients`, recomputed if not given).
        """
        t = self.outside[outside_position]
        w, r = self.coefficients(t) if proposal is None else proposal
        inverse = self.inverse
        a = inverse[:, position].copy()
        a_ss = a[position]
        b = w - a * (w[position] / a_ss)
        b[position] = -1.0
        c = r + w[position] ** 2 / a_ss
        inverse += np.multiply.outer(b, b / c) - np.multiply.outer(a, a / a_ss)
        self.outside[outside_position] = int(self.subset[position])
        self.subset[position] = t
        self.cross[:, position] = self.kernel[:, t]

    def run(self, uniforms: np.ndarray, refresh_every: int | None = 200) -> tuple[int, int]:
        """Run ``len(uniforms)`` lazy steps, each from a row of 4 uniforms in ``[0, 1)``.

        Returns:
            ``(steps, accepted)``.
        """
        m, outside = len(self.subset), len(self.outside)
        if m == 0 or outside == 0:
            return 0, 0
        kernel = self.kernel
        accepted = 0
        for lazy, u_s, u_t, u_accept in uniforms.tolist():
            if lazy < 0.5:
                continue
            position = min(int(u_s * m), m - 1)
            index = min(int(u_t * outside), outside - 1)
            t = self.outside[index]
            w, r = self.coefficients(t)
            a = self.inverse[position, position]
            # conditional variance of t given Z - s: numerically 0 means det 0, reject
            if r + w[position] ** 2 / a <= RELATIVE_ZERO * kernel[t, t]:
                continue
            if u_accept < a * r + w[position] ** 2:
                self.swap(position, index, (w, r))
                accepted += 1
                if refresh_every is not None and accepted % refresh_every == 0:
                    self.refresh()
        return len(uniforms), accepted


def unique_rows(points: np.ndarray) -> np.ndarray:
    """Indices of the first occurrence of each distinct row of ``(N, d)`` ``points``, in order."""
    _, first = np.unique(np.asarray(points), axis=0, return_index=True)
    return np.sort(first)


def sample_kdpp(
    points: torch.Tensor,
    size: int,
    covariance: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    generator: torch.Generator,
    *,
    c_mix: float = 1.0,
    max_steps: int = 10_000,
    steps: int | None = None,
    refresh_every: int | None = 200,
) -> KDPPSample:
    """Draw ``size`` distinct candidates, approximately from the k-DPP of ``covariance``.

    Args:
        points: ``(N, D)`` candidate inputs (duplicates allowed; removed first).
        size: ``M >= 1``; all distinct candidates when there are at most ``M``.
        covariance: ``(N, D), (N, D) -> (N, N)`` the kernel (e.g. the GP's prior).
        generator: the random stream (the policy's), consumed as ``(steps, 4)``
            uniforms plus ``M`` tie-breakers.
        c_mix, max_steps: the step-count rule (:func:`chain_steps`).
        steps: a fixed step count instead of the rule.
        refresh_every: fresh factorization every this many accepted swaps.

    Returns:
        The :class:`KDPPSample`; fewer than ``M`` indices only if the kernel over the
        distinct candidates has rank below ``M``.
    """
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"k-DPP size must be a positive integer, got {size!r}")
    distinct = unique_rows(points.detach().cpu().numpy())
    if distinct.size <= size:
        return KDPPSample(indices=distinct, steps=0, accepted=0)
    chosen = points[torch.as_tensor(distinct, device=points.device)]
    with torch.no_grad():
        kernel = covariance(chosen, chosen).detach().cpu().to(torch.float64).numpy()
    kernel = 0.5 * (kernel + kernel.T)
    ties = torch.rand(size, generator=generator, dtype=torch.float64).numpy()
    subset = greedy_subset(kernel, size, ties)
    if len(subset) < size:
        return KDPPSample(indices=distinct[subset], steps=0, accepted=0)
    count = chain_steps(len(distinct), size, c_mix, max_steps) if steps is None else int(steps)
    uniforms = torch.rand((count, 4), generator=generator, dtype=torch.float64).numpy()
    chain = SwapChain(kernel, subset)
    ran, accepted = chain.run(uniforms, refresh_every)
    return KDPPSample(indices=distinct[chain.subset], steps=ran, accepted=accepted)


def _positive_eigenvalues(kernel: np.ndarray) -> np.ndarray:
    """The eigenvalues of ``(N, N)`` ``kernel`` above the numerical rank tolerance.

    The tolerance is ``N eps max(lambda)`` (float64 ``eps``; numpy's ``matrix_rank``):
    below it an eigenvalue is round-off, and a round-off product in ``e_j`` would make the
    expected residual of a numerically exact approximation a spurious positive number.
    """
    values = np.linalg.eigvalsh(0.5 * (kernel + kernel.T))
    top = float(values.max(initial=0.0))
    tolerance = values.size * np.finfo(np.float64).eps * top
    return np.sort(values[values > tolerance])[::-1]


def _log_elementary_symmetric(values: np.ndarray, order: int) -> np.ndarray:
    """``(order + 1,)`` ``ln e_j(values)`` for ``j = 0..order`` (``-inf`` where 0), O(N order).

    In logs because ``e_j`` of ``N`` eigenvalues spans far more than a float's range
    (``e_j <= C(N, j) max(lambda)^j``); the recurrence ``e_j <- e_j + v e_{j-1}`` over the
    values ``v > 0`` is one ``logaddexp`` per value.
    """
    log_e = np.full(order + 1, -np.inf)
    log_e[0] = 0.0
    for value in np.log(values):
        # the right side is evaluated from the old row before it is assigned
        log_e[1:] = np.logaddexp(log_e[1:], value + log_e[:-1])
    return log_e


def expected_residual_traces(kernel: np.ndarray, max_size: int) -> np.ndarray:
    """``E[tr(K - U_Z)]`` under the exact M-DPP of ``kernel``, for ``M = 0..max_size``.

    Args:
        kernel: ``(N, N)`` positive semi-definite matrix (its units: the returned ones).
        max_size: the largest ``M`` (``>= 0``; sizes above ``N`` repeat 0).

    Returns:
        ``(max_size + 1,)`` ``(M + 1) e_{M+1}(lambda) / e_M(lambda)``: ``tr K`` at ``M = 0``,
        non-increasing, 0 from the numerical rank of ``kernel`` on (there the subset spans
        every column: no M-DPP of a larger size has a positive determinant, and its
        residual is 0 as well).
    """
    if isinstance(max_size, bool) or not isinstance(max_size, int) or max_size < 0:
        raise ValueError(f"max_size must be a non-negative integer, got {max_size!r}")
    return _residuals(_positive_eigenvalues(np.asarray(kernel, dtype=np.float64)), max_size)


def _residuals(values: np.ndarray, max_size: int) -> np.ndarray:
    """``(max_size + 1,)`` ``(M + 1) e_{M+1} / e_M`` of the positive ``values``."""
    log_e = _log_elementary_symmetric(values, max_size + 1)
    with np.errstate(invalid="ignore"):
        ratio = np.exp(log_e[1:] - log_e[:-1])
    # beyond the rank e_M = 0: the residual is 0, not the 0/0 of the formula
    return np.where(np.isfinite(log_e[:-1]), np.arange(1, max_size + 2) * ratio, 0.0)


def approximation_size(kernel: np.ndarray, threshold: float, minimum: int = 1) -> tuple[int, float]:
    """The smallest ``M >= minimum`` with ``E_{M-DPP}[tr(K - U_Z)] <= threshold``.

    Args:
        kernel: ``(N, N)`` positive semi-definite matrix over the distinct candidates.
        threshold: ``eta sigma^2 >= 0`` in the units of ``kernel``.
        minimum: a floor on ``M`` (``>= 1``).

    Returns:
        ``(M, E[tr(K - U_Z)])``, ``M`` at most ``N``: with every candidate ``U = K`` and the
        residual is 0, so the condition always holds by ``M = N`` (by the numerical rank).
        The expectations are computed for sizes up to 64, then 128, ... (O(N M) after one
        O(N^3) eigendecomposition).
    """
    n = int(np.asarray(kernel).shape[0])
    if n == 0:
        raise ValueError("approximation_size needs at least one candidate")
    minimum = min(max(int(minimum), 1), n)
    values = _positive_eigenvalues(np.asarray(kernel, dtype=np.float64))
    limit = min(n, 64)
    while True:
        traces = _residuals(values, limit)
        met = np.flatnonzero(traces[minimum:] <= threshold)
        if met.size:
            size = minimum + int(met[0])
            return size, float(traces[size])
        if limit >= n:  # unreachable: the residual of all n candidates is 0
            return n, float(traces[n])
        limit = min(n, 2 * limit)


def nystrom_residual_trace(diagonal: Any, cross: Any, core: Any) -> float:
    """``tr(K - K_XZ K_ZZ^+ K_ZX)``: the Nystrom residual of one subset ``Z``, O(N M^2).

    Args:
        diagonal: ``(N,)`` ``k(x_i, x_i)``.
        cross: ``(N, M)`` ``K_XZ``.
        core: ``(M, M)`` ``K_ZZ`` (a pseudo-inverse: duplicates and rank loss are allowed).

    Returns:
        The residual trace, at least 0 (round-off below 0 is clipped).
    """
    diagonal = np.asarray(diagonal, dtype=np.float64)
    cross = np.asarray(cross, dtype=np.float64)
    core = np.asarray(core, dtype=np.float64)
    inverse = np.linalg.pinv(0.5 * (core + core.T), hermitian=True)
    explained = float(np.einsum("ij,ij->", cross @ inverse, cross))
    return max(float(diagonal.sum()) - explained, 0.0)
