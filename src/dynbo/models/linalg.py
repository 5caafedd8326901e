"""Cholesky factors that change one row at a time.

A TVBO loop adds one observation per iteration and the relevancy-based policies
remove observations one by one, so the GP keeps the lower Cholesky factor ``L`` of
``Delta = K + diag(noise)`` and updates it instead of refactorizing:

* :func:`cholesky_append` (new last row/column) costs one triangular solve, O(n^2);
* :func:`cholesky_delete` (drop row/column ``i``) is a rank-one *update* of the
  trailing block, O(n^2), computed by :func:`cholesky_rank_one_update`.

All functions work on any torch device and dtype (float64 recommended).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import torch

__all__ = [
    "CholeskyJitterWarning",
    "NumericalError",
    "robust_cholesky",
    "cholesky_inverse",
    "cholesky_append",
    "cholesky_delete",
    "cholesky_rank_one_update",
]


class CholeskyJitterWarning(RuntimeWarning):
    """A matrix was not numerically positive definite and jitter was added to its diagonal."""


class NumericalError(RuntimeError):
    """A factorization failed even with the largest allowed jitter."""


def robust_cholesky(
    matrix: torch.Tensor,
    *,
    max_relative_jitter: float = 1e-2,
    warn: bool = True,
    what: str = "covariance matrix",
) -> tuple[torch.Tensor, float]:
    """Lower Cholesky factor of a symmetric matrix, adding jitter only if needed.

    Jitter starts at ``1e-10 * mean(diag)`` and grows tenfold per attempt up to
    ``max_relative_jitter * mean(diag)``.

    Args:
        matrix: ``(n, n)`` symmetric matrix.
        max_relative_jitter: largest jitter tried, relative to the mean diagonal.
        warn: emit a :class:`CholeskyJitterWarning` naming the jitter that was added.
        what: what the matrix is, for the messages.

    Returns:
        ``(L, jitter)`` with ``L L^T = matrix + jitter * I``.

    Raises:
        NumericalError: if the matrix holds NaN/inf or stays indefinite at the largest jitter.
    """
    if not torch.isfinite(matrix).all():
        raise NumericalError(f"{what} contains NaN or infinite entries")
    n = matrix.shape[-1]
    if n == 0:
        return matrix.clone(), 0.0
    factor, info = torch.linalg.cholesky_ex(matrix)
    if int(info) == 0:
        return factor, 0.0
    scale = float(matrix.diagonal().abs().mean())
    scale = scale if scale > 0 else 1.0
    jitter = 1e-10 * scale
    eye = torch.eye(n, dtype=matrix.dtype, device=matrix.device)
    while jitter <= max_relative_jitter * scale * (1 + 1e-12):
        factor, info = torch.linalg.cholesky_ex(matrix + jitter * eye)
        if int(info) == 0:
            if warn:
                warnings.warn(
                    f"{what} ({n}x{n}) was not numerically positive definite; "
                    f"added jitter {jitter:.3g} to its diagonal",
                    CholeskyJitterWarning,
                    stacklevel=2,
                )
            return factor, jitter
        jitter *= 10.0
    raise NumericalError(
        f"Cholesky factorization of the {what} ({n}x{n}) failed even with jitter "
        f"{max_relative_jitter * scale:.3g}; the hyperparameters or inputs are degenerate"
    )


def cholesky_inverse(factor: torch.Tensor) -> torch.Tensor:
    """``(L L^T)^{-1}`` of a lower Cholesky factor ``(n, n)``, in row-major layout.

    LAPACK hands the inverse back column-major; it is symmetric (exactly from a CPU's
    LAPACK, to rounding elsewhere), so its transpose is the same matrix in the row-major
    layout of every other ``(n, n)`` tensor, for free. Mixed layouts make each
    elementwise product with it a strided loop and each flattening a copy (9 copies of
    ``(n, n)`` per Hessian evaluation of the fit), and an in-place update of a copied
    column-major matrix a transposed copy.
    """
    inverse = torch.cholesky_inverse(factor, upper=False)
    if not inverse.is_contiguous() and inverse.mT.is_contiguous():
        inverse = inverse.mT
    return inverse


def cholesky_append(
    factor: torch.Tensor, cross: torch.Tensor, diagonal: float | torch.Tensor
) -> torch.Tensor | None:
    """Factor of ``[[A, b], [b^T, c]]`` from the factor ``L`` of ``A``, in O(n^2).

    Args:
        factor: ``(n, n)`` lower factor of ``A``.
        cross: ``(n,)`` the new column ``b``.
        diagonal: the new diagonal entry ``c``.

    Returns:
        ``(n + 1, n + 1)`` lower factor, or ``None`` when the new pivot
        ``c - |L^{-1} b|^2`` is not safely positive (the caller then refactorizes with
        jitter).
    """
    n = factor.shape[0]
    diagonal = torch.as_tensor(diagonal, dtype=factor.dtype, device=factor.device)
    if n == 0:
        if float(diagonal) <= 0:
            return None
        return diagonal.sqrt().reshape(1, 1)
    row = torch.linalg.solve_triangular(factor, cross.reshape(n, 1), upper=False).reshape(n)
    pivot = diagonal - row.dot(row)
    # A pivot that small relative to c means the new point is numerically a copy of
    # old ones: its square root would carry no correct digits.
    if not bool(torch.isfinite(pivot)) or float(pivot) <= 1e-12 * float(diagonal):
        return None
    out = factor.new_zeros((n + 1, n + 1))
    out[:n, :n] = factor
    out[n, :n] = row
    out[n, n] = pivot.sqrt()
    return out


def cholesky_rank_one_update(factor: torch.Tensor, vector: torch.Tensor) -> torch.Tensor:
    """Lower factor of ``L L^T + v v^T`` from ``L``, in O(n^2) without a Python loop.

    Uses ``L L^T + v v^T = L (I + p p^T) L^T`` with ``p = L^{-1} v``; the factor of
    ``I + p p^T`` is ``D + strict_tril(p g^T)`` with ``beta_k = 1 + sum_{j<=k} p_j^2``,
    ``D_kk = sqrt(beta_k / beta_{k-1})`` and ``g_k = p_k / sqrt(beta_k beta_{k-1})``
    (Gill, Golub, Murray & Saunders 1974, method C1). Column ``k`` of ``L`` times that
    factor is ``D_kk L[:, k] + g_k sum_{i>k} p_i L[:, i]``: a reversed cumulative sum.
    Every ``beta_k >= 1``, so no step can lose positivity (this is an update, never a
    downdate).

    Args:
        factor: ``(m, m)`` lower-triangular with positive diagonal.
        vector: ``(m,)``.

    Returns:
        ``(m, m)`` lower factor.
    """
    m = factor.shape[0]
    if m == 0:
        return factor.clone()
    p = torch.linalg.solve_triangular(factor, vector.reshape(m, 1), upper=False).reshape(m)
    beta = 1.0 + torch.cumsum(p * p, 0)
    beta_prev = torch.cat([beta.new_ones(1), beta[:-1]])
    d = torch.sqrt(beta / beta_prev)
    g = p / torch.sqrt(beta * beta_prev)
    # Work on the transpose (rows = columns of L): torch's cumulative sums are fast on
    # that layout. The reversed cumulative sum is taken on a flipped copy (torch has no
    # negative strides); everything else is in place, so the update allocates two (m, m)
    # buffers.
    rows = factor.T
    tail = rows.flip(0)
    tail.mul_(p.flip(0)[:, None]).cumsum_(0)
    tail = tail.flip(0)  # tail[k] = sum_{i >= k} p_i L[:, i]
    tail.addcmul_(rows, p[:, None], value=-1.0)  # sum over i > k only
    tail.mul_(g[:, None]).addcmul_(rows, d[:, None])
    return tail.T.tril_()


def cholesky_delete(factor: torch.Tensor, index: int) -> torch.Tensor:
    """Factor of ``A`` without row/column ``index``, from the factor of ``A``, in O(n^2).

    With ``L = [[L11, 0, 0], [l21, l22, 0], [L31, l32, L33]]`` the reduced matrix is
    ``[[L11 L11^T, L11 L31^T], [L31 L11^T, L31 L31^T + L33 L33^T + l32 l32^T]]``, so
    only the trailing block changes, by a rank-one update with ``l32``.

    Args:
        factor: ``(n, n)`` lower factor.
        index: row to remove, ``0 <= index < n``.

    Returns:
        ``(n - 1, n - 1)`` lower factor.
    """
    n = factor.shape[0]
    if not 0 <= index < n:
        raise IndexError(f"cannot delete row {index} of a {n}x{n} factor")
    out = factor.new_zeros((n - 1, n - 1))
    out[:index, :index] = factor[:index, :index]
    out[index:, :index] = factor[index + 1 :, :index]
    if index < n - 1:
        out[index:, index:] = cholesky_rank_one_update(
            factor[index + 1 :, index + 1 :], factor[index + 1 :, index]
        )
    return out


def cholesky_delete_rows(factor: torch.Tensor, rows: Sequence[int]) -> torch.Tensor | None:
    """Factor of ``A`` without several rows/columns, by one refactorization of a block.

    With ``f`` the first removed row, the kept rows keep their first ``f`` columns (the
    leading block and the rows below it do not depend on later rows); the trailing
    block is the factor of ``T T^T``, ``T`` the kept rows of ``L[f:, f:]`` (it is the
    Schur complement of the leading block in ``A`` without the removed rows). The
    result is the factor of the same matrix as ``len(rows)`` calls of
    :func:`cholesky_delete`, to rounding, in O(m^2 (n - f)) for ``m`` kept rows after
    ``f``: one matrix product and one Cholesky factorization instead of one rank-one
    update of about ten memory passes per row.

    Args:
        factor: ``(n, n)`` lower factor.
        rows: distinct rows to remove, ``0 <= row < n``, any order.

    Returns:
        ``(n - k, n - k)`` lower factor, or ``None`` when the trailing block is not
        numerically positive definite (then delete the rows one at a time).
    """
    n = factor.shape[0]
    removed = set(rows)
    if len(removed) != len(rows) or not all(0 <= r < n for r in removed):
        raise IndexError(f"rows must be distinct and in [0, {n}), got {list(rows)}")
    if not removed:
        return factor.clone()
    first = min(removed)
    tail = torch.tensor(
        [i for i in range(first + 1, n) if i not in removed], dtype=torch.long, device=factor.device
    )
    kept = n - len(removed)
    out = factor.new_zeros((kept, kept))
    out[:first, :first] = factor[:first, :first]
    block = factor.index_select(0, tail)
    out[first:, :first] = block[:, :first]
    trailing = block[:, first:]
    lower, info = torch.linalg.cholesky_ex(trailing @ trailing.T)
    if int(info) != 0:
        return None
    out[first:, first:] = lower
    return out
