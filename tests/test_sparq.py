"""SparQ-GP-UCB, W-SparQ-GP-UCB, their k-DPP sampler and additional queries."""

import itertools
import json
import math

import numpy as np
import pytest
import torch
from scipy import stats

from dynbo.acquisition.ucb import SparQBeta, make_beta_schedule
from dynbo.kdpp import (
    SwapChain,
    approximation_size,
    chain_steps,
    expected_residual_traces,
    greedy_subset,
    nystrom_residual_trace,
    sample_kdpp,
)
from dynbo.models.gp import SpatioTemporalGP
from dynbo.models.kernel import Hyperparameters, KernelSpec
from dynbo.policies import Policy, make
from dynbo.policies.sparq import window_length, window_starts

KNOWN = {
    "spatial_kernel": "se",
    "learn_hyperparameters": False,
    "standardize": False,
    "initial_hyperparameters": {"outputscale": 0.5, "lengthscale_space": 0.1, "noise": 0.01},
}
GRID = np.linspace(0.0, 1.0, 41).reshape(-1, 1)


def f(x, t):
    return float(np.sin(6 * x[0] + 0.3 * t))


def se(a, b, variance=0.5, lengthscale=0.1):
    d = np.asarray(a)[:, None, 0] - np.asarray(b)[None, :, 0]
    return variance * np.exp(-0.5 * d**2 / lengthscale**2)


def answer(policy, query, t):
    policy.observe(query.x, t, f(query.x, t))
    if len(query.additional):
        policy.observe_additional(query.additional, t, [f(x, t) for x in query.additional])


# ---------------------------------------------------------------- the k-DPP sampler
def _kernel(n, lengthscale=0.25, seed=0):
    x = np.random.default_rng(seed).random((n, 1))
    return x, se(x, x, 1.0, lengthscale)


def test_chain_step_count_is_the_documented_rule():
    n, m = 8, 3
    expected = math.ceil(n * m * (math.log(math.log(n + 2)) + math.log(m) + 2 * math.log(n)))
    assert chain_steps(n, m) == expected == 147
    assert chain_steps(500, 7) == 10_000  # the cap
    assert chain_steps(3, 3) == 0


def test_acceptance_ratio_is_the_determinant_ratio():
    x, kernel = _kernel(12)
    chain = SwapChain(kernel, greedy_subset(kernel, 4, np.zeros(4)))
    subset = list(chain.subset)
    for position, candidate in itertools.product(range(4), chain.outside):
        swapped = subset.copy()
        swapped[position] = candidate
        want = np.linalg.det(kernel[np.ix_(swapped, swapped)]) / np.linalg.det(
            kernel[np.ix_(subset, subset)]
        )
        assert chain.ratio(position, candidate) == pytest.approx(want, rel=1e-9, abs=1e-12)


def test_greedy_initialization_is_pivoted_cholesky():
    _, kernel = _kernel(10)
    chosen = greedy_subset(kernel, 3, np.zeros(3))
    # brute force: each pick maximizes the conditional variance given the previous ones
    for j, pick in enumerate(chosen):
        prev = chosen[:j]
        variances = [
            kernel[i, i]
            - (
                kernel[i, prev] @ np.linalg.solve(kernel[np.ix_(prev, prev)], kernel[prev, i])
                if prev
                else 0.0
            )
            for i in range(10)
        ]
        assert pick == int(np.argmax(variances))


def test_maintained_inverse_equals_a_fresh_one_after_many_swaps():
    _, kernel = _kernel(40, lengthscale=0.15, seed=3)
    chain = SwapChain(kernel, greedy_subset(kernel, 5, np.zeros(5)))
    uniforms = np.random.default_rng(0).random((20_000, 4))
    steps, accepted = chain.run(uniforms, refresh_every=None)
    assert steps == 20_000 and accepted > 2_000
    maintained = chain.inverse.copy()
    chain.refresh()
    assert np.allclose(maintained, chain.inverse, rtol=1e-8, atol=1e-8)
    subset = chain.subset
    assert np.allclose(maintained @ kernel[np.ix_(subset, subset)], np.eye(5), atol=1e-8)


def _frequencies(kernel, draws, steps=None):
    counts: dict[tuple[int, ...], int] = {}
    points = torch.arange(kernel.shape[0], dtype=torch.float64).reshape(-1, 1)
    matrix = torch.as_tensor(kernel)

    def covariance(a, b):
        return matrix[a[:, 0].long()][:, b[:, 0].long()]

    for seed in range(draws):
        generator = torch.Generator().manual_seed(seed)
        sample = sample_kdpp(points, 3, covariance, generator, steps=steps)
        key = tuple(sorted(int(i) for i in sample.indices))
        counts[key] = counts.get(key, 0) + 1
    return counts


def _chi_square(kernel, counts, draws):
    subsets = list(itertools.combinations(range(kernel.shape[0]), 3))
    dets = np.array([np.linalg.det(kernel[np.ix_(s, s)]) for s in subsets])
    expected = draws * dets / dets.sum()
    observed = np.array([counts.get(s, 0) for s in subsets], dtype=float)
    # pool the categories expected below 5 (the chi-square approximation needs it)
    small = expected < 5
    expected = np.append(expected[~small], expected[small].sum())
    observed = np.append(observed[~small], observed[small].sum())
    return stats.chisquare(observed, expected).pvalue


def test_subset_frequencies_follow_det_k_z():
    _, kernel = _kernel(8, lengthscale=0.3, seed=1)
    draws = 2500
    counts = _frequencies(kernel, draws)
    assert _chi_square(kernel, counts, draws) > 1e-3
    # the test has power: the greedy start alone (no swaps) is far from the k-DPP
    greedy = _frequencies(kernel, 300, steps=0)
    assert _chi_square(kernel, greedy, 300) < 1e-6


def test_duplicates_never_make_the_sampler_fail():
    base = torch.tensor([[0.1], [0.5], [0.9], [0.3]], dtype=torch.float64)
    points = torch.cat([base, base, base[:2]])  # every point twice or three times

    def covariance(a, b):
        return torch.exp(-0.5 * torch.cdist(a, b) ** 2 / 0.2**2)

    for seed in range(20):
        sample = sample_kdpp(points, 3, covariance, torch.Generator().manual_seed(seed))
        rows = points[torch.as_tensor(sample.indices)]
        assert len(sample.indices) == 3
        assert len(torch.unique(rows, dim=0)) == 3
    # fewer distinct points than asked: all of them, once
    sample = sample_kdpp(points, 6, covariance, torch.Generator().manual_seed(0))
    assert sorted(sample.indices.tolist()) == [0, 1, 2, 3]
    # identical points only
    same = torch.zeros((5, 1), dtype=torch.float64)
    assert sample_kdpp(same, 2, covariance, torch.Generator()).indices.tolist() == [0]

    # a kernel of rank 2: no subset of 3 has a positive determinant -> the rank
    def rank_two(a, b):
        fa = torch.cat([a, torch.ones_like(a)], 1)
        fb = torch.cat([b, torch.ones_like(b)], 1)
        return fa @ fb.T

    assert len(sample_kdpp(base, 3, rank_two, torch.Generator()).indices) == 2
    with pytest.raises(ValueError, match="size"):
        sample_kdpp(base, 0, covariance, torch.Generator())


# ---------------------------------------------------------------- windows
def test_window_starts_follow_eq_32():
    assert window_starts(1.0, 0.25, 40) == [
        1,
        3,
        5,
        7,
        9,
        11,
        13,
        15,
        17,
        20,
        23,
        26,
        29,
        32,
        35,
        38,
    ]
    assert window_starts(0.25, 0.25, 70) == [1, 3, 7, 15, 31, 63]  # t_{j+1} = 2 t_j + 1
    assert window_length(16, 0.5, 0.25) == 5  # 16^(1/2) = 4 exactly: (4, 5] -> 5
    assert window_length(81, 1.0, 0.25) == 4
    for start in (1, 2, 10, 99, 1000):
        gap = window_length(start, 0.5, 0.2)
        power = start ** (0.2 / 0.5)
        assert power < gap <= power + 1


def test_w_sparq_queries_q_t_at_window_starts_and_none_between():
    p = make("w-sparq-gp-ucb", bounds=[[0.0], [1.0]], seed=0, candidates=GRID, **KNOWN)
    starts = set(window_starts(p.alpha, p.alpha_tilde, 40))
    for k in range(1, 41):
        q = p.suggest(float(k))
        if k in starts:
            assert len(q.additional) == min(p.query_count(k), len(p._past_inputs) + 1) > 0
            assert p.diagnostics.additional_queries == len(q.additional)
        else:
            assert len(q.additional) == 0 and p.diagnostics.additional_queries == 0
        answer(p, q, float(k))
    assert p.query_count(40) == math.ceil(math.log(41))


def test_sparq_queries_every_step_and_q_t_rule():
    p = make("sparq-gp-ucb", bounds=[[0.0], [1.0]], seed=0, candidates=GRID, **KNOWN)
    for k in range(1, 15):
        q = p.suggest(float(k))
        distinct = len(p._past_inputs) + int(
            not any(np.array_equal(q.x, r) for r in p._past_inputs.numpy())
        )
        assert len(q.additional) == min(distinct, max(1, math.ceil(math.log(k + 1))))
        answer(p, q, float(k))
    fixed = make("sparq-gp-ucb", bounds=[[0.0], [1.0]], queries=2, queries_min=1)
    assert fixed.query_count(1000) == 2
    scaled = make("sparq-gp-ucb", bounds=[[0.0], [0.5], [1.0]][::2], queries_scale=2.0)
    assert scaled.query_count(10) == math.ceil(2 * math.log(11))


# ---------------------------------------------------------------- the paper's rule
def _dense_ucb(x, y, noise, beta_b, delta, candidates):
    """mu + beta sigma on candidates from (x, y) with noise variances ``noise`` (eq. 9-12)."""
    k = se(x, x)
    cross = se(candidates, x)
    system = k + np.diag(noise)
    mean = cross @ np.linalg.solve(system, y)
    var = 0.5 - np.einsum("ij,ji->i", cross, np.linalg.solve(system, cross.T))
    log_det = np.linalg.slogdet(np.eye(len(y)) + np.diag(1 / noise) @ k)[1]
    beta = math.sqrt(2 * math.log(2 / delta) + log_det) + beta_b
    return mean + beta * np.sqrt(np.maximum(var, 1e-30)), beta


def test_sparq_regresses_on_the_fresh_answers_only_and_maximizes_eq_12_ucb():
    p = make("sparq-gp-ucb", bounds=[[0.0], [1.0]], seed=1, candidates=GRID, **KNOWN)
    for k in range(1, 9):
        answer(p, p.suggest(float(k)), float(k))
    q = p.suggest(9.0)
    p.observe(q.x, 9.0, f(q.x, 9.0))
    ys = [f(x, 9.0) + 0.01 * i for i, x in enumerate(q.additional)]
    p.observe_additional(q.additional, 9.0, ys)
    data = p.dataset
    # the regression set is exactly the answers (the main observation and all older
    # outputs discarded), with sigma^2 I
    assert np.array_equal(data.x, q.additional) and np.array_equal(data.y, ys)
    assert torch.equal(p.model.noise_scale, torch.ones(len(ys), dtype=torch.float64))
    nxt = p.suggest(10.0)
    ucb, beta = _dense_ucb(data.x, np.array(ys), np.full(len(ys), 0.01), 5.0, 0.1, GRID)
    assert p.kappa() == pytest.approx(beta, rel=1e-10)
    assert nxt.x[0] == GRID[int(np.argmax(ucb)), 0]
    mean, var = p.predict(GRID, 10.0)
    ucb_policy = mean + p.kappa() * np.sqrt(var)
    assert np.allclose(ucb_policy, ucb, atol=1e-9)


def test_include_window_start_obs_keeps_the_main_observation():
    p = make(
        "sparq-gp-ucb",
        bounds=[[0.0], [1.0]],
        seed=1,
        candidates=GRID,
        include_window_start_obs=True,
        **KNOWN,
    )
    for k in range(1, 5):
        answer(p, p.suggest(float(k)), float(k))
    q = p.suggest(5.0)
    answer(p, q, 5.0)
    assert len(p.dataset) == len(q.additional) + 1
    assert p.dataset.x[0, 0] == q.x[0]


def test_w_sparq_heteroscedastic_noise_is_the_uncertainty_injection():
    p = make("w-sparq-gp-ucb", bounds=[[0.0], [1.0]], seed=2, candidates=GRID, alpha=0.5, **KNOWN)
    assert window_starts(0.5, 0.25, 15) == [1, 3, 5, 8, 11, 15]
    for k in range(1, 14):
        answer(p, p.suggest(float(k)), float(k))
    p.suggest(14.0)  # refreshes the multipliers at the latest observation time, 13
    data = p.dataset
    assert data.t.tolist()[-2:] == [12.0, 13.0] and set(data.t[:-2]) == {11.0}
    want = np.where(data.t < 13, 1 + np.abs(13 - data.t) ** 0.5, 1.0)
    assert np.allclose(p.model.noise_scale.numpy(), want, rtol=1e-12)
    ucb, beta = _dense_ucb(data.x, data.y, 0.01 * want, 5.0, 0.1, GRID)
    mean, var = p.predict(GRID, 14.0)
    assert p.kappa() == pytest.approx(beta, rel=1e-10)
    assert np.allclose(mean + p.kappa() * np.sqrt(var), ucb, atol=1e-9)


def test_sparq_beta_is_eq_12():
    gp = SpatioTemporalGP(
        KernelSpec(dim=1, spatial="se", temporal=None),
        Hyperparameters(outputscale=0.5, lengthscale_space=(0.1,), noise=0.02),
        standardize=False,
    )
    x = np.array([[0.1], [0.4], [0.45]])
    gp.add(torch.as_tensor(x), torch.tensor([0.1, 0.2, 0.3]), torch.tensor([1.0, 2.0, 3.0]))
    sigma = np.diag([0.02, 0.04, 0.06])
    k = se(x, x)
    # the printed form: sqrt(2 log(2 |Sigma + K|^(1/2) / (delta |Sigma|^(1/2)))) + B
    printed = (
        math.sqrt(
            2
            * math.log(
                2 * math.sqrt(np.linalg.det(sigma + k)) / (0.1 * math.sqrt(np.linalg.det(sigma)))
            )
        )
        + 5
    )
    assert SparQBeta()(n=3, iteration=1, dim=1, gp=gp) == pytest.approx(printed, rel=1e-12)
    assert make_beta_schedule({"kind": "sparq", "B": 1.0}).as_dict() == {
        "kind": "sparq",
        "B": 1.0,
        "delta": 0.1,
    }


def test_noise_refresh_by_rank_one_updates_equals_a_refactorization(monkeypatch):
    gp = SpatioTemporalGP(
        KernelSpec(dim=1, spatial="se", temporal=None),
        Hyperparameters(outputscale=1.0, lengthscale_space=(0.2,), noise=0.01),
        standardize=False,
    )
    x = torch.linspace(0, 1, 12, dtype=torch.float64).reshape(-1, 1)
    gp.add(x, torch.sin(6 * x[:, 0]))
    scale = gp.noise_scale
    scale[[2, 7]] += torch.tensor([0.5, 3.0], dtype=torch.float64)  # 2 of 12 grow
    calls = []
    monkeypatch.setattr(gp, "refactorize", lambda: calls.append(1))
    gp.set_noise_scale(scale)
    assert calls == []  # updated, not refactorized
    updated = gp.cholesky_factor.clone()
    monkeypatch.undo()
    gp.refactorize()
    assert torch.allclose(updated, gp.cholesky_factor, atol=1e-12)
    # unchanged multipliers cost nothing; many changes refactorize
    factor = gp.cholesky_factor
    gp.set_noise_scale(gp.noise_scale)
    assert gp.cholesky_factor is factor


# ---------------------------------------------------------------- the API
def test_observe_additional_validates_and_leaves_the_policy_unchanged():
    p = make("sparq-gp-ucb", bounds=[[0.0], [1.0]], seed=0, candidates=GRID, **KNOWN)
    for k in range(1, 4):
        answer(p, p.suggest(float(k)), float(k))
    q = p.suggest(4.0)
    p.observe(q.x, 4.0, 0.0)
    before = p.state_dict()
    asked = q.additional
    bad = [
        (np.array([[0.123456]]), 4.0, [0.0], "not asked for"),
        (asked[:1], 3.0, [0.0], "backwards"),
        (asked[:1], 4.0, [float("nan")], "y"),
        (asked[:1], 4.0, [0.0, 1.0], "shape"),
        (asked[0], 4.0, [0.0], "shape"),
        (np.array([[2.0]]), 4.0, [0.0], "outside"),
        (np.vstack([asked[:1], asked[:1]]), 4.0, [0.0, 0.0], "already answered"),
        (asked[:2][::-1], [5.0, 4.0][: len(asked[:2])], [0.0] * len(asked[:2]), "non-decreasing"),
    ]
    for x, t, y, message in bad:
        if message == "non-decreasing" and len(asked) < 2:
            continue
        with pytest.raises(ValueError, match=message):
            p.observe_additional(x, t, y)
        after = p.state_dict()
        assert torch.equal(after["data"]["y"], before["data"]["y"])
        assert torch.equal(after["additional"]["answered"], before["additional"]["answered"])
    p.observe_additional(asked[:1], 4.0, [0.5])
    with pytest.raises(ValueError, match="already answered"):
        p.observe_additional(asked[:1], 4.0, [0.5])
    # policies that make no additional queries
    g = make("gp-ucb", bounds=[[0.0], [1.0]], raw_samples=16, restarts=1)
    q = g.suggest(0.0)
    assert q.additional.shape == (0, 1)
    with pytest.raises(ValueError, match="no additional queries"):
        g.observe_additional([[0.5]], 0.0, [1.0])


def test_additional_answers_keep_float64_times_and_values():
    # times near 1e9 and values with 12 digits: a detour through torch's default dtype
    # (float32 in a user's session; the test suite sets float64) would move them
    p = make("sparq-gp-ucb", bounds=[[0.0, 0.0], [1.0, 1.0]], seed=0)
    p.observe([0.1, 0.1], 1e9, 1.0)
    q = p.suggest(1e9 + 0.25)
    p.observe(q.x, 1e9 + 0.25, 2.0)
    assert len(q.additional) > 0
    torch.set_default_dtype(torch.float32)
    try:
        p.observe_additional(q.additional[:1], 1e9 + 0.5, [123456789.123])
    finally:
        torch.set_default_dtype(torch.float64)
    assert float(p.dataset.t[-1]) == 1e9 + 0.5
    assert float(p.dataset.y[-1]) == 123456789.123


@pytest.mark.parametrize(
    "name,options",
    [
        ("w-sparq-gp-ucb", {"alpha": 1e-4}),  # window lengths t^(a~/a) overflow a float
        ("sparq-gp-ucb", {"queries_scale": 1e308}),  # Q_t rule overflows
        ("sparq-gp-ucb", {"dpp_c_mix": 1e308}),  # the chain's step count overflows
    ],
)
def test_extreme_but_valid_options_run(name, options):
    p = make(name, bounds=[[0.0], [1.0]], seed=1, raw_samples=16, restarts=1, **options)
    t = 0.0
    for _ in range(4):
        q = p.suggest(t)
        p.observe(q.x, t, float(np.sin(5 * q.x[0])))
        if len(q.additional):
            p.observe_additional(q.additional, t, np.sin(5 * q.additional[:, 0]))
        t += 1.0
    assert window_length(2, 1e-4, 0.25) == 2**53


@pytest.mark.parametrize("rule", ["log", "approximation"])
def test_state_round_trips_with_pending_additional_queries(rule):
    p = make(
        "w-sparq-gp-ucb",
        bounds=[[0.0], [1.0]],
        seed=5,
        raw_samples=16,
        restarts=1,
        queries_rule=rule,
    )
    for k in range(1, 7):
        answer(p, p.suggest(float(k)), float(k))
    q = p.suggest(7.0)
    p.observe(q.x, 7.0, f(q.x, 7.0))
    clone = Policy.from_state_dict(p.state_dict())  # answers still pending
    for policy in (p, clone):
        if len(q.additional):
            policy.observe_additional(q.additional, 7.0, [f(x, 7.0) for x in q.additional])
    for k in range(8, 14):
        a, b = p.suggest(float(k)), clone.suggest(float(k))
        assert np.array_equal(a.x, b.x) and np.array_equal(a.additional, b.additional)
        answer(p, a, float(k))
        answer(clone, b, float(k))
    assert p.additional_total == clone.additional_total > 0


@pytest.mark.parametrize(
    ("name", "options", "message"),
    [
        ("sparq-gp-ucb", {"alpha": -0.1}, "alpha"),
        ("w-sparq-gp-ucb", {"alpha": 0.0}, "alpha"),
        ("w-sparq-gp-ucb", {"alpha_tilde": 0.0}, "alpha_tilde"),
        ("w-sparq-gp-ucb", {"alpha_tilde": 1 / 3}, "alpha_tilde"),
        ("sparq-gp-ucb", {"queries": 0}, "queries"),
        ("sparq-gp-ucb", {"queries_min": 0}, "queries_min"),
        ("sparq-gp-ucb", {"queries_scale": 0.0}, "queries_scale"),
        ("sparq-gp-ucb", {"noise_model": "iid"}, "noise_model"),
        ("sparq-gp-ucb", {"dpp_max_steps": 0}, "dpp_max_steps"),
        ("sparq-gp-ucb", {"queries_rule": "fixed"}, "queries_rule"),
        ("sparq-gp-ucb", {"eta": 0.1}, "eta"),  # eta without the approximation rule
        ("sparq-gp-ucb", {"queries_rule": "approximation", "eta": 0.0}, "eta"),
        ("sparq-gp-ucb", {"queries_rule": "approximation", "eta": float("nan")}, "eta"),
        ("sparq-gp-ucb", {"queries_rule": "approximation", "eta": "small"}, "eta"),
        ("sparq-gp-ucb", {"queries_rule": "approximation", "queries": 3}, "queries"),
        (
            "w-sparq-gp-ucb",
            {"queries_rule": "approximation", "queries_scale": 2.0},
            "queries_scale",
        ),
        ("sparq-gp-ucb", {"beta": {"kind": "sparq", "delta": 1.5}}, "delta"),
    ],
)
def test_bad_options_name_themselves(name, options, message):
    with pytest.raises(ValueError, match=message):
        make(name, bounds=[[0.0], [1.0]], **options)


# ---------------------------------------------------------------- the harness
def _spec(policy, clock, **protocol):
    from dynbo.harness import Protocol, RunSpec

    return RunSpec(
        benchmark="rkhs",
        benchmark_options={"horizon": 12},
        policy=policy,
        seed=0,
        protocol=Protocol(
            clock=clock,
            warmup=0,
            response_time=(0.5, 0.0, 0.0, 0.0) if clock == "modeled" else None,
            **protocol,
        ),
        policy_options={"raw_samples": 16, "restarts": 1, "acquisition_iterations": 20},
    )


def test_harness_evaluates_additional_queries_at_the_step_and_counts_them():
    from dynbo.harness import execute

    result = execute(_spec("sparq-gp-ucb", "step"))
    assert result.status == "done", result.error
    loop = [r for r in result.iterations if not r["warmup"]]
    assert len(loop) == 12
    counts = [r["additional_queries"] for r in loop]
    assert all(c >= 1 for c in counts)
    assert result.summary["additional_queries"] == sum(counts)
    for row in loop:
        made = json.loads(row["extra"])["additional"]
        assert len(made) == row["additional_queries"]
        assert all(a["t"] == row["t"] for a in made)  # the same step as the main query
    # regret counts the main queries only
    assert result.summary["cumulative_regret"] == pytest.approx(sum(r["regret"] for r in loop))


def test_harness_charges_additional_queries_under_real_time_clocks():
    from dynbo.harness import execute

    result = execute(_spec("w-sparq-gp-ucb", "modeled", cost=1.0, additional_cost=0.25))
    assert result.status == "done", result.error
    loop = [r for r in result.iterations if not r["warmup"]]
    for row, following in zip(loop, loop[1:]):
        m = row["additional_queries"]
        made = json.loads(row["extra"]).get("additional", [])
        assert [a["t"] for a in made] == pytest.approx(
            [row["t"] + 1.0 + 0.25 * j for j in range(m)]
        )
        # the next iteration starts after the main answer and the additional ones
        assert following["s"] == pytest.approx(row["t"] + 1.0 + 0.25 * m)
    assert any(r["additional_queries"] for r in loop)
    assert any(r["additional_queries"] == 0 for r in loop)  # between window starts


def test_policies_without_additional_queries_run_as_before():
    from dynbo.harness import execute

    plain = execute(_spec("gp-ucb", "modeled", cost=1.0))
    charged = execute(_spec("gp-ucb", "modeled", cost=1.0, additional_cost=5.0))
    assert plain.summary == charged.summary
    assert plain.summary["additional_queries"] == 0


def test_cli_run_shows_the_additional_queries(capsys):
    from dynbo.cli import main

    code = main(
        [
            "run",
            "--policy",
            "w-sparq-gp-ucb",
            "--benchmark",
            "rkhs",
            "--clock",
            "step",
            "--horizon",
            "15",
            "--warmup",
            "0",
            "--quiet",
        ]
    )
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["additional_queries"] > 0
    code = main(
        [
            "run",
            "--policy",
            "w-sparq-gp-ucb",
            "--benchmark",
            "rkhs",
            "--clock",
            "step",
            "--policy-option",
            "alpha_tilde=0.4",
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == ["dynbo: error: alpha_tilde must be in (0, 1/3), got 0.4"]


# ---------------------------------------------------------------- Q from the approximation condition
def _dense_residual(kernel, subset):
    """tr(K - K_XZ K_ZZ^-1 K_ZX) by a dense solve (the reference)."""
    subset = list(subset)
    if not subset:
        return float(np.trace(kernel))
    cross = kernel[:, subset]
    core = kernel[np.ix_(subset, subset)]
    return float(np.trace(kernel - cross @ np.linalg.solve(core, cross.T)))


def _brute_expected_residual(kernel, size):
    """E[tr(K - U_Z)] over all subsets of ``size``, weighted by det(K_ZZ) (the exact k-DPP)."""
    weights, residuals = [], []
    for subset in itertools.combinations(range(kernel.shape[0]), size):
        weights.append(np.linalg.det(kernel[np.ix_(subset, subset)]) if size else 1.0)
        residuals.append(_dense_residual(kernel, subset))
    weights = np.asarray(weights)
    return float(weights @ np.asarray(residuals) / weights.sum())


def test_expected_residual_trace_is_the_k_dpp_average_of_the_nystrom_residual():
    _, kernel = _kernel(7, lengthscale=0.2, seed=3)
    traces = expected_residual_traces(kernel, 9)
    brute = [_brute_expected_residual(kernel, m) for m in range(7)]
    np.testing.assert_allclose(traces[:7], brute, rtol=1e-8, atol=1e-12)
    assert traces[0] == pytest.approx(np.trace(kernel))
    assert np.all(traces[7:] == 0.0)  # every candidate: U = K
    # one subset's residual: the pseudo-inverse form equals the dense solve
    subset = [0, 3, 5]
    got = nystrom_residual_trace(np.diag(kernel), kernel[:, subset], kernel[np.ix_(subset, subset)])
    assert got == pytest.approx(_dense_residual(kernel, subset), rel=1e-10)
    with pytest.raises(ValueError, match="max_size"):
        expected_residual_traces(kernel, -1)


def test_approximation_size_is_the_smallest_size_meeting_the_condition():
    _, kernel = _kernel(7, lengthscale=0.2, seed=3)
    brute = [_brute_expected_residual(kernel, m) for m in range(8)]
    for size in range(1, 7):
        # a threshold between the residuals of size - 1 and size: exactly `size` meets it
        threshold = 0.5 * (brute[size - 1] + brute[size])
        chosen, residual = approximation_size(kernel, threshold)
        assert chosen == size
        assert residual == pytest.approx(brute[size], rel=1e-8, abs=1e-12)
        assert brute[chosen] <= threshold < brute[chosen - 1]
    # nothing smaller than all 7 reconstructs K exactly; the floor is a floor
    assert approximation_size(kernel, 0.0) == (7, 0.0)
    assert approximation_size(kernel, 1e9, minimum=3)[0] == 3
    assert approximation_size(kernel, 1e9, minimum=50)[0] == 7
    # a kernel of rank 2 is reconstructed by 2 points
    x = np.linspace(0.0, 1.0, 6)
    features = np.stack([x, np.ones_like(x)], 1)
    assert approximation_size(features @ features.T, 0.0) == (2, 0.0)


def test_approximation_size_grows_past_its_first_block():
    # 200 points spread over 40 lengthscales: the smallest size is past the first 64
    x = np.linspace(0.0, 1.0, 200).reshape(-1, 1)
    kernel = se(x, x, 1.0, 0.025)
    size, residual = approximation_size(kernel, 1e-3)
    traces = expected_residual_traces(kernel, 200)
    assert size > 64
    assert traces[size] <= 1e-3 < traces[size - 1] and residual == pytest.approx(traces[size])


def test_sparq_approximation_rule_picks_the_smallest_q_of_prop_3_2():
    eta = 1.0
    p = make(
        "sparq-gp-ucb",
        bounds=[[0.0], [1.0]],
        seed=0,
        candidates=GRID,
        queries_rule="approximation",
        eta=eta,
        **KNOWN,
    )
    # past inputs within two lengthscales of each other: a few of them explain the rest
    for j, x in enumerate(GRID[12:20]):
        p.observe(x, 0.1 * j, f(x, 0.1 * j))
    checked = 0
    for k in range(1, 5):
        q = p.suggest(float(k))
        extra = p.diagnostics.extra
        pool = p._past_inputs.numpy()
        if not any(np.array_equal(q.x, r) for r in pool):
            pool = np.concatenate([pool, q.x.reshape(1, -1)])
        kernel = se(pool, pool)  # KNOWN: the prior covariance, noise 0.01
        size = extra["queries"]
        expected = _brute_expected_residual(kernel, size)
        assert expected / 0.01 <= eta
        assert extra["trace_ratio"] == pytest.approx(expected / 0.01, rel=1e-7, abs=1e-9)
        if size > 1:
            assert _brute_expected_residual(kernel, size - 1) / 0.01 > eta
            checked += size < len(pool)
        # the drawn subset's own residual, against the dense reference
        index = [int(np.flatnonzero((pool == row).all(1))[0]) for row in q.additional]
        assert len(q.additional) == size
        assert extra["sample_trace_ratio"] == pytest.approx(
            _dense_residual(kernel, index) / 0.01, rel=1e-6, abs=1e-9
        )
        answer(p, q, float(k))
    assert checked >= 3  # the condition was binding, not met by every candidate


@pytest.mark.parametrize("name", ["sparq-gp-ucb", "w-sparq-gp-ucb"])
def test_approximation_rule_is_capped_by_the_distinct_past_inputs(name):
    # sigma^2 = 1e-12: only an exact reconstruction meets the condition, i.e. all of them
    known = {**KNOWN, "initial_hyperparameters": {**KNOWN["initial_hyperparameters"]}}
    known["initial_hyperparameters"]["noise"] = 1e-12
    p = make(
        name,
        bounds=[[0.0], [1.0]],
        seed=2,
        candidates=GRID,
        queries_rule="approximation",
        eta=1e-3,
        **known,
    )
    requeries = 0
    for k in range(1, 8):
        q = p.suggest(float(k))
        extra = p.diagnostics.extra
        if extra["requery"]:
            requeries += 1
            assert len(q.additional) == extra["queries"] == extra["dpp_candidates"]
            assert extra["trace_ratio"] <= 1e-3
        answer(p, q, float(k))
    assert requeries >= 3
