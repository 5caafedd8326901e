"""Naive per-observation evaluation of W-DBO Theorem 4.1 (for tests and cross-checks only).

For each observation ``i`` it follows the paper literally: move ``i`` to the front,
build the Lemma A.1 blocks ``E, F, G, H`` (eq. 14-17) from dense inverses of
``Delta_{D \\ i}`` and of ``Delta_{D \\ i} - k_1 k_1^T / (lambda + sigma^2)``, the
coefficients ``a, b, c, M`` of Propositions A.2 and A.3, and the three terms of eq. (10);
the normalizer is eq. (11) with a dense inverse of ``Delta``. NumPy, O(n^4): use
:class:`dynbo.relevancy.WassersteinRelevancy` for anything but checking it.

The three terms of eq. (10) nearly cancel for the least relevant observations, so in
float64 this literal evaluation keeps only ~1e-8 relative accuracy on them; pass
``dtype=np.longdouble`` (80-bit extended precision on x86) for a reference that is
accurate there too.
"""

from __future__ import annotations

import numpy as np

__all__ = ["naive_wasserstein_terms", "naive_relevancies"]


def naive_wasserstein_terms(
    delta: np.ndarray,
    targets: np.ndarray,
    convolutions: np.ndarray,
    outputscale: float,
    *,
    dtype: type = np.float64,
) -> tuple[np.ndarray, np.floating]:
    """``W_i^2`` (eq. 10) for every ``i`` and ``W_D^2`` (eq. 11), one observation at a time.

    Args:
        delta: ``(n, n)`` ``Delta = lambda K + diag(noise)`` (as the GP factorizes it,
            jitter included); its off-diagonal entries are the kernel values
            ``k((x_i, t_i), (x_j, t_j))`` and its diagonal ``lambda + sigma_i^2``.
        targets: ``(n,)`` standardized targets ``y``.
        convolutions: ``(n, n)`` symmetric ``C`` of Theorem 4.1.
        outputscale: ``lambda``.
        dtype: floating type of the whole evaluation (``np.float64`` or
            ``np.longdouble``).

    Returns:
        ``(squared_distances, squared_normalizer)``: ``(n,)`` array of ``dtype`` and a
        scalar of ``dtype``.
    """
    inv = np.linalg.inv if dtype == np.float64 else _spd_inverse
    delta = np.asarray(delta).astype(dtype)
    y = np.asarray(targets).astype(dtype).reshape(-1)
    conv = np.asarray(convolutions).astype(dtype)
    n = delta.shape[0]
    lam2 = dtype(outputscale) ** 2
    squared = np.empty(n, dtype=dtype)
    for i in range(n):
        order = np.r_[i, np.delete(np.arange(n), i)]
        d = delta[np.ix_(order, order)]
        c = conv[np.ix_(order, order)]
        yy = y[order]
        y1, y_rest = yy[0], yy[1:]
        s = d[0, 0]  # lambda + sigma_1^2
        k1 = d[1:, 0]  # k((x_1, t_1), D~)
        d_rest_inv = inv(d[1:, 1:])  # Delta_{D~}^{-1}
        e = 1 / (s - k1 @ d_rest_inv @ k1)  # eq. (14)
        f = inv(d[1:, 1:] - np.outer(k1, k1) / s)  # eq. (15)
        g = -e * (k1 @ d_rest_inv)  # eq. (16), a row
        h = -(f @ k1) / s  # eq. (17), a column
        m = f - d_rest_inv  # M
        a = e * y1 + g @ y_rest  # Proposition A.2
        b = h * y1 + m.T @ y_rest  # b^T = H^T y_1 + y~^T (F - Delta_{D~}^{-1})
        cc = g + h  # c = G + H^T
        c11, c1r, crr = c[0, 0], c[0, 1:], c[1:, 1:]
        squared[i] = lam2 * (
            (a * a + e) * c11 + (2.0 * a * b + cc) @ c1r + np.sum((np.outer(b, b) + m) * crr)
        )
    delta_inv = inv(delta)
    alpha = delta_inv @ y
    normalizer = lam2 * (alpha @ conv @ alpha + np.sum(delta_inv * conv))
    return squared, normalizer


def naive_relevancies(
    delta: np.ndarray,
    targets: np.ndarray,
    convolutions: np.ndarray,
    outputscale: float,
    *,
    dtype: type = np.float64,
) -> np.ndarray:
    """``(n,)`` normalized criteria ``R_i = sqrt(W_i^2 / W_D^2)`` (eq. 12), naively."""
    squared, normalizer = naive_wasserstein_terms(
        delta, targets, convolutions, outputscale, dtype=dtype
    )
    return np.sqrt(np.maximum(squared, 0) / normalizer)


def _spd_inverse(a: np.ndarray) -> np.ndarray:
    """Inverse of a symmetric positive definite matrix by Gauss-Jordan elimination.

    Works in any NumPy floating type (``np.linalg.inv`` does not take ``longdouble``);
    no pivoting is needed for positive definite matrices.
    """
    n = a.shape[0]
    m = np.concatenate([a, np.eye(n, dtype=a.dtype)], axis=1)
    for k in range(n):
        m[k] /= m[k, k]
        col = m[:, k].copy()
        col[k] = 0
        m -= np.outer(col, m[k])
    return m[:, n:]
