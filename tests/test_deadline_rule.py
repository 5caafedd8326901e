"""The deadline rule on a policy made slow on purpose (issue 27 item 4).

Each likelihood evaluation and each batch of acquisition values advances an injected
clock by a known time and nothing else does, so these tests read no real time: a
suggestion under ``Budget(seconds, clock=...)`` must end no later than the budget plus
one unit of work, keep the previous hyperparameters when the fit is cut, and say in
its diagnostics what was cut.
"""

import numpy as np
import pytest

from dynbo import deadline
from dynbo.acquisition.ucb import UpperConfidenceBound
from dynbo.deadline import Budget, BudgetSpent
from dynbo.models.fit import NegativeLogMarginalLikelihood
from dynbo.policies import Policy, make
from tests.test_service_manager import assert_states_equal, without_timings


class Clock:
    """Seconds that pass only when slow work runs."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


class SlowWork:
    """Likelihood evaluations that take ``evaluations[k]`` seconds (the last value for
    the later ones) and acquisition batches (raw-sample pieces, gradient steps) that
    take ``batch`` seconds each, on :attr:`clock`."""

    def __init__(self, monkeypatch, evaluations, batch):
        self.clock = Clock()
        self.costs = list(evaluations)
        self.evaluated = 0
        evaluate = NegativeLogMarginalLikelihood._evaluate

        def slow_evaluate(objective, theta, with_hessian=False):
            self.clock.now += self.costs[min(self.evaluated, len(self.costs) - 1)]
            self.evaluated += 1
            return evaluate(objective, theta, with_hessian)

        def slowed(method):
            def run(acquisition, points):
                self.clock.now += batch
                return method(acquisition, points)

            return run

        monkeypatch.setattr(NegativeLogMarginalLikelihood, "_evaluate", slow_evaluate)
        for name in ("__call__", "value_and_gradient"):
            monkeypatch.setattr(
                UpperConfidenceBound, name, slowed(getattr(UpperConfidenceBound, name))
            )


def fitted_policy(name="gp-ucb", **options):
    """A policy with 12 observations, fitted by an unbudgeted suggest, then a 13th."""
    policy = make(
        name,
        bounds=[[0.0, 0.0], [1.0, 1.0]],
        seed=5,
        raw_samples=256,
        fit_strategy="two-start",  # several L-BFGS-B evaluations: a fit the rule must cut
        **options,
    )
    rng = np.random.default_rng(3)
    for k in range(12):
        x = rng.random(2)
        policy.observe(x, float(k), float(np.sin(5 * x[0]) + x[1]))
    policy.suggest(12.0)
    policy.observe([0.4, 0.6], 12.5, 0.3)
    return policy


def largest_unit(report):
    return max(report["largest_unit_seconds"].values())


def test_a_slow_fit_is_cut_before_the_unit_that_would_pass_its_share(monkeypatch):
    policy = fitted_policy()
    before, state = policy.hyperparameters, policy.state_dict()
    slow = SlowWork(monkeypatch, evaluations=[0.375], batch=0.125)
    budget = Budget(1.0, clock=slow.clock)
    query = policy.suggest(13.0, budget=budget)
    extra = policy.diagnostics.extra
    report = extra["time_budget"]
    # the first evaluation (nothing measured yet) ran, 0 -> 0.375 s; the second would end
    # at 0.75 s, past the fit's half of the budget: skipped, the fit keeps what it had
    assert slow.evaluated == 1 and policy.hyperparameters == before
    # the raw sample's four pieces of 64 points (0.375 -> 0.875 s) and one gradient
    # batch (-> 1 s) ran; the next batch, expected to take 0.125 s like that one, would
    # end past the budget
    assert extra["acquisition_cut"] == "gradient search stopped after 1 batch(es)"
    assert [(s["where"], s["ordinal"], s["expected"]) for s in report["spent_at"]] == [
        (deadline.FIT, 2, 0.375),
        (deadline.ACQUISITION, 2, 0.125),
    ]
    assert report["largest_unit_seconds"][deadline.FIT] == 0.375
    assert report["largest_unit_seconds"][deadline.RAW_SAMPLE] == 0.125
    assert slow.clock.now == 1.0  # the units cost what was expected: not a second late
    assert np.all((0.0 <= query.x) & (query.x <= 1.0))
    # the same cuts, replayed on the same state, give the same suggestion and state
    replayed = Policy.from_state_dict(state)
    again = replayed.suggest(13.0, budget=Budget.replay(report["spent_at"]))
    np.testing.assert_array_equal(query.x, again.x)
    states = [without_timings(p.state_dict()) for p in (policy, replayed)]
    for s in states:
        s["diagnostics"]["extra"].pop("time_budget")
    assert_states_equal(*states)


def test_a_unit_that_runs_long_overruns_the_budget_by_less_than_itself(monkeypatch):
    policy = fitted_policy()
    before = policy.hyperparameters
    # the second evaluation, expected to take 0.1 s like the first, takes 2 s
    slow = SlowWork(monkeypatch, evaluations=[0.1, 2.0, 0.1], batch=0.02)
    budget = Budget(1.0, clock=slow.clock)
    query = policy.suggest(13.0, budget=budget)
    report = policy.diagnostics.extra["time_budget"]
    assert slow.evaluated == 2 and policy.hyperparameters == before
    # the budget is spent before the search: the answer is the newest observation's
    # point, and nothing runs after the long unit
    extra = policy.diagnostics.extra
    assert extra["acquisition_cut"].startswith("skipped: the budget was spent before the search")
    assert policy.diagnostics.acquisition_evaluations == 0
    np.testing.assert_allclose(query.x, [0.4, 0.6])  # observed last by fitted_policy
    assert [s["where"] for s in report["spent_at"]] == [deadline.FIT, deadline.RAW_SAMPLE]
    assert slow.clock.now == pytest.approx(2.1)
    assert slow.clock.now - budget.seconds <= largest_unit(report)


def test_the_next_suggest_skips_a_fit_known_to_be_too_slow(monkeypatch):
    policy = fitted_policy()
    slow = SlowWork(monkeypatch, evaluations=[0.6], batch=0.02)
    policy.suggest(13.0, budget=Budget(1.0, clock=slow.clock))
    assert slow.clock.now - 1.0 <= largest_unit(policy.diagnostics.extra["time_budget"])
    # the policy now expects 0.6 s per evaluation, more than the fit's half: the next
    # fit is skipped before it builds anything, and the whole budget goes elsewhere
    policy.observe([0.8, 0.1], 13.5, 0.2)
    before, evaluated = policy.hyperparameters, slow.evaluated
    slow.clock.now = 0.0
    budget = Budget(1.0, clock=slow.clock, priors=policy._budget_unit_seconds)
    policy.suggest(14.0, budget=budget)
    spent = policy.diagnostics.extra["time_budget"]["spent_at"]
    assert spent[0]["where"] == deadline.LIKELIHOOD_SETUP
    assert spent[0]["expected"] == pytest.approx(0.6)
    assert slow.evaluated == evaluated and policy.hyperparameters == before
    assert slow.clock.now <= 1.0 + 1e-12
    # a prior that stopped a unit is not measured again: it ages, so that a cost
    # measured too high once is tried again after a few calls
    assert budget.next_priors()[deadline.FIT] == pytest.approx(0.6 * deadline.PRIOR_DECAY)
    assert policy._budget_unit_seconds == budget.next_priors()


def test_the_work_before_the_search_leaves_it_the_reserve():
    """Every kind but the acquisition search's stops ``reserve`` seconds early (the
    expected acquisition setup and first raw batch); a removal loop's check also
    expects the work of applying its removals (``after``)."""
    clock = Clock()
    priors = {
        deadline.ACQUISITION_SETUP: 0.125,
        deadline.RAW_SAMPLE: 0.125,
        "applying removals": 0.25,
    }
    budget = Budget(1.0, clock=clock, priors=priors, fit_share=1.0)
    assert budget.reserve == 0.25  # the limit of the work before the search: 0.75
    clock.now = 0.5
    budget.check("removal loop", after=("applying removals",))  # 0.5 + 0 + 0.25 <= 0.75
    clock.now = 0.625
    with pytest.raises(BudgetSpent):  # 0.625 + 0.125 (the last removal) + 0.25 > 0.75
        budget.check("removal loop", after=("applying removals",))
    assert budget.spent_at[-1]["expected"] == 0.375
    budget.check(deadline.FIT)  # nothing measured: 0.625 <= 0.75
    clock.now = 0.875
    with pytest.raises(BudgetSpent):  # 0.875 + 0.25 > 0.75
        budget.check(deadline.FIT)
    budget.check(deadline.ACQUISITION)  # the search's own kinds use the whole budget
    clock.now = 1.0
    budget.end()
    assert budget.largest_unit_seconds == {
        "removal loop": 0.125,
        deadline.FIT: 0.25,
        deadline.ACQUISITION: 0.125,
    }


def test_units_are_measured_between_their_check_and_their_end():
    clock = Clock()
    budget = Budget(10.0, clock=clock)
    budget.begin("setup")  # work that runs whatever the budget: measured, not checked
    clock.now = 1.0
    budget.end()
    clock.now = 3.0  # untimed work between units is charged to none
    budget.check("loop")
    clock.now = 3.5
    budget.end()
    budget.check("loop")
    clock.now = 4.5
    report = budget.report()
    assert report["unit_seconds"] == {"setup": 1.0, "loop": 1.0}
    assert report["largest_unit_seconds"] == {"setup": 1.0, "loop": 1.0}
    assert report["checks"] == 2 and budget.ordinals == {"loop": 2}
    # a replay reads no clock and measures nothing
    replay = Budget.replay([("loop", 2)])
    replay.begin("setup")
    replay.check("loop")
    with pytest.raises(BudgetSpent):
        replay.check("loop")
    assert replay.report()["unit_seconds"] == {}


def test_priors_that_stopped_a_unit_age_and_measured_units_replace_them():
    clock = Clock()
    priors = {"slow": 0.8, "too slow": 2.0, "other": 0.5, "fast": 0.1}
    budget = Budget(1.0, clock=clock, priors=priors, fit_share=1.0)
    clock.now = 0.5
    with pytest.raises(BudgetSpent):
        budget.check("slow")  # 0.5 + 0.8 > 1: stopped by its prior
    with pytest.raises(BudgetSpent):
        budget.check("too slow")  # more than the whole budget: never tried again
    clock.now = 0.0
    budget.check("fast")  # measured: 0 -> 0.25
    clock.now = 0.25
    budget.end()
    clock.now = 0.9
    with pytest.raises(BudgetSpent):
        budget.check("fast")  # stopped by its own measurement: that one does not age
    assert budget.next_priors() == {
        "slow": 0.8 * deadline.PRIOR_DECAY,
        "too slow": 2.0,
        "other": 0.5,
        "fast": 0.25,
    }


def test_a_check_that_is_not_predictive_is_due_only_once_the_budget_is_spent():
    clock = Clock()
    budget = Budget(1.0, clock=clock, priors={deadline.RAW_SAMPLE: 5.0})
    clock.now = 0.9
    budget.check(deadline.RAW_SAMPLE, predictive=False)  # 0.9 <= 1, whatever the prior
    clock.now = 1.01
    with pytest.raises(BudgetSpent):
        budget.check(deadline.RAW_SAMPLE, predictive=False)
    assert budget.spent_at[-1]["expected"] == 0.0
