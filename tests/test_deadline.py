"""Cooperative deadlines (dynbo.deadline): where the inner loops stop, by how much a
budget can be overrun, and that an interrupted suggest leaves the policy as it was."""

import threading

import numpy as np
import pytest
import torch

from dynbo import deadline
from dynbo.acquisition.optimize import (
    BUDGET_RAW_BATCH,
    RAW_CHUNK,
    BoxSearch,
    maximize_on_box,
    maximize_on_candidates,
)
from dynbo.deadline import (
    Budget,
    BudgetSpent,
    Cancelled,
    Deadline,
    DeadlineExceeded,
    within,
)
from dynbo.models import SpatioTemporalGP
from dynbo.models.fit import fit_hyperparameters
from dynbo.models.kernel import DIFFERENCE_CHUNK_ELEMENTS, KernelSpec, _squared_distance
from dynbo.policies import make
from tests.test_service_manager import assert_states_equal, without_timings


class Ticks:
    """A clock that advances only when told (one tick per unit of work)."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def cancelled():
    event = threading.Event()
    event.set()
    return Deadline(cancel=event)


def test_check_is_a_no_op_without_a_deadline_and_the_deadline_is_scoped():
    deadline.check("anything")
    with within(cancelled()):
        with pytest.raises(Cancelled, match="cancelled in the loop"):
            deadline.check("loop")
        with within(None):  # a nested scope without a deadline (a replay from the log)
            deadline.check("loop")
    deadline.check("anything")


def test_a_deadline_needs_a_positive_budget():
    for bad in (0, -1.0):
        with pytest.raises(ValueError, match="positive number of seconds"):
            Deadline(bad)


def test_the_budget_is_overrun_by_at_most_one_acquisition_batch():
    clock = Ticks()
    calls = []

    def acquisition(x):
        calls.append(len(x))
        clock.now += 1.0  # each batch costs one "second"
        return -((x - 0.3) ** 2).sum(-1)

    search = BoxSearch(raw_samples=64, restarts=4, max_iterations=100)
    with within(Deadline(3.5, clock=clock)):
        with pytest.raises(DeadlineExceeded) as info:
            maximize_on_box(
                acquisition, 2, search=search, generator=torch.Generator().manual_seed(0)
            )
    # batches started at t = 0, 1, 2, 3 (each under the budget when it started); the
    # check before the fifth saw t = 4 > 3.5 and stopped
    assert len(calls) == 4
    assert info.value.where == "acquisition search" and info.value.elapsed == 4.0
    assert "over the time budget of 3.5 s" in str(info.value)


def test_candidate_search_and_the_raw_sample_chunks_stop_at_a_cancellation():
    # the first chunk always runs (a search has an answer); the check before the second
    # one stops a cancelled search
    calls = []

    def values(x):
        calls.append(len(x))
        return x.sum(-1)

    with within(cancelled()):
        with pytest.raises(Cancelled):
            maximize_on_candidates(values, torch.rand(10, 2, dtype=torch.float64), chunk=4)
        assert calls == [4]
        with pytest.raises(Cancelled):
            maximize_on_box(
                values,
                2,
                search=BoxSearch(raw_samples=2 * RAW_CHUNK),
                generator=torch.Generator().manual_seed(0),
            )
        assert calls == [4, RAW_CHUNK]


def test_the_fit_stops_after_the_likelihood_evaluation_that_passed_the_budget():
    gen = torch.Generator().manual_seed(1)
    x = torch.rand(20, 2, generator=gen, dtype=torch.float64)
    t = torch.arange(20, dtype=torch.float64)
    y = torch.sin(6 * x[:, 0]) + 0.01 * t
    gp = SpatioTemporalGP(KernelSpec(dim=2))
    gp.set_data(torch.cat([x, t[:, None]], dim=1), y)
    clock = Ticks()
    evaluations = []
    import dynbo.models.fit as fit_module

    original = fit_module.NegativeLogMarginalLikelihood._evaluate

    def counted(self, theta):
        evaluations.append(1)
        clock.now += 1.0
        return original(self, theta)

    fit_module.NegativeLogMarginalLikelihood._evaluate = counted
    try:
        with within(Deadline(2.5, clock=clock)):
            with pytest.raises(DeadlineExceeded, match="hyperparameter fit"):
                fit_hyperparameters(gp, max_iterations=50)
    finally:
        fit_module.NegativeLogMarginalLikelihood._evaluate = original
    assert len(evaluations) == 3  # at t = 0, 1, 2; stopped before the fourth (t = 3)


@pytest.mark.parametrize("name", ["gp-ucb", "wdbo"])
def test_an_interrupted_suggest_leaves_the_policy_as_it_was(name):
    options = dict(bounds=[[0.0, 0.0], [1.0, 1.0]], seed=3, raw_samples=64, restarts=2)
    twin, policy = make(name, **options), make(name, **options)
    rng = np.random.default_rng(0)
    for k in range(8):
        x, y = rng.random(2), float(rng.normal())
        for p in (twin, policy):
            p.observe(x, float(k), y)
    before = policy.state_dict()
    with within(cancelled()):
        with pytest.raises(Cancelled):
            policy.suggest(8.0)
    assert_states_equal(before, policy.state_dict())
    # and it goes on exactly as an uninterrupted twin
    np.testing.assert_array_equal(policy.suggest(8.0).x, twin.suggest(8.0).x)


def test_squared_distances_in_chunks_are_the_same_numbers():
    gen = torch.Generator().manual_seed(2)
    d = 16
    rows = DIFFERENCE_CHUNK_ELEMENTS // (50 * d) * 3 + 7  # three and a bit chunks
    a = torch.rand(rows, d, generator=gen, dtype=torch.float64)
    b = torch.rand(50, d, generator=gen, dtype=torch.float64)
    diff = a[:, None, :] - b[None, :, :]
    assert torch.equal(_squared_distance(a, b), (diff * diff).sum(-1))
    # with batch dimensions too
    a2, b2 = a[None].expand(2, -1, -1), b[None].expand(2, -1, -1)
    assert torch.equal(_squared_distance(a2, b2)[1], (diff * diff).sum(-1))


@pytest.mark.parametrize("d", [0, 1, 3, 7, 16, 17, 64])
def test_squared_distances_dimension_first_agree_with_last_axis_sums(d):
    # up to 16 dimensions the differences are laid out dimension first and added in
    # dimension order: the last-axis sums' numbers to rounding (the same for d <= 3), and
    # the distances of a set with itself exactly symmetric
    gen = torch.Generator().manual_seed(d)
    a = torch.rand(3, 40, d, generator=gen, dtype=torch.float64)
    b = torch.rand(25, d, generator=gen, dtype=torch.float64)
    diff = a[:, :, None, :] - b[None, None, :, :]
    expected = (diff * diff).sum(-1)
    got = _squared_distance(a, b)
    assert got.shape == (3, 40, 25)
    if d <= 3:
        assert torch.equal(got, expected)
    torch.testing.assert_close(got, expected, rtol=1e-14, atol=1e-14)
    square = _squared_distance(a[0], a[0])
    assert torch.equal(square, square.T)
    # autograd through the dimension-first layout: d/da of the sum is 2 (a - b) summed
    leaf = a.clone().requires_grad_(True)
    _squared_distance(leaf, b).sum().backward()
    torch.testing.assert_close(leaf.grad, 2 * diff.sum(-2), rtol=1e-13, atol=1e-13)


# ---------------------------------------------------------------------- soft budgets


def peak(x):
    return -((x - 0.3) ** 2).sum(-1)


def sobol_points(seed, dim, count):
    """The raw sample ``maximize_on_box`` draws from ``torch.Generator().manual_seed(seed)``."""
    import math

    import scipy.stats

    draw = int(torch.randint(0, 2**31 - 1, (1,), generator=torch.Generator().manual_seed(seed)))
    sobol = scipy.stats.qmc.Sobol(dim, scramble=True, seed=draw)
    return torch.as_tensor(sobol.random_base2(math.ceil(math.log2(count))))[:count]


def test_a_spent_budget_ends_the_raw_sample_with_the_best_point_evaluated():
    clock = Ticks()
    sizes = []

    def acquisition(x):
        sizes.append(len(x))
        clock.now += 1.0
        return peak(x)

    record = {}
    search = BoxSearch(raw_samples=3 * RAW_CHUNK)
    with within(Budget(2.5, clock=clock)):
        x, value = maximize_on_box(
            acquisition, 2, search=search, generator=torch.Generator().manual_seed(0), record=record
        )
    # under a budget the raw sample is evaluated in pieces of BUDGET_RAW_BATCH points: the
    # first (t = 0 -> 1) and the second (1 -> 2) ran; a third would end at 3 > 2.5
    assert sizes == [BUDGET_RAW_BATCH] * 2
    evaluated_count = 2 * BUDGET_RAW_BATCH
    assert record["budget_cut"] == f"raw samples: {evaluated_count} of {3 * RAW_CHUNK} evaluated"
    # the best of the pieces evaluated (the same Sobol draw as an unbudgeted search)
    evaluated = sobol_points(0, 2, 3 * RAW_CHUNK)[:evaluated_count]
    best = int(torch.argmax(peak(evaluated)))
    assert torch.equal(x, evaluated[best]) and value == float(peak(evaluated)[best])


def test_the_raw_samples_pieces_are_a_kind_of_their_own_in_a_replay():
    """The pieces' checks (deadline.RAW_SAMPLE) leave the acquisition search's ordinals as
    they are without them: a recorded cut at a batch boundary cuts there."""
    search = BoxSearch(raw_samples=3 * RAW_CHUNK)
    for script, evaluated in (
        ([(deadline.ACQUISITION, 1)], RAW_CHUNK),
        ([(deadline.ACQUISITION, 2)], 2 * RAW_CHUNK),
        ([(deadline.RAW_SAMPLE, 5)], 5 * BUDGET_RAW_BATCH),
    ):
        record = {}
        with within(Budget.replay(script)):
            x, _ = maximize_on_box(
                peak, 2, search=search, generator=torch.Generator().manual_seed(0), record=record
            )
        assert record["budget_cut"] == f"raw samples: {evaluated} of {3 * RAW_CHUNK} evaluated"
        points = sobol_points(0, 2, 3 * RAW_CHUNK)[:evaluated]
        assert torch.equal(x, points[int(torch.argmax(peak(points)))])


def test_a_spent_budget_ends_the_gradient_search_with_the_best_point_seen():
    clock = Ticks()
    batches = []

    def acquisition(x):
        batches.append(x.detach().clone())
        clock.now += 1.0
        return peak(x)

    record = {}
    search = BoxSearch(raw_samples=64, restarts=4, max_iterations=100)
    with within(Budget(3.5, clock=clock)):
        x, value = maximize_on_box(
            acquisition, 2, search=search, generator=torch.Generator().manual_seed(1), record=record
        )
    # the raw sample (t = 0 -> 1), then gradient batches at t = 1 and 2; at t = 3 the next
    # batch (1 s, as the last one took) would end past 3.5 s: the predictive rule stops
    # there, within the budget
    assert record["budget_cut"] == "gradient search stopped after 2 batch(es)"
    assert len(batches) == 3 and clock.now == 3.0
    seen = torch.cat(batches)
    values = peak(seen)
    assert value == float(values.max())
    assert torch.equal(x, seen[int(torch.argmax(values))].clamp(0.0, 1.0))


def test_a_spent_budget_in_candidate_search_keeps_the_best_chunk_evaluated():
    clock = Ticks()

    def acquisition(x):
        clock.now += 1.0
        return x.sum(-1)

    points = torch.arange(10, dtype=torch.float64).reshape(10, 1)
    with within(Budget(2.5, clock=clock)):
        index, value = maximize_on_candidates(acquisition, points, chunk=4)
    # chunks [0..3] (t = 0 -> 1) and [4..7] (1 -> 2); [8, 9] would end at 3 > 2.5
    assert (index, value) == (7, 7.0)


def make_policy(name="gp-ucb", n=12, **options):
    policy = make(name, bounds=[[0.0, 0.0], [1.0, 1.0]], seed=5, raw_samples=64, **options)
    rng = np.random.default_rng(3)
    for k in range(n):
        policy.observe(rng.random(2), float(k), float(np.sin(5 * rng.random())))
    return policy


def test_a_fit_cut_by_the_budget_keeps_the_previous_hyperparameters():
    policy = make_policy()
    policy.suggest(12.0)  # a first fit
    before = policy.hyperparameters
    policy.observe([0.5, 0.5], 12.5, 0.3)
    clock = Ticks()
    budget = Budget(1.0, clock=clock)
    clock.now = 0.75  # over the fit's half already: the fit's first check stops it
    query = policy.suggest(13.0, budget=budget)
    assert policy.hyperparameters == before
    assert np.all((0.0 <= query.x) & (query.x <= 1.0))
    report = policy.diagnostics.extra["time_budget"]
    # the fit's first check, before the likelihood's distances are built
    assert report["spent_at"][0]["where"] == deadline.LIKELIHOOD_SETUP
    assert report["seconds"] == 1.0


def test_a_recorded_budget_replays_the_same_suggestion_and_state():
    timed, replayed = make_policy(), make_policy()
    timed.suggest(12.0)
    replayed.suggest(12.0)
    clock = Ticks()

    class Budgeted(Budget):
        def check(self, where, *args):
            clock.now += 0.01  # a unit of work costs 10 ms of this clock
            super().check(where, *args)

    # 10 checks: the fit (a few Newton evaluations) and the acquisition's batches make more
    budget = Budgeted(0.1, clock=clock)
    for p in (timed, replayed):
        p.observe([0.2, 0.7], 12.5, 0.1)
    first = timed.suggest(13.0, budget=budget)
    spent = timed.diagnostics.extra["time_budget"]["spent_at"]
    assert spent  # the budget did cut something
    again = replayed.suggest(13.0, budget=Budget.replay(spent))
    np.testing.assert_array_equal(first.x, again.x)
    states = [without_timings(p.state_dict()) for p in (timed, replayed)]
    reports = [s["diagnostics"]["extra"].pop("time_budget") for s in states]
    assert_states_equal(*states)
    assert [r["spent_at"][0]["ordinal"] for r in reports] == [spent[0]["ordinal"]] * 2


def test_a_spent_budget_stops_the_wdbo_removal_loop_and_a_hard_deadline_still_raises():
    policy = make_policy("wdbo", n=40, learn_hyperparameters=False)
    policy._budget = 1e9  # remove whatever it can
    before = policy.state_dict()
    with within(cancelled()):
        with pytest.raises(Cancelled, match="removal criterion"):
            policy.suggest(40.0)
    assert_states_equal(before, policy.state_dict())
    clock = Ticks()
    budget = Budget(1.0, clock=clock)
    clock.now = 2.0  # spent before anything: not even the criterion is built
    query = policy.suggest(40.0, budget=budget)
    extra = policy.diagnostics.extra
    assert extra["removal_cut"] == "skipped: no time left for the relevancy criterion"
    assert [s["where"] for s in extra["time_budget"]["spent_at"]][:1] == ["removal criterion"]
    assert policy.dataset_size == 40 and query.x.shape == (2,)
    # the criterion built in time, the loop cut at its first removal
    policy.load_state_dict(before)
    removals = 0

    def clock_after_criterion():
        return 0.0 if removals == 0 else 2.0

    budget = Budget(1.0, clock=clock_after_criterion)
    from dynbo.relevancy import WassersteinRelevancy

    original = WassersteinRelevancy.from_gp

    def built(*args, **kwargs):
        nonlocal removals
        removals = 1  # time passes once the criterion exists
        return original(*args, **kwargs)

    WassersteinRelevancy.from_gp = built
    try:
        policy.suggest(40.0, budget=budget)
    finally:
        WassersteinRelevancy.from_gp = original
    assert policy.diagnostics.extra["removal_cut"] == "stopped after 0 removal(s)"
    assert policy.dataset_size == 40


def test_bad_budgets_are_refused_and_change_nothing():
    policy = make_policy()
    before = policy.state_dict()
    for bad in (0, -1.0, float("nan"), "1"):
        with pytest.raises(ValueError, match="budget"):
            policy.suggest(12.0, budget=bad)
    assert_states_equal(before, policy.state_dict())
    with pytest.raises(ValueError, match="ordinal >= 1"):
        Budget.replay([("acquisition search", 0)])


def test_the_budget_skips_a_unit_that_would_end_past_it():
    """Predictive: due when elapsed + the unit's expected cost passes the limit; the
    expected cost is the last unit of that kind (from its check to the next check), else
    the prior, else 0."""
    clock = Ticks()
    budget = Budget(1.0, clock=clock, priors={"slow": 0.8})
    budget.check("fast")  # t = 0: nothing measured, no prior: runs
    clock.now = 0.4
    budget.check("fast")  # the first unit took 0.4 s: 0.4 + 0.4 <= 1, runs
    clock.now = 0.5
    with pytest.raises(BudgetSpent):
        budget.check("slow")  # 0.5 + 0.8 (the prior) > 1: skipped before it starts
    assert budget.unit_seconds == {"fast": pytest.approx(0.1)}  # the second unit: 0.4 -> 0.5
    clock.now = 0.85
    budget.check("fast")  # 0.85 + 0.1 <= 1
    clock.now = 0.97
    with pytest.raises(BudgetSpent):
        budget.check("fast")  # that unit took 0.12 s: 0.97 + 0.12 > 1
    assert [(s["where"], s["expected"]) for s in budget.spent_at] == [
        ("slow", 0.8),
        ("fast", pytest.approx(0.12)),
    ]


def test_a_policy_carries_the_unit_costs_to_its_next_budgeted_suggest():
    policy = make_policy("gp-ucb")
    policy.suggest(12.0, budget=10.0)
    costs = dict(policy._budget_unit_seconds)
    assert costs and all(v >= 0 for v in costs.values())
    assert policy.diagnostics.extra["time_budget"]["unit_seconds"] == costs
    policy.cancel_pending()
    # a likelihood evaluation known to take longer than the fit's share: the next fit is
    # skipped before it builds its distances (they and one evaluation would not fit),
    # and the previous hyperparameters are kept
    before = policy.hyperparameters
    policy._budget_unit_seconds = {**costs, deadline.FIT: 100.0}
    policy.suggest(12.5, budget=10.0)
    spent = policy.diagnostics.extra["time_budget"]["spent_at"]
    assert spent[0]["where"] == deadline.LIKELIHOOD_SETUP and spent[0]["ordinal"] == 1
    assert spent[0]["expected"] >= 100.0
    assert policy.hyperparameters == before
