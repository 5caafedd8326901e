"""Batched removals (WassersteinRelevancy.remove_least_relevant, the W-DBO/BOLT loops)
against the paper's loop one removal at a time.

On states whose every choice is decided by more than rounding (the gap between the
least and the next least relevancy, and between the budget and ``1 + R``, checked
here), the batched loop must remove the same observations in the same order, with the
same relevancies and final budget and the same posterior, to rounding.
"""

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from dynbo import deadline
from dynbo.deadline import Budget, Cancelled
from dynbo.models import Hyperparameters, KernelSpec, SpatioTemporalGP, linalg
from dynbo.policies import Policy, make
from dynbo.relevancy import WassersteinRelevancy

# relative gap between the least and the next least relevancy, and between the budget
# and 1 + R, below which the paper's loop is decided by rounding (both loops compute R
# to about 1e-11 relative on these states)
DECIDED = 1e-7


def random_gp(n, seed, *, spatial="matern52", temporal="matern32", span=10.0, noise=1e-2):
    """A GP on n points spread over ``span`` time units (5 temporal lengthscales)."""
    rng = np.random.default_rng(seed)
    kernel = KernelSpec(dim=2, spatial=spatial, temporal=temporal)
    hyper = Hyperparameters(
        outputscale=1.7, lengthscale_space=(0.3,), lengthscale_time=2.0, noise=noise
    )
    gp = SpatioTemporalGP(kernel, hyper, dtype=torch.float64)
    x = rng.random((n, 2))
    t = np.sort(rng.uniform(0, span, n))
    y = np.sin(3 * x.sum(1)) + np.cos(t) + 0.1 * rng.standard_normal(n)
    gp.set_data(torch.tensor(np.c_[x, t]), torch.tensor(y))
    return gp


def one_at_a_time(relevancy, limit, budget, stop=None):
    """The paper's loop, every relevancy recomputed after each removal; with the margins."""
    indices, values, gaps = [], [], []
    while len(indices) < limit and budget > 1.0:
        if stop is not None and stop():
            break
        r = relevancy.relevancies()
        index = int(torch.argmin(r))
        value = float(r[index])
        if r.numel() > 1:
            second = float(torch.topk(r, 2, largest=False).values[1])
            gaps.append((second - value) / second if second > 0 else math.inf)
        gaps.append(abs(budget - (1.0 + value)) / budget)
        if not budget > 1.0 + value:
            break
        indices.append(index)
        values.append(value)
        relevancy.remove(index)
        budget /= 1.0 + value
    return indices, values, budget, gaps


def assert_same_state(a, b, tol=1e-10):
    np.testing.assert_array_equal(a.indices.numpy(), b.indices.numpy())
    for name in ("precision", "alpha", "product"):
        x, y = getattr(a, name), getattr(b, name)
        scale = max(float(x.abs().max()), 1e-300)
        assert float((x - y).abs().max()) <= tol * scale, name
    np.testing.assert_allclose(a.relevancies().numpy(), b.relevancies().numpy(), rtol=1e-8)


CASES = [(20, 0), (20, 1), (60, 2), (60, 3), (150, 4), (150, 5), (300, 6), (300, 7)]


@pytest.mark.parametrize("n,seed", CASES)
@pytest.mark.parametrize("speculative", [False, True])
def test_batches_remove_what_the_one_at_a_time_loop_removes(n, seed, speculative):
    gp = random_gp(n, seed)
    reference = WassersteinRelevancy.from_gp(gp, 10.5)
    batched = WassersteinRelevancy.from_gp(gp, 10.5)
    budget = 1.0 + 0.04 * n  # stops part-way: the budget decides where
    indices, values, left, gaps = one_at_a_time(reference, n - 2, budget)
    assert min(gaps) > DECIDED  # every choice of this state is decided
    assert 0 < len(indices) < n - 2
    # small batches: several batches, rank-k commits and a compaction of the storage
    removals = batched.remove_least_relevant(
        n - 2, budget=budget, batch_size=7, speculative=speculative
    )
    assert removals.indices == indices
    assert removals.origins == [int(i) for i in _origins(gp.n, indices)]
    np.testing.assert_allclose(removals.relevancies, values, rtol=1e-9)
    assert removals.budget == pytest.approx(left, rel=1e-12)
    assert removals.stopped_by == "budget"
    assert removals.batches >= len(indices) // 7
    assert_same_state(reference, batched)


@pytest.mark.parametrize("n,seed", [(60, 2), (150, 4), (300, 7)])
def test_candidate_misses_end_the_batch_after_an_exact_removal(n, seed, monkeypatch):
    # the torch steps take P_k q from products made for the least relevant candidates at
    # the batch's start; with one candidate per step (2 on a CPU by default) many steps
    # miss: each miss's removal stands, the batch stops there, and the choices stay the
    # paper's; with 8 per step none misses on these states
    from dynbo.relevancy import criterion

    gp = random_gp(n, seed)
    budget = 1.0 + 0.04 * n
    reference = WassersteinRelevancy.from_gp(gp, 10.5)
    indices, values, left, gaps = one_at_a_time(reference, n - 2, budget)
    assert min(gaps) > DECIDED
    with monkeypatch.context() as ample:
        ample.setattr(criterion, "_CANDIDATES_PER_STEP", 8)
        without_misses = WassersteinRelevancy.from_gp(gp, 10.5).remove_least_relevant(
            n - 2, budget=budget, batch_size=7, speculative=True
        )
    exact_flags = []
    real_records = criterion._RemovalBatch.records

    def records(batch):
        rows = real_records(batch)
        exact_flags.extend(row[3] for row in rows)
        return rows

    monkeypatch.setattr(criterion._RemovalBatch, "records", records)
    monkeypatch.setattr(criterion, "_CANDIDATES_PER_STEP", 1)
    batched = WassersteinRelevancy.from_gp(gp, 10.5)
    removals = batched.remove_least_relevant(n - 2, budget=budget, batch_size=7, speculative=True)
    assert not all(exact_flags), "no step missed its candidates"
    # (at 60 observations the misses fall on steps past the budget's stop)
    assert (removals.misses > 0 and removals.batches > without_misses.batches) or n == 60
    assert without_misses.misses == 0
    assert removals.indices == indices == without_misses.indices
    np.testing.assert_allclose(removals.relevancies, values, rtol=1e-9)
    assert removals.budget == pytest.approx(left, rel=1e-12)
    assert_same_state(reference, batched)


def test_torch_steps_without_candidates_make_their_own_products(monkeypatch):
    # _CANDIDATES_PER_STEP = 0: each torch step reads all of P for its product, no misses
    from dynbo.relevancy import criterion

    gp = random_gp(150, 4)
    budget = 1.0 + 0.04 * 150
    reference = WassersteinRelevancy.from_gp(gp, 10.5)
    indices, values, left, _ = one_at_a_time(reference, 148, budget)
    monkeypatch.setattr(criterion, "_CANDIDATES_PER_STEP", 0)
    batched = WassersteinRelevancy.from_gp(gp, 10.5)
    removals = batched.remove_least_relevant(148, budget=budget, batch_size=7, speculative=True)
    assert removals.indices == indices and removals.misses == 0
    np.testing.assert_allclose(removals.relevancies, values, rtol=1e-9)
    assert_same_state(reference, batched)


def test_a_torch_step_takes_its_product_from_the_candidates_exactly():
    # after k steps, P_k q_k from the candidates' products and the kept t_j = P q_j
    # equals the product of the criterion's dense P and Q after those k removals
    from dynbo.relevancy import criterion

    gp = random_gp(80, 5)
    relevancy = WassersteinRelevancy.from_gp(gp, 10.5)
    dense = WassersteinRelevancy.from_gp(gp, 10.5)
    batch = criterion._RemovalBatch(relevancy, 6, numpy_steps=False)
    batch.load()
    # c candidates per step, the 6c least relevant (the first step's choice among them),
    # each with its row; the others share row 6c, of zeros
    count = 6 * criterion._CANDIDATES_PER_STEP
    assert batch._candidate_products.shape[0] == count + 1
    assert not batch._candidate_products[count].any()
    rows_of = batch._candidate_row
    candidates = torch.nonzero(rows_of < count).flatten()
    assert sorted(rows_of[candidates].tolist()) == list(range(count))
    order = torch.argsort(relevancy.relevancies())
    assert set(candidates.tolist()) == set(order[:count].tolist())
    assert set(batch._candidates.tolist()) == set(candidates.tolist())
    live = list(range(80))
    for k in range(6):
        batch.step()
        position, _, _, exact = batch.record(k)
        assert exact
        # the dense criterion before this removal: s = P_k Q_k[:, o] over the live rows
        index = live.index(position)
        expected = dense.precision @ dense.product[:, index]
        got = batch._columns[k, 2] - batch._columns[:k, 0].T @ (
            batch._scaled[:k] @ batch._columns[k, 1]
        )
        rows = torch.tensor(live)
        np.testing.assert_allclose(
            got[rows].numpy(), expected.numpy(), rtol=0, atol=1e-9 * float(expected.abs().max())
        )
        dense.remove(index)
        live.remove(position)


@pytest.mark.parametrize(
    "n,seed,dtype", [(60, 2, "float64"), (300, 6, "float64"), (60, 3, "float32")]
)
def test_the_numpy_steps_on_a_cpu_equal_the_torch_steps(n, seed, dtype, monkeypatch):
    # on a CPU a batch steps in NumPy on views of its tensors; the torch step (what a GPU
    # runs) must make the same choices with the same numbers to rounding
    from dynbo.relevancy import criterion

    gp = random_gp(n, seed)
    budget = 1.0 + 0.04 * n
    precision = getattr(torch, dtype)

    def criterion_of(gp):
        relevancy = WassersteinRelevancy.from_gp(gp, 10.5)
        # the same criterion in the policy's dtype (the float64 one rounded)
        return WassersteinRelevancy(
            relevancy.precision.to(precision),
            relevancy.alpha.to(precision),
            relevancy.convolutions.to(precision),
            float(gp.hyperparameters.outputscale),
        )

    built = []
    real = criterion._HostViews

    def spy(batch):
        built.append(batch)
        return real(batch)

    monkeypatch.setattr(criterion, "_HostViews", spy)
    host = criterion_of(gp)
    on_host = host.remove_least_relevant(n - 2, budget=budget, batch_size=7)
    assert built, "the NumPy steps did not run"
    monkeypatch.setattr(criterion, "_HostViews", lambda batch: None)
    # ample candidates: a miss would end a torch batch where the NumPy steps' goes on, and
    # the commits would sum the same terms in other groups (misses: tested above)
    monkeypatch.setattr(criterion, "_CANDIDATES_PER_STEP", 8)
    torch_steps = criterion_of(gp)
    on_torch = torch_steps.remove_least_relevant(n - 2, budget=budget, batch_size=7)
    assert on_torch.misses == 0
    rtol = 1e-12 if dtype == "float64" else 1e-4
    assert len(on_host.indices) > 5
    assert on_host.indices == on_torch.indices
    assert on_host.stopped_by == on_torch.stopped_by
    np.testing.assert_allclose(on_host.relevancies, on_torch.relevancies, rtol=rtol)
    assert on_host.budget == pytest.approx(on_torch.budget, rel=rtol)
    # the storage the batches committed to is the same
    if dtype == "float64":
        assert_same_state(host, torch_steps)
    else:
        np.testing.assert_array_equal(host.indices.numpy(), torch_steps.indices.numpy())
        for name in ("precision", "alpha", "product", "relevancies"):
            a = getattr(host, name)
            a, b = (a() if callable(a) else a), getattr(torch_steps, name)
            b = b() if callable(b) else b
            scale = float(b.abs().max())
            assert float((a - b).abs().max()) <= 1e-4 * scale, name


def test_a_speculative_cpu_loop_keeps_the_torch_steps(monkeypatch):
    from dynbo.relevancy import criterion

    built = []
    monkeypatch.setattr(criterion, "_HostViews", lambda batch: built.append(batch))
    relevancy = WassersteinRelevancy.from_gp(random_gp(40, 1), 10.5)
    relevancy.remove_least_relevant(20, budget=3.0, speculative=True)
    assert built == []
    relevancy.remove_least_relevant(10, budget=3.0, speculative=False)
    assert built


def test_the_graphed_loop_replays_its_steps_and_recaptures_after_a_compaction(monkeypatch):
    # on CUDA, the speculative steps replay a captured graph of one step (tests/test_cuda.py
    # checks the graph itself); here the loop around it on a CPU, with a stand-in whose
    # "replay" runs the same torch step: every batch of 4 or more steps replays, each from
    # the committed state (load()), and a new capture once a compaction has moved the
    # storage
    from dynbo.relevancy import criterion

    captures = []
    replayed = []

    class Replayed(criterion._GraphedRemovalStep):
        def __init__(self, batch):
            self.batch = batch
            captures.append((batch.capacity, batch._relevancy._PQ.shape[1]))
            # what a real capture leaves: its warm-up ran one step, and the captured one
            # counted a second on the host (on a CPU it runs: a second row written)
            batch.load()
            batch.step()
            batch.step()

        def run(self, steps):
            assert not self.batch.stale() and self.batch.count == 0  # loaded, current
            for _ in range(steps):
                self.batch.step()
            replayed.append(steps)

    gp = random_gp(300, 6)
    budget = 1.0 + 0.04 * 300
    eager = WassersteinRelevancy.from_gp(gp, 10.5)
    expected = eager.remove_least_relevant(298, budget=budget, batch_size=7, speculative=True)
    with pytest.raises(ValueError, match="CUDA"):
        WassersteinRelevancy.from_gp(gp, 10.5).remove_least_relevant(5, graphed=True)
    monkeypatch.setattr(criterion, "_graphs_supported", lambda device: True)
    monkeypatch.setattr(criterion, "_GraphedRemovalStep", Replayed)
    graphed = WassersteinRelevancy.from_gp(gp, 10.5)
    removals = graphed.remove_least_relevant(298, budget=budget, batch_size=7, speculative=True)
    # the same torch operations from the same states: the same numbers, bit for bit
    assert removals.indices == expected.indices
    assert removals.relevancies == expected.relevancies
    assert removals.budget == expected.budget
    assert removals.batches == expected.batches
    assert removals.steps == expected.steps
    np.testing.assert_array_equal(graphed.precision.numpy(), eager.precision.numpy())
    # batches 1 and 2 (eager), 4, then full ones of 7 (replayed), one capture per
    # storage: the storage of 300 is compacted before a batch once a quarter of it is dead
    assert len(expected.indices) > 280
    assert replayed[:2] == [4, 7] and set(replayed[1:]) <= {7, 5, 3, 1}
    assert sum(replayed) + 3 == removals.steps
    sizes = [size for _, size in captures]
    assert {capacity for capacity, _ in captures} == {7}
    assert sizes[0] == 300 and len(sizes) >= 4
    assert all(4 * later < 3 * earlier for earlier, later in zip(sizes, sizes[1:]))
    with pytest.raises(ValueError, match="speculative"):
        WassersteinRelevancy.from_gp(gp, 10.5).remove_least_relevant(
            5, speculative=False, graphed=True
        )
    # a loop of three removals (batches of 1 and 2 steps) never captures
    captures.clear()
    few = WassersteinRelevancy.from_gp(gp, 10.5).remove_least_relevant(3, speculative=True)
    assert len(few.indices) == 3 and captures == []


def test_a_failed_capture_falls_back_to_eager_steps_with_the_same_results(monkeypatch):
    # a capture that fails after its warm-up ran (the batch's state changed) or midway:
    # the loop warns once, runs its steps eagerly and removes what the eager loop removes
    from dynbo.relevancy import criterion

    attempts = []

    class Failing(criterion._GraphedRemovalStep):
        def __init__(self, batch):
            attempts.append(batch._relevancy._PQ.shape[1])
            batch.load()
            batch.step()
            batch.step()
            raise RuntimeError("operation not permitted when stream is capturing")

    gp = random_gp(150, 4)
    budget = 1.0 + 0.04 * 150
    eager = WassersteinRelevancy.from_gp(gp, 10.5)
    expected = eager.remove_least_relevant(148, budget=budget, batch_size=7, speculative=True)
    monkeypatch.setattr(criterion, "_graphs_supported", lambda device: True)
    monkeypatch.setattr(criterion, "_GraphedRemovalStep", Failing)
    fallback = WassersteinRelevancy.from_gp(gp, 10.5)
    with pytest.warns(RuntimeWarning, match="without a CUDA graph"):
        removals = fallback.remove_least_relevant(
            148, budget=budget, batch_size=7, speculative=True
        )
    assert len(attempts) == 1  # not tried again after a compaction
    assert removals.indices == expected.indices
    assert removals.relevancies == expected.relevancies
    assert removals.budget == expected.budget
    np.testing.assert_array_equal(fallback.precision.numpy(), eager.precision.numpy())


class _DispatchedOperations(TorchDispatchMode):
    """The aten operations dispatched in the block: name, and shape of each tensor argument."""

    def __init__(self):
        super().__init__()
        self.operations = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        shapes = [
            tuple(a.shape) if isinstance(a, torch.Tensor) else None
            for a in (*args, *kwargs.values())
        ]
        self.operations.append((str(func), shapes))
        return func(*args, **kwargs)


def test_a_torch_step_is_the_same_kernels_at_every_step():
    # what lets one captured step replay as any step of a batch: the step index is on the
    # device and the corrections run over every row (zero past the steps taken); every
    # step dispatches the same operations on the same shapes, and a batch started over
    # (load()) gives the same results as a fresh one, bit for bit
    from dynbo.relevancy import criterion

    relevancy = WassersteinRelevancy.from_gp(random_gp(60, 2), 10.5)
    batch = criterion._RemovalBatch(relevancy, 5, numpy_steps=False)
    batch.load()
    dispatched = []
    for _ in range(3):
        with _DispatchedOperations() as operations:
            batch.step()
        dispatched.append(operations.operations)
    assert dispatched[0] == dispatched[1] == dispatched[2]
    assert len(dispatched[0]) > 20
    assert int(batch._step) == 3 and batch.count == 3
    assert not batch._columns[3:].any() and not batch._scaled[3:].any()
    first = (batch._columns[:3].clone(), batch._scalars[:3].clone(), batch.records())
    batch.load()
    assert int(batch._step) == 0 and not batch._columns.any() and not batch._scaled.any()
    for _ in range(3):
        batch.step()
    assert torch.equal(batch._columns[:3], first[0])
    assert torch.equal(batch._scalars[:3], first[1])
    assert batch.records() == first[2]
    fresh = criterion._RemovalBatch(relevancy, 5, numpy_steps=False)
    fresh.load()
    for _ in range(3):
        fresh.step()
    assert fresh.records() == first[2]
    # a compaction moves the storage: the batch is stale
    assert not batch.stale()
    relevancy.remove_least_relevant(40, speculative=True)
    assert batch.stale()


def _origins(n, indices):
    positions = list(range(n))
    return [positions.pop(i) for i in indices]


@pytest.mark.parametrize("temporal", ["se", "matern12"])
def test_batches_down_to_the_last_observation_without_a_budget(temporal):
    # BOLT's loop: no budget, a removal count (here all but one observation)
    gp = random_gp(80, 11, spatial="se", temporal=temporal)
    reference = WassersteinRelevancy.from_gp(gp, 10.5)
    batched = WassersteinRelevancy.from_gp(gp, 10.5)
    indices, values, left, gaps = one_at_a_time(reference, 79, math.inf)
    assert min(gaps[::2]) > DECIDED and left == math.inf
    removals = batched.remove_least_relevant(79, batch_size=16)
    assert removals.indices == indices and removals.stopped_by == "limit"
    assert removals.budget == math.inf and batched.n == 1
    np.testing.assert_allclose(removals.relevancies, values, rtol=1e-9)
    assert_same_state(reference, batched)


def test_a_budget_that_allows_none_removes_none():
    gp = random_gp(40, 3)
    relevancy = WassersteinRelevancy.from_gp(gp, 10.5)
    smallest = float(relevancy.relevancies().min())
    before = relevancy.precision
    for budget in (1.0, 0.5, 1.0 + 0.5 * smallest):
        for speculative in (False, True):
            removals = relevancy.remove_least_relevant(38, budget=budget, speculative=speculative)
            assert removals.indices == [] and removals.stopped_by == "budget"
            assert removals.budget == budget
    assert relevancy.remove_least_relevant(0, budget=10.0).stopped_by == "limit"
    assert torch.equal(relevancy.precision, before) and relevancy.n == 40


def test_all_relevancies_zero_ties_go_to_the_first_observation():
    # W_D underflows to 0 (SE in time, the present 10^3 lengthscales later): every R_i is
    # exactly 0, an exact tie that the paper's loop (torch.argmin) breaks by index
    gp = random_gp(30, 5, spatial="se", temporal="se")
    for speculative in (False, True):
        relevancy = WassersteinRelevancy.from_gp(gp, 2000.0)
        assert float(relevancy.squared_normalizer()) == 0.0
        removals = relevancy.remove_least_relevant(25, budget=2.0, speculative=speculative)
        assert removals.indices == [0] * 25 and removals.origins == list(range(25))
        assert removals.relevancies == [0.0] * 25 and removals.budget == 2.0
        # the torch steps' candidates take tied values in the order of their index, as
        # the argmins do: no batch misses
        assert removals.misses == 0


def test_duplicated_observations_tie_and_either_copy_goes():
    # Exact copies have equal relevancies in exact arithmetic: the paper's loop may remove
    # either (rounding decides, in both loops). Their times and the posterior agree.
    rng = np.random.default_rng(8)
    kernel = KernelSpec(dim=2, spatial="matern52", temporal="matern32")
    hyper = Hyperparameters(
        outputscale=1.0, lengthscale_space=(0.3,), lengthscale_time=2.0, noise=0.05
    )
    x = rng.random((20, 2))
    t = np.sort(rng.uniform(0, 10, 20))
    y = np.sin(3 * x.sum(1)) + np.cos(t)
    inputs = torch.tensor(np.r_[np.c_[x, t], np.c_[x, t]])
    gp = SpatioTemporalGP(kernel, hyper, dtype=torch.float64)
    gp.set_data(inputs, torch.tensor(np.r_[y, y]))
    reference = WassersteinRelevancy.from_gp(gp, 10.5)
    batched = WassersteinRelevancy.from_gp(gp, 10.5)
    indices, values, left, _ = one_at_a_time(reference, 30, 1.3)
    removals = batched.remove_least_relevant(30, budget=1.3, batch_size=4)
    times = inputs[:, -1].tolist()
    assert [times[i] for i in removals.origins] == [times[i] for i in _origins(40, indices)]
    np.testing.assert_allclose(removals.relevancies, values, rtol=1e-8)
    assert removals.budget == pytest.approx(left, rel=1e-12)
    test = torch.tensor(np.c_[rng.random((16, 2)), np.full(16, 10.5)])
    means = []
    for origins in (_origins(40, indices), removals.origins):
        copy = SpatioTemporalGP(kernel, gp.hyperparameters, dtype=torch.float64)
        keep = [i for i in range(40) if i not in set(origins)]
        copy.set_data(inputs[keep], gp.targets[keep], keep_scale=True)
        means.append(copy.predict(test, standardized=True)[0])
    torch.testing.assert_close(means[0], means[1], rtol=0, atol=1e-10)


def test_stop_is_called_where_the_one_at_a_time_loop_calls_it():
    gp = random_gp(120, 9)
    for cut in (1, 2, 9, 30):
        for speculative in (False, True):
            calls = {"reference": 0, "batched": 0}

            def stop(name, cut=cut, calls=calls):
                calls[name] += 1
                return calls[name] == cut

            reference = WassersteinRelevancy.from_gp(gp, 10.5)
            batched = WassersteinRelevancy.from_gp(gp, 10.5)
            indices, _, left, _ = one_at_a_time(reference, 118, 4.0, lambda: stop("reference"))
            removals = batched.remove_least_relevant(
                118, budget=4.0, stop=lambda: stop("batched"), speculative=speculative
            )
            assert removals.indices == indices and len(indices) == cut - 1
            assert removals.stopped_by == "stop" and calls["batched"] == calls["reference"]
            assert removals.budget == pytest.approx(left, rel=1e-12)
            assert_same_state(reference, batched)
    # without a cut: one call per removal plus the one before the budget stops it
    calls = []
    removals = WassersteinRelevancy.from_gp(gp, 10.5).remove_least_relevant(
        118, budget=1.5, stop=lambda: calls.append(1) and False, speculative=True
    )
    assert removals.stopped_by == "budget" and len(calls) == len(removals.indices) + 1


def test_remove_sequence_equals_repeated_removes():
    gp = random_gp(120, 4)
    rng = np.random.default_rng(0)
    test = torch.tensor(np.c_[rng.random((10, 2)), np.full(10, 10.5)])
    for count in (1, 3, 40):  # one at a time (bit for bit), then one refactorization
        indices = [int(rng.integers(0, 120 - k)) for k in range(count)]
        repeated = SpatioTemporalGP(gp.kernel, gp.hyperparameters, dtype=torch.float64)
        repeated.load_state_dict(gp.state_dict())
        sequence = SpatioTemporalGP(gp.kernel, gp.hyperparameters, dtype=torch.float64)
        sequence.load_state_dict(gp.state_dict())
        for index in indices:
            repeated.remove(index)
        sequence.remove_sequence(indices)
        assert torch.equal(repeated.inputs, sequence.inputs)
        if count < 3:
            assert torch.equal(repeated.cholesky_factor, sequence.cholesky_factor)
        torch.testing.assert_close(
            repeated.cholesky_factor, sequence.cholesky_factor, rtol=0, atol=1e-12
        )
        mean_a, var_a = repeated.predict(test)
        mean_b, var_b = sequence.predict(test)
        torch.testing.assert_close(mean_a, mean_b, rtol=0, atol=1e-10)
        torch.testing.assert_close(var_a, var_b, rtol=0, atol=1e-10)
    with pytest.raises(IndexError):
        sequence.remove_sequence([0, 500])


def test_a_block_that_loses_definiteness_is_deleted_row_by_row(monkeypatch):
    gp = random_gp(60, 1)
    repeated = SpatioTemporalGP(gp.kernel, gp.hyperparameters, dtype=torch.float64)
    repeated.load_state_dict(gp.state_dict())
    indices = list(range(0, 40, 2))
    for index in indices:
        repeated.remove(index)
    monkeypatch.setattr("dynbo.models.gp.cholesky_delete_rows", lambda factor, rows: None)
    gp.remove_sequence(indices)
    assert torch.equal(repeated.cholesky_factor, gp.cholesky_factor)
    assert linalg.cholesky_delete_rows(repeated.cholesky_factor, []).shape == (40, 40)


# ----------------------------------------------------------------------------- policies
FIXED = {
    "learn_hyperparameters": False,
    "initial_hyperparameters": {
        "outputscale": 1.0,
        "lengthscale_space": 0.3,
        "lengthscale_time": 2.0,
        "noise": 0.01,
    },
    "candidates": np.random.default_rng(1).uniform(0, 1, (32, 2)),
}


def observed(name, n, seed, **options):
    """A policy that observed n points over 5 temporal lengthscales."""
    rng = np.random.default_rng(seed)
    policy = make(name, bounds=[[0, 0], [1, 1]], seed=0, **FIXED, **options)
    for t in np.sort(rng.uniform(0, 10, n)):
        x = rng.uniform(0, 1, 2)
        policy.observe(x, t, float(np.sin(4 * x[0]) + np.cos(3 * x[1]) * np.cos(t)))
    return policy


def pair(name, n, seed, **options):
    """The same policy twice: batched removals, and the one-at-a-time reference."""
    batched = observed(name, n, seed, **options)
    reference = Policy.from_state_dict(batched.state_dict())
    reference.batched_removals = False
    return batched, reference


def assert_same_policies(batched, reference):
    a, b = batched.diagnostics, reference.diagnostics
    assert a.removed == b.removed
    assert a.extra["removed_times"] == b.extra["removed_times"]
    np.testing.assert_allclose(
        a.extra.get("removed_relevancies", []), b.extra.get("removed_relevancies", []), rtol=1e-9
    )
    assert a.extra.get("removal_cut") == b.extra.get("removal_cut")
    np.testing.assert_array_equal(batched.dataset.t, reference.dataset.t)
    test = torch.tensor(np.c_[np.random.default_rng(3).random((20, 2)), np.full(20, 10.5)])
    means = [p.model.predict(test)[0] for p in (batched, reference)]
    variances = [p.model.predict(test)[1] for p in (batched, reference)]
    torch.testing.assert_close(means[0], means[1], rtol=0, atol=1e-10)
    torch.testing.assert_close(variances[0], variances[1], rtol=0, atol=1e-10)


@pytest.mark.parametrize(
    "n,seed,budget", [(20, 0, 1.5), (80, 1, 3.0), (200, 2, 6.0), (300, 3, 1e9)]
)
def test_wdbo_batched_loop_equals_the_papers_loop(n, seed, budget):
    batched, reference = pair("wdbo", n, seed, min_dataset_size=3)
    for policy in (batched, reference):
        policy._budget = budget
        policy.suggest(10.5)
    assert batched.diagnostics.removed > 0
    if budget == 1e9:
        assert batched.dataset_size == 3
    assert batched.budget == pytest.approx(reference.budget, rel=1e-12)
    assert_same_policies(batched, reference)


@pytest.mark.parametrize("n,seed,cap", [(30, 0, 12), (150, 1, 40), (300, 2, 100)])
@pytest.mark.parametrize("until_cap", [True, False])
def test_bolt_batched_loop_equals_the_papers_loop(n, seed, cap, until_cap):
    batched, reference = pair("bolt", n, seed, remove_until_cap=until_cap)
    for policy in (batched, reference):
        policy._max_size = cap  # no response-time model yet: n* stays as set
        policy.suggest(10.5)
    assert batched.dataset_size == (cap if until_cap else n - 1)
    assert_same_policies(batched, reference)


def test_wdbo_budget_cut_replays_at_the_same_check():
    batched, reference = pair("wdbo", 100, 4, min_dataset_size=2)
    for policy in (batched, reference):
        policy._budget = 1e9
        # the removal loop's sixth check: cut before removal 6
        policy.suggest(10.5, budget=Budget.replay([("removal loop", 6)]))
        report = policy.diagnostics.extra["time_budget"]
        assert report["spent_at"][0]["where"] == "removal loop"
    assert batched.diagnostics.extra["removal_cut"] == "stopped after 5 removal(s)"
    assert (
        batched.diagnostics.extra["time_budget"]["checks"]
        == (reference.diagnostics.extra["time_budget"]["checks"])
    )
    assert_same_policies(batched, reference)


def test_a_hard_deadline_in_the_batched_loop_raises_and_restores_the_policy():
    policy = observed("wdbo", 60, 5)
    policy._budget = 1e9
    factor = policy.model.cholesky_factor.clone()

    class CancelledInTheLoop(deadline.Deadline):
        """Cancelled at the removal loop's first check (after the criterion's)."""

        def check(self, where):
            if where == "removal loop":
                self.cancel.set()
            super().check(where)

    event = CancelledInTheLoop()
    with deadline.within(event), pytest.raises(Cancelled, match="removal loop"):
        policy.suggest(10.5)
    assert torch.equal(policy.model.cholesky_factor, factor)
    assert policy.dataset_size == 60 and policy.budget == 1e9


def test_float32_removals_update_the_storage_on_both_paths(monkeypatch):
    # the NumPy path's BLAS rank-one update must match the storage's precision (a
    # float64 routine on float32 storage updated a copy and left P and Q as they were)
    gp = random_gp(50, 0)
    gp32 = SpatioTemporalGP(gp.kernel, gp.hyperparameters, dtype=torch.float32)
    gp32.set_data(gp.inputs.float(), gp.targets.float())
    reference = WassersteinRelevancy.from_gp(gp, 10.5)
    reference.remove(3)
    for host_storage in (512, 0):  # NumPy on views, then the torch path
        monkeypatch.setattr("dynbo.relevancy.criterion._HOST_MAX_STORAGE", host_storage)
        relevancy = WassersteinRelevancy.from_gp(gp32, 10.5)
        relevancy.remove(3)
        error = (relevancy.precision.double() - reference.precision).abs().max()
        assert float(error) < 1e-4 * float(reference.precision.abs().max())


def test_float32_batches_remove_what_the_one_at_a_time_loop_removes():
    gp = random_gp(60, 2)
    gp32 = SpatioTemporalGP(gp.kernel, gp.hyperparameters, dtype=torch.float32)
    gp32.set_data(gp.inputs.float(), gp.targets.float())
    reference = WassersteinRelevancy.from_gp(gp32, 10.5)
    batched = WassersteinRelevancy.from_gp(gp32, 10.5)
    indices, values, left, gaps = one_at_a_time(reference, 58, 2.0)
    assert min(gaps) > 1e-3  # decided in float32 too
    removals = batched.remove_least_relevant(58, budget=2.0, batch_size=8)
    assert removals.indices == indices and len(indices) > 20
    np.testing.assert_allclose(removals.relevancies, values, rtol=1e-3)
    assert removals.budget == pytest.approx(left, rel=1e-5)


def run_benchmark(tmp_path, script, *arguments):
    """The JSON report of ``benchmarks/<script> <arguments> --repeats 1`` (stdout and
    ``--out`` the same)."""
    out = tmp_path / "report.json"
    root = Path(__file__).resolve().parents[1]
    command = [sys.executable, f"benchmarks/{script}", *arguments, "--repeats", "1"]
    result = subprocess.run(
        [*command, "--out", str(out)],
        cwd=root, capture_output=True, text=True, timeout=300, check=True,
    )  # fmt: skip
    report = json.loads(result.stdout)
    assert json.loads(out.read_text()) == report
    return report


def test_the_compaction_benchmark_runs_end_to_end(tmp_path):
    report = run_benchmark(
        tmp_path, "removal_compaction.py", "--sizes", "40", "--fractions", "0.5", "0.9"
    )
    [size] = report["sizes"]
    assert size["removals"] > 0 and size["same_removals"] is True
    assert [f["compact_below"] for f in size["fractions"]] == [0.5, 0.9]
    # 0.9 compacts at least as often as 0.5, and nothing captures on a CPU
    first, second = size["fractions"]
    assert second["compactions"] >= first["compactions"]
    assert first["captures"] == second["captures"] == 0
    assert report["default_compact_below"] == 0.75


def test_the_candidates_benchmark_runs_end_to_end(tmp_path):
    report = run_benchmark(
        tmp_path, "removal_candidates.py", "--sizes", "60", "--per-step", "0", "1", "4"
    )
    [size] = report["sizes"]
    assert size["removals"] > 0 and size["same_removals"] is True
    direct, one, four = size["settings"]
    assert [s["candidates_per_step"] for s in size["settings"]] == [0, 1, 4]
    # no candidates, no misses; each miss ends a batch early
    assert direct["misses"] == 0 and one["batches"] >= four["batches"]
    assert all(s["steps"] >= size["removals"] for s in size["settings"])
    from dynbo.relevancy import criterion

    assert report["default_candidates_per_step"]["cpu"] == criterion._CANDIDATES_PER_STEP


def test_cpu_torch_steps_take_the_cpu_candidates_per_step():
    # the GPU's rule (none where P fits its L2 cache) is tested in test_cuda.py
    from dynbo.relevancy import criterion

    assert criterion._candidates_per_step(torch.zeros(3000, 3)) == criterion._CANDIDATES_PER_STEP


def test_a_compaction_can_cross_from_candidates_to_a_product_per_step(monkeypatch):
    # on a GPU the candidates depend on the storage's size (none once P fits the L2
    # cache): a compaction between batches can switch a loop from one to the other, and
    # its removals stay the one-at-a-time loop's
    from dynbo.relevancy import criterion

    gp = random_gp(150, 8)
    budget = 1.0 + 0.04 * 150
    reference = WassersteinRelevancy.from_gp(gp, 10.5)
    indices, values, left, _ = one_at_a_time(reference, 148, budget)
    sizes = []

    def by_size(P):
        sizes.append(P.shape[0])
        return 8 if P.shape[0] > 120 else 0

    monkeypatch.setattr(criterion, "_candidates_per_step", by_size)
    batched = WassersteinRelevancy.from_gp(gp, 10.5)
    removals = batched.remove_least_relevant(148, budget=budget, batch_size=7, speculative=True)
    assert max(sizes) > 120 >= min(sizes), "no compaction crossed the rule's size"
    assert removals.indices == indices
    np.testing.assert_allclose(removals.relevancies, values, rtol=1e-9)
    assert removals.budget == pytest.approx(left, rel=1e-12)
    assert_same_state(reference, batched)
