"""The Wasserstein relevancy criterion of W-DBO / BOLT: all n values in O(n^3).

W-DBO (eq. 9-12, Theorem 4.1) measures how much removing observation ``i`` changes the
GP on the future domain ``S x [t0, inf)`` by an upper bound of the 2-Wasserstein
distance between the GP on ``D`` and on ``D \\ {i}``, normalized by the one between the
GP on ``D`` and the prior::

    R_i = W_i / W_D,
    W_i^2 = lambda^2 (alpha_i^2 / P_ii^2 + 1 / P_ii) (P C P)_ii,
    W_D^2 = lambda^2 (alpha^T C alpha + sum_ij P_ij C_ij),

with ``Delta = lambda K + diag(noise)`` the GP's covariance matrix, ``P = Delta^{-1}``,
``alpha = P y`` (standardized targets), ``lambda`` the outputscale and ``C`` the matrix
of products of kernel self-convolutions (:func:`convolution_matrix`). The numerator is
the paper's eq. (10) after substituting the Lemma A.1 quantities, which are all
entries of ``P`` (derivation in ``docs/relevancy.md``; the per-observation formula is
kept in :mod:`dynbo.relevancy.reference` and the tests check that both agree). With
``Q = C P``, ``(P C P)_ii = sum_j P_ji Q_ji`` and ``sum_ij P_ij C_ij = trace(Q)``.

Cost: one ``cholesky_inverse`` of the GP's factor, one ``(n, n)`` matrix product
``Q = C P`` and O(n^2) elementwise work, instead of n dense solves of size n - 1.
After a removal every quantity is updated by rank-one terms in O(n^2)
(:meth:`WassersteinRelevancy.remove`); W-DBO's removal loop makes the same choices in
batches, O(n) of vector updates and one matrix-vector product per removal and one rank-k
update per batch (:meth:`WassersteinRelevancy.remove_least_relevant`).
"""

from __future__ import annotations

import bisect
import math
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch
from scipy.linalg.blas import dger, sger

from dynbo.kernels import FamilyLike
from dynbo.models.kernel import Hyperparameters, KernelSpec
from dynbo.models.linalg import cholesky_inverse, robust_cholesky
from dynbo.relevancy.convolutions import (
    PAPER_NOISE_FLOOR,
    spatial_convolution_matrix,
    temporal_convolution_matrix,
)

if TYPE_CHECKING:
    from dynbo.models.gp import SpatioTemporalGP

__all__ = [
    "Removals",
    "convolution_matrix",
    "wasserstein_terms",
    "wasserstein_relevancies",
    "WassersteinRelevancy",
]


def convolution_matrix(
    inputs: torch.Tensor,
    *,
    spatial: FamilyLike,
    temporal: FamilyLike,
    lengthscale_space: torch.Tensor | list[float] | tuple[float, ...] | float,
    lengthscale_time: float,
    present_time: torch.Tensor | float,
    paper_compat: bool = False,
) -> torch.Tensor:
    """The matrix ``C`` of Theorem 4.1: ``C_ij = (k_S * k_S)(x_j - x_i) I(t_i, t_j; t0)``.

    Args:
        inputs: ``(n, d + 1)`` rows ``(x, t)``: ``x`` in the unit box, ``t`` in the time unit.
        spatial: family of ``k_S``.
        temporal: family of ``k_T``.
        lengthscale_space: 1 or d spatial lengthscales (unit-box units).
        lengthscale_time: ``l_T`` (time unit).
        present_time: ``t0`` (time unit). Observations after ``t0`` are allowed: the
            temporal integral over ``[t0, inf)`` is then evaluated exactly.
        paper_compat: reproduce the authors' package (capped spatial convolution, the
            printed SE temporal formula); see :mod:`dynbo.relevancy.convolutions`.

    Returns:
        ``(n, n)`` symmetric tensor (unit-box volume times time unit), dtype and device
        of ``inputs``.
    """
    if inputs.ndim != 2 or inputs.shape[1] < 2:
        raise ValueError(f"inputs must be (n, d + 1) with d >= 1, got {tuple(inputs.shape)}")
    x, t = inputs[:, :-1], inputs[:, -1]
    space = spatial_convolution_matrix(spatial, x, x, lengthscale_space, paper_compat=paper_compat)
    time = temporal_convolution_matrix(
        temporal, t, lengthscale_time, present_time, paper_compat=paper_compat
    )
    return space.mul_(time)


def wasserstein_terms(
    precision: torch.Tensor,
    alpha: torch.Tensor,
    convolutions: torch.Tensor,
    outputscale: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Un-normalized criteria ``W_i^2`` and normalizer ``W_D^2`` (eq. 10-11) in O(n^3).

    Args:
        precision: ``(n, n)`` ``P = Delta^{-1}`` (symmetric positive definite).
        alpha: ``(n,)`` ``P y`` for the standardized targets ``y``.
        convolutions: ``(n, n)`` symmetric ``C`` (:func:`convolution_matrix`).
        outputscale: ``lambda``.

    Returns:
        ``(squared_distances, squared_normalizer)``: ``(n,)`` ``W_i^2`` and the scalar
        ``W_D^2``, both in (standardized target units)^2 times the units of ``C``.
    """
    product = convolutions @ precision
    return _terms(precision, alpha, product, convolutions @ alpha, float(outputscale) ** 2, None)


def _terms(
    precision: torch.Tensor,
    alpha: torch.Tensor,
    product: torch.Tensor,
    c_alpha: torch.Tensor,
    lam2: float,
    buffer: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``W_i^2`` and ``W_D^2`` from ``P``, ``alpha``, ``Q = C P`` and ``C alpha``: O(n^2)."""
    pii = precision.diagonal()
    # (P C P)_ii = sum_j P_ji Q_ji. C is positive semi-definite (a Gram matrix of
    # functions), so the true value is >= 0; rounding may leave -eps, clamped.
    pcp = _column_dots(precision, product, buffer).clamp_min_(0.0)
    squared = (alpha * alpha + pii).div_(pii * pii).mul_(pcp).mul_(lam2)
    # sum_ij P_ij C_ij = trace(P C) = trace(C P) = trace(Q): no pass over C needed.
    normalizer = (alpha.dot(c_alpha) + product.diagonal().sum()) * lam2
    return squared, normalizer


_BLOCK_ROWS = 64

#: BLAS rank-one updates by dtype: a routine of another precision would convert a copy
#: and leave the matrix as it was (dger on float32 storage did, before this table)
_GER = {np.float64: dger, np.float32: sger}

#: largest storage (n at the last compaction) for which CPU removals run in NumPy.
_HOST_MAX_STORAGE = 512

#: the storage is compacted once fewer than this share of its rows are live: each removal
#: step reads all of ``P``, and on one CPU thread the loop took 8-21 % less time at 600
#: to 3000 observations compacting at three quarters than at half (0.9: 12 % slower
#: than 0.75 at 600, within 5 % at 1500 and 3000, with up to three times the
#: compactions, each a capture on CUDA; ``benchmarks/removal_compaction.py``,
#: ``docs/relevancy.md``)
_COMPACT_BELOW = 0.75

#: candidates per expected step of a torch removal batch off CUDA (:class:`_RemovalBatch`;
#: 0: each step makes its own product ``P q``, one read of ``P``; a CPU runs torch steps
#: only in speculative loops, its default loop steps in NumPy): on W-DBO's states of
#: 600 to 3000 observations on one thread, the loop with 2 per step took 1.01, 0.80 and
#: 0.54 of the time of a product per step (4 per step: 1.15, 1.01 and 0.65), though 17
#: of its batches ended early at 3000 (``benchmarks/removal_candidates.py``,
#: ``docs/relevancy.md``)
_CANDIDATES_PER_STEP = 2

#: the same on a GPU, where the batch's one matrix product costs little and a miss (a
#: batch ended early: a host synchronization and a new batch) costs more: at 10,000
#: observations on an H200 the loop took 0.93 s with 8 per step, 1.08 s with 4 (78
#: batches ended early), 1.11 s with 16 and 1.53 s with none
#: (``benchmarks/removal_candidates.py``, ``docs/relevancy.md``)
_CUDA_CANDIDATES_PER_STEP = 8


def _candidates_per_step(P: torch.Tensor) -> int:
    """Candidates per expected step of the torch removal steps on the storage ``P``.

    0 (each step makes its own product ``P q``) where ``P`` fits the GPU's L2 cache:
    reading it once per step then costs less than the batch's matrix product (on an
    H200 the loop took 0.074 and 0.123 s without candidates at 1000 and 2000
    observations, ``P`` of 8 and 32 MB, 0.082-0.084 and 0.130-0.135 s with 4 to 16 per
    step; at 4000, 128 MB, 0.293 s without and 0.275-0.287 s with;
    ``benchmarks/removal_candidates.py``). A torch that does not report the cache's
    size (before 2.5) gets the candidates at every size.
    """
    if P.device.type != "cuda":
        return _CANDIDATES_PER_STEP
    cache = getattr(torch.cuda.get_device_properties(P.device), "L2_cache_size", 0)
    if P.numel() * P.element_size() <= cache:
        return 0
    return _CUDA_CANDIDATES_PER_STEP


def _column_dots(a: torch.Tensor, b: torch.Tensor, buffer: torch.Tensor | None) -> torch.Tensor:
    """``sum_i a_ij b_ij`` for every column ``j``, by blocks of rows.

    On a CPU a ``(64, n)`` product buffer stays in cache where an ``(n, n)`` temporary
    would not (1.6x faster at n = 2000 on one core); a GPU prefers one big kernel.
    """
    if a.device.type != "cpu":
        return (a * b).sum(0)
    rows = a.shape[0]
    if buffer is None:
        shape = (max(1, min(_BLOCK_ROWS, rows)), a.shape[1])
        buffer = torch.empty(shape, dtype=a.dtype, device=a.device)
    out = torch.zeros(a.shape[1], dtype=a.dtype, device=a.device)
    for start in range(0, rows, buffer.shape[0]):
        stop = min(start + buffer.shape[0], rows)
        block = buffer[: stop - start]
        torch.mul(a[start:stop], b[start:stop], out=block)
        out.add_(block.sum(0))
    return out


def _normalize(squared: torch.Tensor, normalizer: torch.Tensor) -> torch.Tensor:
    # W_D^2 = 0 only when every C_ij underflowed (all data infinitely stale): then no
    # observation can move the future predictions and every relevancy is 0.
    den = float(normalizer)
    if not den > 0.0:
        return torch.zeros_like(squared)
    return squared.div(den).sqrt_()


@dataclass(frozen=True)
class Removals:
    """What :meth:`WassersteinRelevancy.remove_least_relevant` removed, in removal order.

    Attributes:
        indices: each removed observation's index in the dataset as it was just before
            its removal (what :meth:`WassersteinRelevancy.remove` and
            :meth:`dynbo.models.SpatioTemporalGP.remove` take, one after another).
        origins: each removed observation's index in the dataset the criterion was
            built from.
        relevancies: each one's ``R_i`` (eq. 12, dimensionless) when it was removed.
        budget: the removal budget left (dimensionless; ``inf`` stays ``inf``).
        stopped_by: ``"budget"`` (the next least relevant observation costs more than
            the budget, or the budget is 1 or less), ``"limit"`` (``limit`` removals)
            or ``"stop"`` (the ``stop`` callback returned ``True``).
        batches: starting states computed (one O(n^2) pass over ``P`` and ``Q`` each;
            a CUDA capture's warm-up not counted).
        steps: removals computed, including those a speculative batch computed past
            the loop's end or after a miss and discarded (a CUDA capture's warm-up step
            not counted).
        misses: batches ended early because a removal was not among the batch's
            candidates (torch steps; the removal stands and the next batch starts after
            it, where the batch had steps left).
    """

    indices: list[int]
    origins: list[int]
    relevancies: list[float]
    budget: float
    stopped_by: str
    batches: int
    steps: int
    misses: int = 0


def _steps_in_numpy(storage: torch.Tensor, numpy_steps: bool) -> bool:
    """Whether a removal batch on ``storage`` steps in NumPy (:class:`_HostViews`): asked
    for (``numpy_steps``, the loop's non-speculative mode), on a CPU, in float32/64."""
    return (
        numpy_steps
        and storage.device.type == "cpu"
        and storage.dtype in (torch.float32, torch.float64)
    )


class _RemovalBatch:
    """Up to ``capacity`` least-relevant removals after one another, from one starting state.

    The state after ``k`` removals ``o_1 .. o_k`` is the starting one minus the rank-one
    terms of :meth:`WassersteinRelevancy.remove`: ``P_k = P - sum_j u_j u_j^T / pi_j`` and
    ``Q_k = Q - sum_j q_j u_j^T / pi_j``, with ``u_j = P_{j-1}[:, o_j]``, ``q_j =
    Q_{j-1}[:, o_j]`` and ``pi_j = P_{j-1}[o_j, o_j]`` (rows of removed observations
    zeroed). The batch keeps those columns instead of updating the ``(n, n)`` matrices,
    and updates only what the criterion reads, in O(n) each: ``P_ii``, ``Q_ii``,
    ``alpha``, ``C alpha`` and ``(P C P)_ii``. A step then reads one column of ``P`` and
    ``Q`` and makes O(n capacity) corrections, in a fixed number of tensor operations
    (32 kernels; none of them Python-level O(n) work) and without a host
    synchronization: it takes its argmin on the device, so that a GPU runs a whole batch
    before the host reads anything.

    The one O(n^2) product a step needs, ``P_k q`` with ``q = Q_k[:, o]``, comes from
    products made before the batch (the NumPy steps make it at each step instead):
    :meth:`load` takes the ``c x steps`` live observations of least relevancy
    (:func:`_candidates_per_step`: ``c`` = 2 on a CPU, on a GPU 8 or none; with 4 or 8
    per step the batch's removals were all among them on W-DBO's states of 600 to 3000
    observations, with 2 all but 17 at 3000, ``benchmarks/removal_candidates.py``) and
    makes
    ``P Q[:, c]`` for them in one matrix product, which a GPU runs at its arithmetic
    rate where ``steps`` products ``P q`` would each read all of ``P``. With
    ``t_j = P q_j`` kept per step,
    ``P q_k = (P Q)[:, o_k] - sum_j (u_j[o_k] / pi_j) t_j`` and
    ``P_k q_k = P q_k - sum_j u_j (u_j . q_k) / pi_j``, both O(n capacity). For that
    recursion the stored ``q_j`` keep their entries at the rows removed earlier in the
    batch: the terms never read them (the later ``u_j`` are zero there), ``P_k`` is
    zero in those columns to rounding, so that they add to ``P_k q_k`` only rounding,
    and :meth:`commit` zeroes them with the removed rows. A step whose ``o`` is not
    among the candidates (a miss) still chooses and records its removal exactly, but
    the terms after it are wrong (a row of zeros stands in for its product): the host
    finds it among the positions it reads back, and the loop accepts the batch up to
    that step and starts the next batch there. The candidates' product row is gathered
    and corrected with the columns (one row of ``u_j, q_j, t_j, u_j / pi_j`` per step),
    so that the step has as many kernels as one that makes its own product.

    The torch step is the same kernels on the same buffers at every step: the step index
    lives on the device, the corrections run over every row of the buffers (the rows past
    the steps taken are zero) and each step's results are stored at its row by index.
    One captured step therefore replays as any step (:class:`_GraphedRemovalStep`).

    One batch serves every batch of a loop on one storage (:meth:`load` starts it over);
    a compaction moves the storage and makes it :meth:`stale`.
    """

    def __init__(
        self, relevancy: WassersteinRelevancy, capacity: int, *, numpy_steps: bool = True
    ) -> None:
        P = relevancy._P
        n = P.shape[0]
        self.capacity = capacity
        self.count = 0
        self._relevancy = relevancy
        self._storage = relevancy._PQ
        terms = P.new_empty((5, n))
        self._terms = terms
        self._pii, self._alpha, self._c_alpha, self._pcp = terms[0], terms[2], terms[3], terms[4]
        self._live = torch.empty(n, dtype=torch.bool, device=P.device)
        self._infinity = P.new_full((), math.inf)
        on_cpu = P.device.type == "cpu"
        # on a CPU the steps run in NumPy on views of the same memory: a step is about 30
        # small operations, and NumPy's cost per operation is a fraction of torch's
        # (numpy_steps=False: the torch steps a GPU runs, e.g. to count them)
        numpy_steps = _steps_in_numpy(P, numpy_steps)
        # per step j: u_j and q_j, and u_j / pi_j (zero past the steps taken); for the
        # NumPy steps contiguous, as NumPy's products want (_torch_step_rows: the torch
        # steps' layout)
        self._columns = P.new_zeros((capacity, 2, n))
        self._scaled = P.new_zeros((capacity, n))
        # per step j: W_{o_j}^2 / lambda^2, W_D^2 / lambda^2 and alpha_{o_j} / pi_j (one
        # row, stored by one kernel) and the storage position o_j
        self._scalars = P.new_zeros((capacity, 3))
        self._records = self._scalars[:, 0:2]
        self._alpha_steps = self._scalars[:, 2]
        self._positions = torch.zeros(capacity, dtype=torch.long, device=P.device)
        # the torch step's index and its results before they are stored at that row
        self._step = torch.zeros(1, dtype=torch.long, device=P.device)
        self._step_vectors = P.new_empty((4, n))  # u, q, P q, u / pi
        self._step_scalars = P.new_empty(3)
        self._step_position = torch.empty(1, dtype=torch.long, device=P.device)
        self._host_records = self._records.numpy() if on_cpu else None
        self._host_positions = self._positions.numpy() if on_cpu else None
        self._host = _HostViews(self) if numpy_steps else None
        if self._host is None:
            self._torch_step_rows()
        # the torch steps' candidates (none for the NumPy steps, or where
        # _candidates_per_step is 0: a step then makes its own product P q): rows
        # (P Q[:, c])^T and one row of zeros that stands in for a non-candidate's, each
        # observation's row, and the candidates (on the device; the host reads them to
        # find a miss)
        self._per_step = 0 if self._host is not None else _candidates_per_step(P)
        rows = min(self._per_step * capacity, n)
        self._candidate_products = P.new_zeros((rows + 1 if rows else 0, n))
        self._candidate_row = torch.full((n,), rows, dtype=torch.long, device=P.device)
        self._candidates: torch.Tensor | None = None

    def _torch_step_rows(self) -> None:
        """The torch steps' layout: per step j, one row of ``u_j``, ``q_j``, ``t_j = P q_j``
        (from the candidates) and ``u_j / pi_j``, stored by one kernel."""
        capacity, _, n = self._columns.shape
        self._columns = self._columns.new_zeros((capacity, 4, n))
        self._scaled = self._columns[:, 3]

    def stale(self) -> bool:
        """Whether the relevancy's storage moved since the batch was made (a compaction
        copies it once a quarter of it is dead): the batch reads the old storage."""
        return self._storage is not self._relevancy._PQ

    def load(self, steps: int | None = None) -> None:
        """Start over (no step taken) from the relevancy's current state, in the same buffers.

        ``steps``: the steps the batch is expected to take (default: its capacity); the
        torch steps take ``c x steps`` candidates (:func:`_candidates_per_step`; fewer
        where fewer are live).
        """
        rel = self._relevancy
        # the starting state's terms, as _terms computes them: P_ii, Q_ii, alpha, C alpha
        # and (P C P)_ii = sum_j P_ji Q_ji, over the storage (removed entries are 0)
        terms = self._terms
        terms[0].copy_(rel._P.diagonal())
        terms[1].copy_(rel._Q.diagonal())
        terms[2:4].copy_(rel._AC)
        terms[4].copy_(rel._storage_column_dots())
        self._live.zero_().index_fill_(0, rel._live_index, True)
        if self._host is not None:
            self._host.squared.fill(np.inf)
        else:
            if self.count:
                # the torch step's corrections read every row: the previous run's go to zero
                self._columns[: self.count].zero_()
            if self._candidate_products.shape[0]:
                self._load_candidates(self.capacity if steps is None else steps)
        self._step.zero_()
        self.count = 0

    def _load_candidates(self, steps: int) -> None:
        """The candidates of the next ``steps`` torch steps and their products ``P Q[:, c]``.

        The ``c x steps`` least relevant live observations, among them the first step's
        choice (by the same kernels as the step's), without a host synchronization.
        """
        rel = self._relevancy
        rows = self._candidate_products.shape[0] - 1  # the last stands in for the others
        count = min(rows, len(rel._live), self._per_step * steps)
        key = self._key()
        first = torch.min(key, 0, True)[1]
        # equal values in the order of their index, as the steps' argmins take them (all
        # relevancies are equal where W_D = 0)
        candidates = torch.sort(key, stable=True)[1][:count]
        # the first step's choice among them (a NaN key, which the argmin takes and the
        # sort puts last): then in place of the last, the most relevant one
        last = candidates[-1:]
        last.copy_(torch.where((candidates == first).any(), last, first))
        slots = torch.arange(count, device=candidates.device)
        self._candidate_row.fill_(rows).index_copy_(0, candidates, slots)
        self._candidates = candidates
        # rows (P Q[:, c])^T = Q[:, c]^T P, P being symmetric: one matrix product
        torch.mm(rel._Q.index_select(1, candidates).T, rel._P, out=self._candidate_products[:count])

    def _key(self) -> torch.Tensor:
        """``(n,)`` the step's argmin key: ``W_i^2 / lambda^2`` of the live entries (0 for
        all where ``W_D = 0``), inf at the removed ones; ``W_D^2 / lambda^2`` goes to the
        step's scalars."""
        terms, live = self._terms, self._live
        pii, alpha, c_alpha, pcp = self._pii, self._alpha, self._c_alpha, self._pcp
        # W_i^2 / lambda^2 (eq. 10) and W_D^2 / lambda^2 (eq. 11): lambda^2 is common
        squared = torch.addcmul(pii, alpha, alpha).div_(pii * pii).mul_(pcp.clamp_min(0.0))
        scalars = self._step_scalars
        normalizer = torch.sum(torch.addcmul(terms[1], alpha, c_alpha), 0, True, out=scalars[1:2])
        # W_D = 0: every relevancy is 0 (_normalize) and the first observation the argmin
        return torch.where(live, squared.mul_(normalizer > 0), self._infinity)

    def step(self) -> None:
        """One more removal: the least relevant live observation, chosen on the device."""
        if self._host is not None:
            self._host.step(self.count)
            self.count += 1
            return
        n = self._live.shape[0]
        terms, live, pcp = self._terms, self._live, self._pcp
        scalars = self._step_scalars
        # the least live value and its first index (argmin's, on ties), in one kernel
        o = torch.min(self._key(), 0, True, out=(scalars[0:1], self._step_position))[1]
        # columns o of P_k and Q_k (and P q_k from o's candidate row): the starting ones
        # minus the batch's rank-one terms (over every row: those of the steps not taken
        # yet are zero). A non-candidate's row is zeros: the terms after this step are
        # then wrong, and the loop voids the steps after it (a miss, found by the host)
        vectors = self._step_vectors
        uq = torch.index_select(self._relevancy._PQ, 2, o, out=vectors[0:2, :, None])
        uq = uq.view(2, n)
        weights = self._scaled.index_select(1, o).view(1, self.capacity)
        candidates = self._candidate_products.shape[0] > 0
        if candidates:
            row = self._candidate_row.index_select(0, o)
            torch.index_select(self._candidate_products, 0, row, out=vectors[2:3])
        corrected = vectors[0:3] if candidates else vectors[0:2]
        corrected.view(1, -1).addmm_(
            weights, self._columns[:, : corrected.shape[0]].view(self.capacity, -1), alpha=-1.0
        )
        # u at the live rows only; q keeps the rows removed in this batch (see the class)
        u, q = uq[0].mul_(live), uq[1]
        t = vectors[2] if candidates else torch.mv(self._relevancy._P, q, out=vectors[2])
        # s = P_k q = (P_k C P_k)[:, o] (its removed entries only meet zeros of u below)
        s = torch.addmv(t, self._columns[:, 0].T, torch.mv(self._scaled, q), alpha=-1.0)
        # P_k[o, o], alpha_o and (P_k C P_k)[o, o] as the terms hold them
        at_o = terms.index_select(1, o)
        step_alpha = torch.div(at_o[2], at_o[0], out=scalars[2:3])
        s_o = at_o[4]
        u_scaled = torch.div(u, at_o[0], out=vectors[3])
        # remove()'s rank-one updates, on the diagonals and vectors only:
        # P_ii -= u_i^2 / pi, Q_ii -= q_i u_i / pi, [alpha; C alpha] -= [u; q] alpha_o / pi
        # and (P C P)_ii -= 2 s_i u_i / pi - u_i^2 s_o / pi^2
        terms[0:2].addcmul_(uq, u_scaled, value=-1.0)
        terms[2:4].addcmul_(uq, step_alpha, value=-1.0)
        pcp.addcmul_(u_scaled, torch.addcmul(s, u_scaled, s_o, value=-0.5), value=-2.0)
        terms.index_fill_(1, o, 0.0)  # exact zeros, as remove() leaves them
        live.index_fill_(0, o, False)
        # this step's results at its row
        k = self._step
        self._columns.index_copy_(0, k, vectors[None])
        self._scalars.index_copy_(0, k, scalars[None])
        self._positions.index_copy_(0, k, o)
        k.add_(1)
        self.count += 1

    def records(self) -> list[tuple[int, float, float, bool]]:
        """``(storage position, W^2 / lambda^2, W_D^2 / lambda^2, exact after)`` of each step.

        ``exact after``: whether the terms after the step are exact, i.e. its removal was
        among the torch steps' candidates (see the class: after a miss the steps are
        void). Two or three device-to-host copies (on a CPU, views and the candidates).
        """
        positions = self._positions[: self.count].tolist()
        if self._host_records is not None:
            rows = self._host_records[: self.count].tolist()
        else:
            rows = self._records[: self.count].tolist()
        if self._candidates is None:
            return [
                (p, squared, normalizer, True) for p, (squared, normalizer) in zip(positions, rows)
            ]
        candidates = set(self._candidates.tolist())
        return [
            (p, squared, normalizer, p in candidates)
            for p, (squared, normalizer) in zip(positions, rows)
        ]

    def record(self, step: int) -> tuple[int, float, float, bool]:
        """:meth:`records` of one step (the NumPy steps: reads of views, no tensor operation)."""
        if self._host_records is None or self._host_positions is None or self._host is None:
            return self.records()[step]
        squared, normalizer = self._host_records[step]
        return int(self._host_positions[step]), float(squared), float(normalizer), True

    def commit(self, count: int) -> None:
        """Apply the first ``count`` steps to the relevancy's storage (a rank-``count`` update)."""
        if count == 0:
            return
        rel = self._relevancy
        n = self._live.shape[0]
        columns = self._columns[:count, 0:2].view(count, 2 * n)
        # [P; Q] -= [U; Q_c]^T (U / pi): remove()'s count rank-one updates at once
        rel._PQ.view(2 * n, n).addmm_(columns.T, self._scaled[:count], alpha=-1.0)
        # [alpha; C alpha] -= [U; Q_c]^T (alpha_o / pi)
        rel._AC.view(2 * n).addmv_(columns.T, self._alpha_steps[:count], alpha=-1.0)
        positions = self._positions[:count]
        rel._PQ.index_fill_(1, positions, 0.0).index_fill_(2, positions, 0.0)
        rel._AC.index_fill_(1, positions, 0.0)


class _GraphedRemovalStep:
    """The torch step of one removal batch on a CUDA device, replayed from a graph.

    A torch step is a fixed sequence of small kernels (32) on buffers that do not move,
    the same at every step (:class:`_RemovalBatch`): issuing them one by one from Python
    was most of the loop's time on a GPU at n = 1000 (0.38 ms per removal on an H200).
    The step is captured once per storage into a CUDA graph and every later step of the
    loop, in every batch on that storage, is one replay (a few microseconds of the host's
    time). The replay runs the same kernels on the same buffers, so its results are those
    of the eager steps bit for bit. A capture runs one step eagerly first (on the capture
    stream, as torch's capture asks), then issues one without running it, and
    instantiates a graph of one step's nodes.
    """

    def __init__(self, batch: _RemovalBatch) -> None:
        device = batch._live.device
        self.batch = batch
        self._graph = torch.cuda.CUDAGraph()
        # one capture at a time per process: the device's capture stream is shared by
        # every thread (the service runs studies in threads), and what another thread
        # issued on it mid-capture would be recorded into this graph
        with _CAPTURE_LOCK:
            stream = _capture_stream(device)
            stream.wait_stream(torch.cuda.current_stream(device))
            with torch.cuda.stream(stream):
                # warm-up on the capture stream (its cuBLAS handle and workspace); the
                # loop's load() starts the batch over before its steps
                batch.load()
                batch.step()
            torch.cuda.current_stream(device).wait_stream(stream)
            # capture_begin/end rather than torch.cuda.graph, whose entry also empties
            # the allocator's cache (and may collect garbage): per loop, a cost the
            # replays must earn. "thread_local": other threads' synchronizing calls
            # (a read of a scalar, a host-to-device copy) stay legal during the capture
            torch.cuda.synchronize(device)
            with torch.cuda.stream(stream):
                self._graph.capture_begin(capture_error_mode="thread_local")
                try:
                    batch.step()
                finally:
                    self._graph.capture_end()

    def run(self, steps: int) -> None:
        """``steps`` more steps of the batch (after its :meth:`_RemovalBatch.load`)."""
        for _ in range(steps):
            self._graph.replay()
        self.batch.count += steps


#: one capture stream per CUDA device: cuBLAS keeps a workspace per (handle, stream) for
#: the process's life, so a fresh stream per capture (from torch's pool of 32) would
#: hold one more workspace per capture, up to 32
_CAPTURE_STREAMS: dict[torch.device, torch.cuda.Stream] = {}

#: held by a capture from its warm-up to its end (and while a capture stream is made)
_CAPTURE_LOCK = threading.RLock()

#: a loop captures its step once a batch of at least this many steps is due (after 3
#: removals), so that a loop of a few removals, W-DBO's usual iteration, never captures:
#: a capture costs its warm-up step, one O(n^2) load, a device synchronization and the
#: instantiation of a graph of one step (estimated at 0.15 ms from the 4.6 us per node
#: of the 64-step graphs profiled on an H200), about two eager steps; not yet measured
_CAPTURE_FROM_STEPS = 4


def _capture_stream(device: torch.device) -> torch.cuda.Stream:
    """The stream removal steps on ``device`` are captured on (made once)."""
    stream = _CAPTURE_STREAMS.get(device)
    if stream is None:
        stream = _CAPTURE_STREAMS[device] = torch.cuda.Stream(device)
    return stream


def _graphs_supported(device: torch.device) -> bool:
    """Whether removal steps on ``device`` can be replayed from a CUDA graph."""
    return device.type == "cuda"


def _capture(batch: _RemovalBatch) -> _GraphedRemovalStep | None:
    """A graphed step of ``batch``, or ``None`` (with a warning) where this CUDA setup
    cannot capture one: the loop then runs its steps eagerly, with the same results."""
    try:
        return _GraphedRemovalStep(batch)
    except RuntimeError as err:
        warnings.warn(
            f"removal steps run without a CUDA graph (capture failed: {err})",
            RuntimeWarning,
            stacklevel=3,
        )
        return None


class _HostViews:
    """:meth:`_RemovalBatch.step` in NumPy, on views of a CPU batch's tensors.

    The same operations in the same order as the torch step (the argmin is NumPy's, the
    first index on exact ties as torch's); the results agree to rounding (NumPy does not
    fuse a multiply and an add, and sums in another order), so the choices are those of
    the torch step except between values equal to rounding.
    """

    def __init__(self, batch: _RemovalBatch) -> None:
        rel = batch._relevancy
        self.terms = batch._terms.numpy()
        self.live = batch._live.numpy()
        self.columns = batch._columns.numpy()
        self.scaled = batch._scaled.numpy()
        self.alpha_steps = batch._alpha_steps.numpy()
        self.positions = batch._positions.numpy()
        self.records = batch._records.numpy()
        self.pq = rel._PQ.numpy()
        self.p = rel._P.numpy()
        # W_i^2 / lambda^2 of the live entries and inf at the removed ones (load() and
        # each step set those): the argmin's key as it is
        self.squared = np.full_like(self.terms[0], np.inf)

    def step(self, k: int) -> None:
        """Step ``k`` of the batch (``k`` steps done before it)."""
        terms, live = self.terms, self.live
        pii, qii, alpha, c_alpha, pcp = terms
        record = self.records[k]
        # W_i^2 / lambda^2 (eq. 10) and W_D^2 / lambda^2 (eq. 11), as the torch step; only
        # at the live entries (the removed ones would be 0 / 0; they stay inf, so that the
        # argmin needs no key of its own): no warning to silence, where an errstate per
        # step cost a tenth of the step
        squared = np.divide(pii + alpha * alpha, pii * pii, out=self.squared, where=live)
        np.multiply(squared, np.maximum(pcp, 0.0), out=squared, where=live)
        # the removed entries of qii, alpha and C alpha are 0
        normalizer = float(np.add.reduce(qii) + alpha @ c_alpha)
        record[1] = normalizer
        if normalizer > 0:
            o = int(squared.argmin())
            record[0] = squared[o]
        else:
            # W_D = 0: every relevancy is 0 (recorded so) and the first live observation
            # the argmin
            o = int(live.argmax())
            record[0] = 0.0
        self.positions[k] = o
        n = live.shape[0]
        uq = self.columns[k]
        uq[...] = self.pq[:, :, o]
        if k:
            flat = uq.reshape(2 * n)
            flat -= self.scaled[:k, o] @ self.columns[:k].reshape(k, 2 * n)
        uq *= live
        u, q = uq[0], uq[1]
        s = self.p @ q
        if k:
            s -= self.columns[:k, 0].T @ (self.scaled[:k] @ q)
        at_o = terms[:, o].copy()
        # a zero pivot (P_oo = 0: a singular P, never a positive definite one) gives inf
        # or nan as in torch, and NumPy warns
        step_alpha = at_o[2] / at_o[0]
        self.alpha_steps[k] = step_alpha
        u_scaled = self.scaled[k]
        np.divide(u, at_o[0], out=u_scaled)
        terms[0:2] -= uq * u_scaled
        terms[2:4] -= uq * step_alpha
        pcp -= 2.0 * u_scaled * (s - 0.5 * u_scaled * at_o[4])
        terms[:, o] = 0.0
        live[o] = False
        squared[o] = np.inf


class WassersteinRelevancy:
    """All n relevancies of a dataset, with O(n^2) updates after each removal.

    Holds ``P = Delta^{-1}``, ``alpha = P y``, ``C``, ``Q = C P`` and ``C alpha`` for the
    current dataset. It never refits or refactorizes anything: after :meth:`remove` it
    describes the GP with the same hyperparameters and the same standardized targets
    minus one observation, exactly what :meth:`dynbo.models.SpatioTemporalGP.remove`
    leaves (the caller removes the observation from its GP separately).

    Args:
        precision: ``(n, n)`` ``P`` (copied).
        alpha: ``(n,)`` ``P y`` (copied).
        convolutions: ``(n, n)`` symmetric ``C`` (kept, never modified).
        outputscale: ``lambda``.

    Most callers use :meth:`from_gp`. Indices passed to :meth:`remove` and the order of
    :meth:`relevancies` refer to the current dataset, as in the GP.
    """

    def __init__(
        self,
        precision: torch.Tensor,
        alpha: torch.Tensor,
        convolutions: torch.Tensor,
        outputscale: float,
    ) -> None:
        n = precision.shape[0]
        if precision.shape != (n, n) or convolutions.shape != (n, n) or alpha.shape != (n,):
            raise ValueError(
                "precision and convolutions must be (n, n) and alpha (n,), got "
                f"{tuple(precision.shape)}, {tuple(convolutions.shape)}, {tuple(alpha.shape)}"
            )
        self._setup(precision, alpha, convolutions.contiguous(), outputscale)

    def _setup(
        self,
        precision: torch.Tensor,
        alpha: torch.Tensor,
        convolutions: torch.Tensor,
        outputscale: float,
    ) -> None:
        # Copies `precision` and `alpha` into its own storage. The removal updates work
        # in place on this (n, n) storage: removed rows and columns of P and Q and entries
        # of alpha and C alpha are zeroed, so sums over the storage are sums over the
        # remaining observations, and no matrix is copied per removal.
        n = precision.shape[0]
        self._C = convolutions
        self._store(precision, None, alpha, None)
        self._lam2 = float(outputscale) ** 2
        self._live = list(range(n))  # storage positions of the current observations
        self._live_tensor: torch.Tensor | None = None
        self._live_array: np.ndarray | None = None
        self._origin = torch.arange(n, device=precision.device)  # storage -> initial index
        self._origin_list = list(range(n))  # the same on the host
        self._buffer: torch.Tensor | None = None
        self._cache: tuple[torch.Tensor, torch.Tensor] | None = None
        self._relevancy_cache: torch.Tensor | None = None
        self._host_views: tuple[np.ndarray, ...] | None = None
        self._host: bool | None = None

    def _store(
        self,
        precision: torch.Tensor,
        product: torch.Tensor | None,
        alpha: torch.Tensor,
        c_alpha: torch.Tensor | None,
    ) -> None:
        # P and Q share one (2, n, n) tensor, alpha and C alpha one (2, n): a batch of
        # removals (remove_least_relevant) gathers a column of both, and updates both,
        # with one kernel each. _P, _Q, _alpha and _c_alpha are views of them.
        n = precision.shape[0]
        stacked = precision.new_empty((2, n, n))
        stacked[0].copy_(precision)
        if product is None:
            torch.matmul(self._C, stacked[0], out=stacked[1])
        else:
            stacked[1].copy_(product)
        vectors = alpha.new_empty((2, n))
        vectors[0].copy_(alpha)
        if c_alpha is None:
            torch.mv(self._C, vectors[0], out=vectors[1])
        else:
            vectors[1].copy_(c_alpha)
        self._PQ, self._P, self._Q = stacked, stacked[0], stacked[1]
        self._AC, self._alpha, self._c_alpha = vectors, vectors[0], vectors[1]

    # ------------------------------------------------------------------ builders
    @classmethod
    def from_factor(
        cls,
        factor: torch.Tensor,
        alpha: torch.Tensor,
        inputs: torch.Tensor,
        kernel: KernelSpec,
        hyperparameters: Hyperparameters,
        present_time: float | torch.Tensor,
        *,
        paper_compat: bool = False,
    ) -> WassersteinRelevancy:
        """Build from a lower Cholesky factor of ``Delta`` and explicit model quantities.

        Args:
            factor: ``(n, n)`` lower factor ``L`` with ``L L^T = Delta`` (jitter included).
            alpha: ``(n,)`` ``Delta^{-1} y`` (standardized targets).
            inputs: ``(n, d + 1)`` rows ``(x, t)``.
            kernel: the kernel families (``kernel.temporal`` must not be ``None``).
            hyperparameters: ``lambda``, ``l_S`` (1 or d values), ``l_T``.
            present_time: ``t0`` in the time unit of ``inputs``.
            paper_compat: the two convolution quirks of the authors' package (the
                noise floor is the caller's business here; :meth:`from_gp` applies it).
        """
        if kernel.temporal is None or hyperparameters.lengthscale_time is None:
            raise ValueError("the relevancy criterion needs a kernel that models time")
        if not kernel.stationary:
            raise ValueError("the relevancy criterion needs a stationary temporal kernel")
        conv = convolution_matrix(
            inputs,
            spatial=kernel.spatial,
            temporal=kernel.temporal,
            lengthscale_space=list(hyperparameters.lengthscale_space),
            lengthscale_time=hyperparameters.lengthscale_time,
            present_time=present_time,
            paper_compat=paper_compat,
        )
        # row-major, as the in-place updates and flat sums want
        precision = cholesky_inverse(factor)
        rel = cls.__new__(cls)
        rel._setup(precision, alpha, conv.contiguous(), hyperparameters.outputscale)
        return rel

    @classmethod
    def from_gp(
        cls,
        gp: SpatioTemporalGP,
        present_time: float | torch.Tensor,
        *,
        paper_compat: bool = False,
    ) -> WassersteinRelevancy:
        """Build from a :class:`dynbo.models.SpatioTemporalGP` (its factor, alpha, data).

        Args:
            gp: the GP (uses ``cholesky_factor``, ``alpha``, ``inputs``, ``kernel``,
                ``hyperparameters``); its time unit is the one of ``present_time``.
            present_time: ``t0`` in the GP's time unit.
            paper_compat: reproduce the authors' package: the two convolution quirks and
                noise variances below ``1e-5`` raised to ``1e-5`` (which needs a fresh
                factorization of ``Delta`` when some noise is below the floor).
        """
        factor, alpha = gp.cholesky_factor, gp.alpha
        if paper_compat and gp.n > 0:
            noise = gp.noise_variances
            if bool((noise < PAPER_NOISE_FLOOR).any()):
                inputs = gp.inputs
                delta = gp.covariance(inputs, inputs)
                delta = delta + torch.diag(noise.clamp_min(PAPER_NOISE_FLOOR))
                factor, _ = robust_cholesky(delta, what="GP covariance matrix (paper noise floor)")
                y = gp.standardized_targets.reshape(-1, 1)
                alpha = torch.cholesky_solve(y, factor, upper=False).reshape(-1)
        return cls.from_factor(
            factor,
            alpha,
            gp.inputs,
            gp.kernel,
            gp.hyperparameters,
            present_time,
            paper_compat=paper_compat,
        )

    # ------------------------------------------------------------------ state
    @property
    def n(self) -> int:
        """Number of observations still in the dataset."""
        return len(self._live)

    @property
    def indices(self) -> torch.Tensor:
        """``(n,)`` positions of the remaining observations in the initial dataset."""
        return self._origin.index_select(0, self._live_index)

    def _sub(self, matrix: torch.Tensor) -> torch.Tensor:
        a = self._live_index
        return matrix.index_select(0, a).index_select(1, a)

    @property
    def precision(self) -> torch.Tensor:
        """``(n, n)`` ``P = Delta^{-1}`` of the current dataset (a copy)."""
        return self._sub(self._P)

    @property
    def alpha(self) -> torch.Tensor:
        """``(n,)`` ``P y`` of the current dataset (a copy)."""
        return self._alpha.index_select(0, self._live_index)

    @property
    def convolutions(self) -> torch.Tensor:
        """``(n, n)`` ``C`` of the current dataset (a copy)."""
        return self._sub(self._C)

    @property
    def product(self) -> torch.Tensor:
        """``(n, n)`` ``Q = C P`` of the current dataset (a copy)."""
        return self._sub(self._Q)

    # ------------------------------------------------------------------ criterion
    @property
    def _live_index(self) -> torch.Tensor:
        """Storage positions of the current observations, as a tensor (built on demand)."""
        if self._live_tensor is None:
            self._live_tensor = torch.tensor(self._live, dtype=torch.long, device=self._P.device)
        return self._live_tensor

    def _views(self) -> tuple[np.ndarray, ...]:
        """NumPy views of ``P, Q, alpha, C alpha`` (CPU storage, no copy)."""
        if self._host_views is None:
            self._host_views = tuple(
                m.numpy() for m in (self._P, self._Q, self._alpha, self._c_alpha)
            )
        return self._host_views

    def _on_host(self) -> bool:
        if self._host is None:
            self._host = self._decide_host()
        return self._host

    def _decide_host(self) -> bool:
        # Small CPU problems run the per-removal algebra in NumPy on views of the same
        # storage: each torch call costs a few microseconds of dispatch, and a removal
        # plus its criteria take about 35 of them, more than the O(n^2) arithmetic at
        # n of a few hundred (measured at n = 100: 10 removals cost 1.6x one fresh
        # computation of all criteria through torch, 0.9x through NumPy).
        return (
            self._P.device.type == "cpu"
            and self._P.dtype in (torch.float32, torch.float64)
            and self._P.shape[0] <= _HOST_MAX_STORAGE
        )

    def _dots_buffer(self) -> torch.Tensor:
        """The row-block buffer of :func:`_column_dots` for this storage (made once)."""
        if self._buffer is None:
            n = self._P.shape[0]
            self._buffer = self._P.new_empty((min(_BLOCK_ROWS, max(n, 1)), n))
        return self._buffer

    def _storage_column_dots(self) -> torch.Tensor:
        """``(P C P)_ii = sum_j P_ji Q_ji`` for every storage column (0 where removed)."""
        return _column_dots(self._P, self._Q, self._dots_buffer())

    def _current_terms(self) -> tuple[torch.Tensor, torch.Tensor]:
        if self._cache is None and self._on_host():
            P, Q, alpha, c_alpha = self._views()
            if self._live_array is None:
                self._live_array = np.asarray(self._live, dtype=np.intp)
            live = self._live_array
            pii = P.diagonal()[live]
            a = alpha[live]
            # (P C P)_ii = sum_j P_ji Q_ji over the whole storage (dead rows are zero);
            # C is a Gram matrix, so rounding below 0 is clamped
            pcp = np.maximum(np.einsum("ij,ij->j", P, Q)[live], 0.0)
            squared = (a * a + pii) / (pii * pii) * pcp * self._lam2
            normalizer = (float(alpha @ c_alpha) + float(np.trace(Q))) * self._lam2
            relevancy = (
                np.sqrt(squared / normalizer) if normalizer > 0.0 else np.zeros_like(squared)
            )
            self._cache = (
                torch.from_numpy(squared),
                torch.tensor(normalizer, dtype=self._P.dtype),
            )
            self._relevancy_cache = torch.from_numpy(relevancy)
        if self._cache is None:
            squared, normalizer = _terms(
                self._P, self._alpha, self._Q, self._c_alpha, self._lam2, self._dots_buffer()
            )
            # Removed storage rows give 0/0 here; they are dropped by the selection.
            self._cache = (squared.index_select(0, self._live_index), normalizer)
        return self._cache

    def squared_distances(self) -> torch.Tensor:
        """``(n,)`` un-normalized ``W_i^2`` (eq. 10), ``lambda^2`` included.

        BOLT removes the argmin of these (the same as the argmin of :meth:`relevancies`).
        """
        return self._current_terms()[0].clone()

    def squared_normalizer(self) -> torch.Tensor:
        """Scalar ``W_D^2`` (eq. 11), ``lambda^2`` included."""
        return self._current_terms()[1].clone()

    def relevancies(self) -> torch.Tensor:
        """``(n,)`` normalized criteria ``R_i = W_i / W_D`` (eq. 12), dimensionless."""
        squared, normalizer = self._current_terms()
        if self._relevancy_cache is not None:
            return self._relevancy_cache.clone()
        return _normalize(squared, normalizer)

    def least_relevant(self) -> tuple[int, float]:
        """``(index, R_index)`` of the least relevant observation (current indexing)."""
        if self.n == 0:
            raise ValueError("no observation left")
        rel = self.relevancies()
        i = int(torch.argmin(rel))
        return i, float(rel[i])

    # ------------------------------------------------------------------ removal
    def remove(self, index: int) -> None:
        """Drop observation ``index`` (current indexing) with rank-one updates, O(n^2).

        With ``p = P_{-i,i}``, ``q = Q_{-i,i}`` and ``pi = P_ii``:
        ``P <- P_{-i,-i} - p p^T / pi`` (the inverse of ``Delta`` without row and column
        ``i``), ``alpha <- alpha_{-i} - p alpha_i / pi`` (same standardized targets),
        ``C <- C_{-i,-i}``, ``Q <- C_{-i,-i} P_new = Q_{-i,-i} - q p^T / pi`` and
        ``C alpha <- (C alpha)_{-i} - q alpha_i / pi``.
        """
        n = self.n
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < n:
            raise IndexError(f"observation index {index!r} out of range for {n} observations")
        o = self._live[index]
        # Removed rows are zero in P and Q, so p and q vanish there and the updates
        # leave the dead storage untouched; row and column o are cleared afterwards.
        if self._on_host():
            P, Q, alpha, c_alpha = self._views()
            pi = float(P[o, o])
            coef = -float(alpha[o]) / pi
            p, q = P[:, o].copy(), Q[:, o].copy()
            # in-place rank-one updates by BLAS ger on the column-major view (M^T):
            # M^T <- M^T + a p x^T is M <- M + a x p^T, with no n^2 temporary
            ger = _GER[P.dtype.type]
            ger(-1.0 / pi, p, p, a=P.T, overwrite_a=True)
            ger(-1.0 / pi, p, q, a=Q.T, overwrite_a=True)
            alpha += coef * p
            c_alpha += coef * q
            P[o], P[:, o], Q[o], Q[:, o] = 0.0, 0.0, 0.0, 0.0
            alpha[o], c_alpha[o] = 0.0, 0.0
        else:
            # Two host scalars (one device sync on a GPU): torch's in-place rank-one
            # update takes its coefficient as a Python number.
            pi = float(self._P[o, o])
            coef = -float(self._alpha[o]) / pi
            p = self._P[:, o].clone()
            q = self._Q[:, o].clone()
            self._P.addr_(p, p, alpha=-1.0 / pi)
            self._Q.addr_(q, p, alpha=-1.0 / pi)
            self._alpha.add_(p, alpha=coef)
            self._c_alpha.add_(q, alpha=coef)
            for m in (self._P, self._Q):
                m[o].zero_()
                m[:, o].zero_()
            self._AC[:, o] = 0.0
        del self._live[index]
        self._live_tensor = None
        if self._live_array is not None:
            self._live_array = np.delete(self._live_array, index)
        self._cache = None
        self._relevancy_cache = None
        self._compact_if_sparse()

    def remove_least_relevant(
        self,
        limit: int,
        *,
        budget: float = math.inf,
        stop: Callable[[], bool] | None = None,
        batch_size: int = 64,
        speculative: bool | None = None,
        graphed: bool | None = None,
    ) -> Removals:
        """Remove the least relevant observation, again and again, as W-DBO's loop does.

        The loop this reproduces (W-DBO Algorithm 1 lines 9-20; BOLT's with ``budget =
        inf``), with ``stop`` called where that loop checks its deadline::

            while removed < limit and budget > 1:
                if stop(): break
                i = argmin_i R_i; v = R_i       # first index on exact ties
                if not budget > 1 + v: break
                remove(i); budget /= 1 + v

        Its removals are computed in batches (:class:`_RemovalBatch`): each step of a
        batch finds the argmin and the relevancy after the previous removals from cheap
        O(n) updates of the terms the criterion reads, and the batch's accepted removals
        are then applied to ``P`` and ``Q`` by one rank-``k`` update. The choices are the
        sequential loop's; the numbers agree with :meth:`remove` one at a time to
        rounding (a different order of the same floating-point operations), so only an
        argmin between values equal to rounding, or a budget equal to ``1 + R_i`` to
        rounding, may go the other way (``docs/relevancy.md``).

        Args:
            limit: the most removals (``<= n``).
            budget: the removal budget ``b`` (dimensionless; ``inf``: no budget).
            stop: called before each removal exactly where the loop above calls it (the
                same number of calls, in the same order); ``True`` ends the loop there.
                In a speculative batch the calls after the batch's first are made once
                the batch is computed, and the batch is cut where one returns ``True``:
                the loop overruns by at most one batch.
            batch_size: the most removals of one batch (each step's corrections cost
                O(n batch_size)).
            speculative: compute each batch to its end before reading any value back
                (one device synchronization per batch instead of one per removal; the
                steps computed past the loop's end are discarded), with batch sizes 1,
                2, 4, ... up to ``batch_size``. Default: on any device but the CPU,
                where a value is read for free after each step and a batch stops there.
                Without it, a CPU batch steps in NumPy (:class:`_HostViews`), in batches
                of up to ``batch_size``; with it, in torch on any device (torch steps,
                speculative or not, in batches of 1, 2, 4, ...).
            graphed: replay the speculative steps from a CUDA graph of one step,
                captured once per storage from the loop's first batch of 4 or more steps
                on (:class:`_GraphedRemovalStep`: the same numbers bit for bit, without
                Python issuing each step's kernels). Default: speculative on CUDA.

        Returns:
            :class:`Removals`; the criterion then describes the remaining dataset.
        """
        if isinstance(limit, bool) or not isinstance(limit, int) or not 0 <= limit <= self.n:
            raise ValueError(f"limit must be an integer in [0, {self.n}], got {limit!r}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size!r}")
        if speculative is None:
            speculative = self._P.device.type != "cpu"
        if graphed is None:
            graphed = speculative and _graphs_supported(self._P.device)
        if graphed and not (speculative and _graphs_supported(self._P.device)):
            raise ValueError("graphed removal steps need speculative=True on a CUDA device")
        batch: _RemovalBatch | None = None  # one per storage, started over per batch
        replay: _GraphedRemovalStep | None = None
        indices: list[int] = []
        origins: list[int] = []
        values: list[float] = []
        # batches of 1, 2, 4, ... steps, except for the CPU's NumPy steps, which read each
        # step's result for free and stop where the loop stops: a speculative batch
        # computes all of its steps, and a torch batch makes its candidates' products
        # for all of them, while a loop often stops after a few removals
        size = batch_size if _steps_in_numpy(self._P, not speculative) else 1
        batches = steps = misses = 0

        def halted(removed: int) -> str:
            # the loop's condition, then its deadline check: why it stops here, or ""
            if removed >= limit:
                return "limit"
            if not budget > 1.0:
                return "budget"
            if stop is not None and stop():
                return "stop"
            return ""

        stopped_by = ""
        while not stopped_by:
            stopped_by = halted(len(indices))
            if stopped_by:
                break
            capacity = min(size, batch_size, limit - len(indices))
            batches += 1
            self._compact_if_sparse()
            if batch is None or batch.stale():
                # a stale graph and its batch go before the new ones are made
                batch = replay = None
                # the speculative mode is the GPU's: torch steps on any device
                batch = _RemovalBatch(self, min(batch_size, limit), numpy_steps=not speculative)
            if graphed and replay is None and capacity >= _CAPTURE_FROM_STEPS:
                replay = _capture(batch)
                graphed = replay is not None
            batch.load(capacity)
            if speculative:
                if replay is not None:
                    replay.run(capacity)
                else:
                    for _ in range(capacity):
                        batch.step()
                records = batch.records()
            positions: list[int] = []
            for j in range(capacity):
                if j > 0:  # before each further removal of the batch
                    stopped_by = halted(len(indices) + j)
                    if stopped_by:
                        break
                if not speculative:
                    batch.step()
                position, squared, normalizer, exact = (
                    records[j] if speculative else batch.record(j)
                )
                # R = W / W_D as relevancies() computes it (lambda^2 in both terms)
                normalizer *= self._lam2
                value = math.sqrt(squared * self._lam2 / normalizer) if normalizer > 0 else 0.0
                if not budget > 1.0 + value:
                    stopped_by = "budget"
                    break
                budget /= 1.0 + value
                values.append(value)
                positions.append(position)
                if not exact:
                    # a candidates' miss: this removal stands, the batch's next steps
                    # are void; the next batch starts after it
                    misses += int(j + 1 < capacity)
                    break
            steps += batch.count
            batch.commit(len(positions))
            for position in positions:
                index = bisect.bisect_left(self._live, position)
                indices.append(index)
                origins.append(self._origin_list[position])
                del self._live[index]
            if positions:
                self._removed()
            size *= 2
        return Removals(
            indices=indices,
            origins=origins,
            relevancies=values,
            budget=budget,
            stopped_by=stopped_by,
            batches=batches,
            steps=steps,
            misses=misses,
        )

    def _removed(self) -> None:
        # after `_live` lost entries: drop what depends on it (the loop compacts the
        # storage before its next batch, not after its last)
        self._live_tensor = None
        self._live_array = None
        self._cache = None
        self._relevancy_cache = None

    def _compact_if_sparse(self) -> None:
        if len(self._live) < _COMPACT_BELOW * self._P.shape[0]:
            self._compact()

    def _compact(self) -> None:
        # Once a quarter of the storage is dead (_COMPACT_BELOW), copy the live part (amortized
        # O(n^2)) so that later removals and criteria scale with the current n.
        a = self._live_index
        precision, product = self._sub(self._P), self._sub(self._Q)
        self._C = self._sub(self._C)
        self._store(
            precision, product, self._alpha.index_select(0, a), self._c_alpha.index_select(0, a)
        )
        self._origin = self._origin.index_select(0, a)
        self._origin_list = [self._origin_list[i] for i in self._live]
        self._live = list(range(a.shape[0]))
        self._live_tensor = None
        self._live_array = None
        self._host_views = None
        self._host = None
        self._buffer = None


def wasserstein_relevancies(
    gp: SpatioTemporalGP, present_time: float | torch.Tensor, *, paper_compat: bool = False
) -> torch.Tensor:
    """``(n,)`` relevancies ``R_i`` of every observation of a GP at present time ``t0``.

    One-shot version of :class:`WassersteinRelevancy` (``from_gp(...).relevancies()``).
    """
    return WassersteinRelevancy.from_gp(gp, present_time, paper_compat=paper_compat).relevancies()
