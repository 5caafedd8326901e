"""Maximizing an acquisition function over the unit box or a finite candidate set.

Box search (the papers' practice, via BoTorch's ``optimize_acqf`` in the W-DBO code):
evaluate a scrambled Sobol sample of ``raw_samples`` points, start L-BFGS-B from the
``restarts`` best of them (plus any caller-given starts), and run the starts together,
evaluating all of them in one call per step (values and gradients in closed form where
the acquisition has them, :func:`values_and_gradients`; autograd otherwise). Each start
is its own L-BFGS-B problem
(BoTorch's batched port of SciPy's L-BFGS-B, ``fmin_l_bfgs_b_batched``): its own curvature
memory, line search and stopping test, and a start that converged is no longer
evaluated. The older formulation, one L-BFGS-B run on the sum of the starts' values, is
the fallback when that port is unavailable (SciPy outside the versions BoTorch supports):
there one shared curvature model serves starts of different curvature, and every start
runs until the sum converges, which on a rugged acquisition (a spatial GP with a short
lengthscale) took ten times as many steps (``docs/results.md``).

Only the best start's end point is used, so a start that trails the best value found so
far by more than its own recent pace could make up in the iterations it has left stops
there (:class:`BoxSearch` ``prune_trailing``): on the rugged UCB of a spatial GP, starts
far below the best crawled along ridges for tens of steps and set the number of batched
calls (``docs/results.md`` measures how rarely the chosen point changes).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.optimize
import scipy.stats
import torch

from dynbo import deadline
from dynbo.validation import MAX_BOX_DIM as SOBOL_BOX_DIM

__all__ = [
    "MAX_BOX_DIM",
    "BoxSearch",
    "maximize_acquisition",
    "maximize_on_box",
    "maximize_on_candidates",
    "values_and_gradients",
]

#: time points per candidate when an acquisition that searches time too (a look-ahead
#: window) is maximized over a finite set.
TIME_GRID = 11

AcquisitionFn = Callable[[torch.Tensor], torch.Tensor]


#: the largest settings of a box search (a Sobol sample of 2^20 points takes 8 MB per
#: dimension and is evaluated in chunks of ``RAW_CHUNK``)
SEARCH_LIMITS = {"raw_samples": 2**20, "restarts": 4096, "max_iterations": 10**6}
#: raw samples evaluated per acquisition call at most (bounds the memory of one call)
RAW_CHUNK = 8192
#: entries of one batch's ``(m, n)`` cross-covariance (64 MiB in float64): with ``n``
#: observations a raw batch has ``2^23 / n`` points (at most ``RAW_CHUNK``, at least 64)
RAW_BATCH_ENTRIES = 1 << 23


#: raw samples per acquisition call while a soft :class:`~dynbo.deadline.Budget` is
#: active: small batches, checked one by one, so that a search under a budget can stop
#: (or must wait) one small batch after the budget rather than one whole raw sample
BUDGET_RAW_BATCH = 64


def raw_batch_size(n: int) -> int:
    """Raw samples per acquisition call for a model of ``n`` observations.

    The call's largest arrays are ``(m, n)`` (cross-covariances, solves): ``m`` is chosen
    so that they hold about ``RAW_BATCH_ENTRIES`` entries, so that a search's memory
    does not grow with ``raw_samples * n``. Up to ``n = 1024`` this is ``RAW_CHUNK``.
    """
    return max(64, min(RAW_CHUNK, RAW_BATCH_ENTRIES // max(int(n), 1)))


#: the most dimensions of a box search (defined in :mod:`dynbo.validation`, which the
#: benchmarks read without loading torch)
MAX_BOX_DIM = SOBOL_BOX_DIM
#: iterations a start runs before it may be pruned, and over which its pace is taken
#: (the largest improvement of one iteration among its last ``PRUNE_WINDOW``)
PRUNE_WINDOW = 3


@dataclass(frozen=True)
class BoxSearch:
    """Settings of the multi-start box search.

    Attributes:
        raw_samples: size of the quasi-random sample the starts are taken from.
        restarts: number of gradient-ascent starts.
        max_iterations: L-BFGS-B iteration cap for the batched problem.
        tolerance: a start stops when an L-BFGS-B step improves its value by less than
            this fraction (``ftol``; SciPy's default is ``2.2e-9``). ``1e-7`` of an
            acquisition value is far below anything that changes which point is chosen;
            on the rugged UCB of a spatial GP with a short lengthscale SciPy's default
            spent most steps crawling along ridges: at ``n = 200``, BR-GP-UCB's 170
            evaluations became 75 with the same maximum (``docs/results.md``).
        prune_trailing: stop a start once it has run ``PRUNE_WINDOW`` iterations and its
            value plus its largest improvement per iteration over the last
            ``PRUNE_WINDOW`` iterations, times the iterations it has left, stays below
            the best value any start (or raw sample) has reached. The best start is never
            stopped, so the point returned differs from the unpruned search's where a
            trailing start would have sped up past its recent pace and overtaken it, or in
            the last digits where the best start was evaluated in smaller batches (rounding;
            both measured in ``benchmarks/acquisition_pruning.py``); ``False`` runs every
            start to its own stopping test. Only the per-start search prunes (not the
            fallback).
    """

    raw_samples: int = 512
    restarts: int = 10
    max_iterations: int = 200
    tolerance: float = 1e-7
    prune_trailing: bool = True

    def __post_init__(self) -> None:
        for name in ("raw_samples", "restarts", "max_iterations"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
            if value > SEARCH_LIMITS[name]:
                raise ValueError(
                    f"{name} must be at most {SEARCH_LIMITS[name]} (each costs acquisition "
                    f"evaluations every iteration), got {value!r}"
                )
        if not 0.0 < self.tolerance < 1.0:
            raise ValueError(f"tolerance must be in (0, 1), got {self.tolerance!r}")
        if not isinstance(self.prune_trailing, bool):
            raise ValueError(f"prune_trailing must be a bool, got {self.prune_trailing!r}")


def maximize_on_box(
    acquisition: AcquisitionFn,
    dim: int,
    *,
    search: BoxSearch = BoxSearch(),
    generator: torch.Generator | None = None,
    extra_starts: torch.Tensor | None = None,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
    record: dict[str, Any] | None = None,
) -> tuple[torch.Tensor, float]:
    """Maximize ``acquisition`` over ``[0, 1]^dim``.

    Args:
        acquisition: maps ``(m, dim)`` points to ``(m,)`` differentiable values.
        dim: dimension of the box.
        search: raw samples, restarts and iteration cap.
        generator: source of the Sobol scrambling seed (explicit randomness).
        extra_starts: ``(k, dim)`` additional starting points (e.g. the previous query).
        dtype, device: of the points.
        record: if given, receives ``"evaluations"`` (batched acquisition calls of the
            gradient search) and ``"iterations"`` (its L-BFGS-B iterations): an
            iteration's acquisition time is their product with the cost of one call;
            and ``"budget_cut"`` where a spent :class:`~dynbo.deadline.Budget` stopped
            the search (then the best point evaluated so far is returned).

    Returns:
        ``(x, value)``: the best point ``(dim,)`` found and its acquisition value.
    """
    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=generator).item())
    # SciPy's Sobol sequence: torch's scrambled draw depends on the global default dtype,
    # which would make runs depend on unrelated code; this one is float64 whatever it is.
    sobol = scipy.stats.qmc.Sobol(dim, scramble=True, seed=seed)
    points = sobol.random_base2(max(0, math.ceil(math.log2(search.raw_samples))))
    raw = torch.as_tensor(points[: search.raw_samples], dtype=dtype, device=device)
    if extra_starts is not None and extra_starts.numel():
        raw = torch.cat([raw, extra_starts.to(dtype=dtype, device=device).reshape(-1, dim)])
    raw, raw_values, cut = _evaluate_raw(acquisition, raw)
    order = torch.argsort(raw_values, descending=True)
    starts = raw[order[: search.restarts]]
    best_raw = raw[order[0]].clone()
    best_raw_value = float(raw_values[order[0]])
    if cut is not None:  # a spent budget: the best raw sample is the answer
        if record is not None:
            record.update(evaluations=0, iterations=0, budget_cut=cut)
        return best_raw, best_raw_value
    seen = BestSeen(best_raw, best_raw_value)

    k = starts.shape[0]
    batched = _batched_lbfgs_b()
    if batched is not None:
        try:
            final, evaluations, iterations = _maximize_per_start(
                acquisition,
                starts,
                search.max_iterations,
                search.tolerance,
                batched,
                best_raw_value if search.prune_trailing else None,
                seen,
            )
        except deadline.BudgetSpent:
            return seen.stopped(record)
        if record is not None:
            record.update(evaluations=evaluations, iterations=iterations)
        return _best(acquisition, final, best_raw, best_raw_value, seen)

    def objective(flat: np.ndarray) -> tuple[float, np.ndarray]:
        deadline.check(deadline.ACQUISITION)
        x = torch.tensor(flat, dtype=dtype, device=device).reshape(k, dim)
        values, grad = values_and_gradients(acquisition, x)
        deadline.end()
        seen.offer(x, values)
        return -float(values.sum()), -grad.cpu().numpy().reshape(-1).astype(float)

    try:
        result = scipy.optimize.minimize(
            objective,
            starts.detach().cpu().numpy().reshape(-1),
            jac=True,
            method="L-BFGS-B",
            bounds=[(0.0, 1.0)] * (k * dim),
            options={"maxiter": search.max_iterations, "ftol": search.tolerance},
        )
    except deadline.BudgetSpent:
        return seen.stopped(record)
    if record is not None:
        record.update(evaluations=int(result.nfev), iterations=int(result.nit))
    final = torch.tensor(result.x, dtype=dtype, device=device).reshape(k, dim).clamp(0.0, 1.0)
    return _best(acquisition, final, best_raw, best_raw_value, seen)


def values_and_gradients(
    acquisition: AcquisitionFn, points: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(m,)`` acquisition values at ``(m, dim)`` points and their ``(m, dim)`` gradients.

    From the acquisition's ``value_and_gradient`` where it has one that applies (closed
    form, no autograd graph: the search's inner loop), otherwise by autograd through
    the call. Both detached.
    """
    closed_form = getattr(acquisition, "value_and_gradient", None)
    if closed_form is not None:
        with torch.no_grad():
            result = closed_form(points)
        if result is not None:
            return result
    x = points.detach().clone().requires_grad_(True)
    values = acquisition(x)
    if not values.requires_grad:  # a constant acquisition (e.g. the prior of an empty GP)
        return values.detach(), torch.zeros_like(x)
    (grad,) = torch.autograd.grad(values.sum(), x)
    return values.detach(), grad


def _evaluate_raw(
    acquisition: AcquisitionFn, raw: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, str | None]:
    """``(points, values, cut)``: the raw sample's values, in batches of the acquisition's
    ``raw_batch`` points (:func:`raw_batch_size`; ``RAW_CHUNK`` if it has none).

    The active deadline is checked before every batch but the first (a search always
    has a point to return); a spent budget ends the sample there (``cut`` says how
    much was evaluated; ``points`` are those evaluated). Under a soft budget each batch
    is evaluated in pieces of ``BUDGET_RAW_BATCH`` points, each checked (kind
    ``deadline.RAW_SAMPLE``; the batch boundaries keep their ``deadline.ACQUISITION``
    checks, so the search's other checks are numbered as without the pieces).
    """
    values: list[torch.Tensor] = []
    batch = int(getattr(acquisition, "raw_batch", RAW_CHUNK))
    piece = min(batch, BUDGET_RAW_BATCH) if deadline.soft_budget_active() else batch
    with torch.no_grad():
        for start in range(0, len(raw), batch):
            for i in range(start, min(start + batch, len(raw)), piece):
                if not i:
                    deadline.begin(deadline.RAW_SAMPLE)  # measured, never skipped
                elif deadline.spent(deadline.ACQUISITION if i == start else deadline.RAW_SAMPLE):
                    return raw[:i], torch.cat(values), f"raw samples: {i} of {len(raw)} evaluated"
                values.append(acquisition(raw[i : i + piece]))
                deadline.end()
    return raw, torch.cat(values), None


class BestSeen:
    """The best point a search has evaluated, for a search stopped by a spent budget.

    Args:
        point: ``(dim,)`` the best raw sample; value: its acquisition value.
    """

    def __init__(self, point: torch.Tensor, value: float) -> None:
        self.point, self.value, self.batches = point, value, 0

    def offer(self, points: torch.Tensor, values: torch.Tensor) -> None:
        """Take an evaluated batch: ``(m, dim)`` points and their ``(m,)`` values."""
        self.batches += 1
        i = int(torch.argmax(values))
        if float(values[i]) > self.value:
            self.point, self.value = points[i].detach().clamp(0.0, 1.0).clone(), float(values[i])

    def stopped(self, record: dict[str, Any] | None) -> tuple[torch.Tensor, float]:
        """``(point, value)`` of the best seen, noting in ``record`` what was cut."""
        if record is not None:
            record.update(
                evaluations=self.batches,
                iterations=0,
                budget_cut=f"gradient search stopped after {self.batches} batch(es)",
            )
        return self.point, self.value


def _best(
    acquisition: AcquisitionFn,
    final: torch.Tensor,
    best_raw: torch.Tensor,
    best_raw_value: float,
    seen: BestSeen,
) -> tuple[torch.Tensor, float]:
    """The best of the optimized starts, or the best raw sample if none beat it; under a
    soft budget the best point the search evaluated (``seen``), without evaluating the
    end points again (work after the search's last budget check)."""
    if deadline.soft_budget_active():
        return seen.point, seen.value
    with torch.no_grad():
        values = acquisition(final)
    i = int(torch.argmax(values))
    if float(values[i]) >= best_raw_value:
        return final[i], float(values[i])
    return best_raw, best_raw_value


def _batched_lbfgs_b() -> Callable[..., Any] | None:
    """BoTorch's batched L-BFGS-B, or ``None`` where it cannot run (its SciPy range)."""
    try:
        from botorch.generation.gen import fmin_l_bfgs_b_batched  # type: ignore[attr-defined]
    except ImportError:  # pragma: no cover - a BoTorch without the port
        return None
    return fmin_l_bfgs_b_batched


def _maximize_per_start(
    acquisition: AcquisitionFn,
    starts: torch.Tensor,
    max_iterations: int,
    tolerance: float,
    batched: Callable[..., Any],
    prune_below: float | None = None,
    seen: BestSeen | None = None,
) -> tuple[torch.Tensor, int, int]:
    """Run one L-BFGS-B problem per start, evaluating the unconverged starts together.

    Args:
        prune_below: ``None`` runs every start to its own stopping test; a value (the
            best raw sample's) turns on :class:`TrailingStarts` with it as the first
            best value.
        seen: offered every evaluated batch (what a search stopped by a budget returns).

    Returns:
        ``(final, evaluations, iterations)``: ``(k, dim)`` end points, the number of
        batched acquisition calls and the largest per-start iteration count.
    """
    k, dim = starts.shape
    calls = 0
    trailing = None if prune_below is None else TrailingStarts(k, max_iterations, prune_below)

    def objective(flat: np.ndarray, batch_indices: list[int]) -> tuple[np.ndarray, np.ndarray]:
        nonlocal calls
        deadline.check(deadline.ACQUISITION)
        calls += 1
        x = torch.as_tensor(flat, dtype=starts.dtype, device=starts.device).reshape(-1, dim)
        values, grad = values_and_gradients(acquisition, x)
        deadline.end()
        if seen is not None:
            seen.offer(x, values)
        negative = -values.cpu().numpy().astype(float)
        if trailing is not None:
            trailing.evaluated(flat, negative, batch_indices)
        return negative, -grad.cpu().numpy().astype(float)

    xs, _, results = batched(
        func=objective,
        x0=starts.detach().cpu().numpy().astype(float),
        bounds=[(0.0, 1.0)] * dim,
        maxiter=max_iterations,
        factr=None,
        ftol=tolerance,
        pass_batch_indices=True,
        callback=None if trailing is None else trailing.iteration,
    )
    final = torch.as_tensor(np.asarray(xs), dtype=starts.dtype, device=starts.device)
    iterations = max(int(r.nit) for r in results)
    return final.reshape(k, dim).clamp(0.0, 1.0), calls, iterations


class TrailingStarts:
    """Which starts of a per-start L-BFGS-B search can no longer matter (``prune_trailing``).

    The search calls :meth:`evaluated` with every batch it evaluates and :meth:`iteration`
    after each accepted L-BFGS-B iteration of a start (SciPy's callback; raising
    ``StopIteration`` there ends that start at its current point). A start ``i`` with
    values ``v_i^0 <= ... <= v_i^j`` after ``j >= PRUNE_WINDOW`` iterations stops when

        ``v_i^j + (max_iterations - j) * max_{j - PRUNE_WINDOW < l <= j} (v_i^l - v_i^{l-1})
        < v_best``,

    ``v_best`` the largest value any start has accepted or the best raw sample: at its
    recent pace it could not reach a value already in hand in the iterations it has left.
    Values are the acquisition's (maximized); the best start never stops this way.

    Args:
        starts: number of starts ``k``.
        max_iterations: the per-start iteration cap.
        best_value: the best raw sample's value (``v_best`` before any iteration).
    """

    def __init__(self, starts: int, max_iterations: int, best_value: float) -> None:
        self.max_iterations = max_iterations
        self.best_value = best_value
        self.values: list[list[float]] = [[] for _ in range(starts)]
        self._last_values = np.full(starts, -math.inf)
        # the starts evaluated since their last accepted iteration, by their last point
        self._pending: dict[bytes, set[int]] = {}
        self._pending_key: list[bytes | None] = [None] * starts
        self.pruned: set[int] = set()

    def evaluated(
        self, points: np.ndarray, negative_values: np.ndarray, indices: list[int]
    ) -> None:
        """Record a batch: ``(b, dim)`` points, their ``(b,)`` negated values, start indices."""
        rows = np.ascontiguousarray(points, dtype=float).reshape(len(indices), -1)
        for row, i in enumerate(indices):
            self._set_pending(i, rows[row].tobytes())
            self._last_values[i] = -float(negative_values[row])
            if not self.values[i]:  # the start's own value: iteration 0
                self.values[i].append(self._last_values[i])

    def iteration(self, intermediate_result: Any) -> None:
        """SciPy's per-iteration callback (that parameter name is how it passes the result).

        L-BFGS-B accepts the last point it evaluated, so the start is the pending one whose
        last evaluated point is ``intermediate_result.x``. Where several pending starts
        sit at that point (a box corner is a common first step), the iteration is not
        attributed: the start it was then misses one iteration in its count and its pace
        spans two, which only makes its test more lenient.
        """
        key = np.ascontiguousarray(intermediate_result.x, dtype=float).tobytes()
        candidates = self._pending.get(key, ())
        if len(candidates) != 1:  # none (not a point of this search), or ambiguous
            return
        (i,) = candidates
        self._set_pending(i, None)
        values = self.values[i]
        values.append(self._last_values[i])
        self.best_value = max(self.best_value, values[-1])
        done = len(values) - 1
        if done < PRUNE_WINDOW:
            return
        pace = max(values[-k] - values[-k - 1] for k in range(1, PRUNE_WINDOW + 1))
        reachable = values[-1] + max(self.max_iterations - done, 0) * max(pace, 0.0)
        if reachable < self.best_value:
            self.pruned.add(i)
            raise StopIteration

    def _set_pending(self, start: int, key: bytes | None) -> None:
        """Move ``start`` to the pending set of ``key`` (``None``: not pending)."""
        old = self._pending_key[start]
        if old is not None:
            group = self._pending[old]
            group.discard(start)
            if not group:
                del self._pending[old]
        self._pending_key[start] = key
        if key is not None:
            self._pending.setdefault(key, set()).add(start)


def maximize_on_candidates(
    acquisition: AcquisitionFn,
    candidates: torch.Tensor,
    *,
    chunk: int = 8192,
    record: dict[str, Any] | None = None,
) -> tuple[int, float]:
    """Exact argmax of ``acquisition`` over a finite set of points.

    Args:
        acquisition: maps ``(m, dim)`` points to ``(m,)`` values.
        candidates: ``(N, dim)`` points.
        chunk: evaluation batch size (bounds the memory of one call).
        record: receives ``"budget_cut"`` where a spent budget stopped the search (the
            best of the chunks evaluated is returned).

    Returns:
        ``(index, value)`` of the first maximizer.
    """
    best_index, best_value = -1, -float("inf")
    with torch.no_grad():
        for start in range(0, candidates.shape[0], chunk):
            # the first chunk always runs (there is an answer); a spent budget keeps the
            # best of the chunks evaluated
            if not start:
                deadline.begin(deadline.ACQUISITION)  # measured, never skipped
            elif deadline.spent(deadline.ACQUISITION):
                if record is not None:
                    record["budget_cut"] = f"candidates: {start} of {len(candidates)} evaluated"
                break
            values = acquisition(candidates[start : start + chunk])
            deadline.end()
            i = int(torch.argmax(values))
            if float(values[i]) > best_value:
                best_index, best_value = start + i, float(values[i])
    return best_index, best_value


def maximize_acquisition(
    acquisition: AcquisitionFn,
    dim: int,
    *,
    candidates: torch.Tensor | None = None,
    searches_time: bool = False,
    search: BoxSearch = BoxSearch(),
    generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
    record: dict[str, Any] | None = None,
    extra_starts: torch.Tensor | None = None,
) -> torch.Tensor:
    """The maximizer of ``acquisition`` over the unit box or a finite set of points.

    Args:
        acquisition: maps ``(m, dim)`` points (``(m, dim + 1)`` with ``searches_time``)
            to ``(m,)`` values.
        dim: spatial dimension.
        candidates: ``(N, dim)`` unit-box points to choose from (exact argmax), or
            ``None`` for the box (:func:`maximize_on_box`).
        searches_time: the acquisition takes one more coordinate in ``[0, 1]`` (the
            position in a look-ahead time window); over candidates it is searched on
            ``TIME_GRID`` equally spaced values.
        search, generator, dtype, device, record: as :func:`maximize_on_box` (over
            candidates ``record`` gets only a ``"budget_cut"``).
        extra_starts: ``(k, dim)`` (``(k, dim + 1)`` with ``searches_time``) points the box
            search also evaluates and may start from (e.g. points known to be safe);
            ignored over candidates.

    Returns:
        The best point: ``(dim,)``, or ``(dim + 1,)`` with ``searches_time``.
    """
    if candidates is None:
        unit, _ = maximize_on_box(
            acquisition,
            dim + int(searches_time),
            search=search,
            generator=generator,
            dtype=dtype,
            device=device,
            record=record,
            extra_starts=extra_starts,
        )
        return unit
    if searches_time:
        grid = torch.linspace(0.0, 1.0, TIME_GRID, dtype=candidates.dtype, device=candidates.device)
        candidates = torch.cat(
            [
                candidates.repeat_interleave(TIME_GRID, 0),
                grid.repeat(candidates.shape[0]).reshape(-1, 1),
            ],
            dim=1,
        )
    index, _ = maximize_on_candidates(acquisition, candidates, record=record)
    return candidates[index]
