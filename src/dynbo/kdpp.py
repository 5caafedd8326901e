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
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

__all__ = ["KDPPSample", "SwapChain", "chain_steps", "greedy_subset", "sample_kdpp"]

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
