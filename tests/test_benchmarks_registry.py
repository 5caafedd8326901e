"""The benchmark registry and the suites."""

import dataclasses

import numpy as np
import pytest

import dynbo.benchmarks as benchmarks
from dynbo.benchmarks import MarkovChainGP, Suite, SuiteEntry

ALL_NAMES = {
    "ackley",
    "eggholder",
    "griewank",
    "hartmann3",
    "hartmann6",
    "markov",
    "piecewise-six-hump-camel",
    "powell",
    "rastrigin",
    "rkhs",
    "rosenbrock",
    "schwefel",
    "shekel",
    "six-hump-camel",
    "styblinski-tang",
    "temperature",
    "temperature-sensors",
    "wlan",
    "cartpole",
    "moving-hazard",
    "wlan-min-rate",
    "cartpole-track",
}


def test_names_and_info():
    assert set(benchmarks.names()) == ALL_NAMES
    for name in benchmarks.names():
        info = benchmarks.get(name).info()
        assert info.name == name
        assert info.dim >= 1 and info.horizon > 0 and info.noise_variance >= 0
        assert info.time_unit in ("s", "step")
        assert info.reference


def test_unknown_names_and_options_are_rejected():
    with pytest.raises(ValueError, match="'branin'"):
        benchmarks.get("branin")
    with pytest.raises(ValueError, match="'epsilon'"):
        benchmarks.get("ackley", epsilon=0.1)
    with pytest.raises(ValueError, match="not both"):
        benchmarks.get("ackley", noise_variance=0.1, noise_fraction=0.05)
    with pytest.raises(ValueError, match="'nope'"):
        benchmarks.suite("nope")
    with pytest.raises(ValueError, match="horizon"):
        benchmarks.get("hartmann6", horizon=-1.0)


@pytest.mark.parametrize(
    "name,options,message",
    [
        ("markov", {"seed": -1}, "seed must be a non-negative integer"),
        ("markov", {"seed": 1.5}, "seed must be a non-negative integer"),
        ("markov", {"noise_variance": float("inf")}, "noise_variance must be finite"),
        ("ackley", {"cost": float("nan")}, "cost must be finite"),
        ("ackley", {"cost": True}, "cost must be a real number"),
        ("ackley", {"noise_fraction": float("inf")}, "noise_fraction must be finite"),
        ("ackley", {"noise_fraction": -0.1}, "noise_fraction must be >= 0"),
        ("ackley", {"horizon": 0}, "horizon must be > 0"),
        ("ackley", {"horizon": "3"}, "horizon must be a real number"),
        ("ackley", {"horizon": 10**400}, "too large to be a float"),
        ("ackley", {"horizon": None}, "invalid option value"),
        ("rkhs", {"norm_bound": float("nan")}, "norm_bound must be finite"),
        ("rkhs", {"norm_bound": -1}, "norm_bound must be positive"),
        # sizes that would be a MemoryError or an hour-long loop are refused when made
        ("markov", {"grid_size": 10**6}, "grid_size = 1000000 needs a .* GiB; at most 2 GiB"),
        ("markov", {"horizon": 1e12}, "horizon = 1000000000000.0 with grid_size = 50 needs"),
        ("rkhs", {"n_centres": 10**9}, "n_centres = 1000000000 needs"),
        ("rkhs", {"grid_points": 10**12}, "grid_points = 1000000000000 needs"),
        ("wlan", {"access_points": 10**6}, "access_points = 1000000 needs"),
        ("wlan", {"horizon": 1e12}, "random-waypoint legs; at most 500000"),
        ("wlan", {"users": 10**7}, "users = 10000000 over horizon = 600.0 s"),
    ],
)
def test_bad_option_values_are_value_errors_that_name_them(name, options, message):
    with pytest.raises(ValueError, match=message):
        benchmarks.get(name, **options)


def test_markov_times_that_cannot_be_drawn_are_refused():
    markov = benchmarks.get("markov", horizon=20)
    x = markov.candidates[:3]
    assert markov.f(x, 25.5).shape == (3,)  # beyond T: drawn on demand
    for t, message in ((float("nan"), "finite"), (-1.0, ">= 0"), (1e12, "t = 1e\\+12 needs")):
        with pytest.raises(ValueError, match=message):
            markov.f(x, t)
        with pytest.raises(ValueError, match=message):
            markov.optimum(t)


def test_options_override_the_defaults():
    bench = benchmarks.get("Hartmann3", noise_variance=0.123, cost=2.0, horizon=300.0)
    assert (bench.noise_variance, bench.cost, bench.horizon) == (0.123, 2.0, 300.0)
    assert benchmarks.get("styblinski_tang", dim=6).dim == 6
    markov = benchmarks.get("markov", epsilon=0.03, seed=4, kernel="matern52", horizon=50)
    assert (markov.epsilon, markov.seed, markov.kernel, markov.horizon) == (
        0.03,
        4,
        "matern52",
        50,
    )
    fraction = benchmarks.get("hartmann3", noise_fraction=0.1)
    reference = benchmarks.get("hartmann3").signal_variance(samples=100_000, seed=0)
    assert fraction.noise_variance == pytest.approx(0.1 * reference, rel=1e-12)


def test_bolt_suite_is_table_2():
    suite = benchmarks.suite("bolt")
    assert suite.labels() == [
        "shekel",
        "hartmann3",
        "ackley",
        "griewank",
        "eggholder",
        "schwefel",
        "hartmann6",
        "powell",
        "temperature",
        "wlan",
    ]
    table = {
        "shekel": (4, 0.02, 0.50),
        "hartmann3": (3, 0.05, 1.00),
        "ackley": (4, 0.05, 0.05),
        "griewank": (6, 0.30, 0.05),
        "eggholder": (2, 0.10, 0.05),
        "schwefel": (4, 0.25, 0.05),
        "hartmann6": (6, 0.05, 0.10),
        "powell": (4, 2.50, 1.00),
        "temperature": (3, 0.16, 1.00),
        "wlan": (7, 1.50, 0.10),
    }
    for entry in suite.entries:
        bench = entry.build(seed=0)
        assert (bench.dim + 1, bench.noise_variance, bench.cost) == table[entry.label]
        assert bench.horizon == 600.0 and bench.time_unit == "s"
    assert (suite.clock, suite.seeds) == ("measured", 10)
    assert suite.policies == ("gp-ucb", "r-gp-ucb", "tv-gp-ucb", "et-gp-ucb", "abo", "wdbo", "bolt")
    assert "Temperature" in suite.description and "WLAN" in suite.description


def test_wdbo_suite_uses_five_percent_of_the_signal_variance():
    suite = benchmarks.suite("wdbo")
    dims = {e.label: e.build().dim + 1 for e in suite.entries}
    assert dims == {
        "rastrigin": 5,
        "schwefel": 4,
        "styblinski-tang": 4,
        "eggholder": 2,
        "ackley": 4,
        "rosenbrock": 3,
        "shekel": 4,
        "hartmann3": 3,
        "hartmann6": 6,
        "powell": 4,
        "temperature": 3,
        "wlan": 5,
    }
    for label in ("eggholder", "shekel"):
        bench = suite.entry(label).build()
        variance = bench.signal_variance(samples=100_000, seed=0)
        assert bench.noise_variance == pytest.approx(0.05 * variance, rel=1e-12)
        assert (bench.cost, bench.horizon) == (0.1, 600.0)
    assert suite.clock == "measured" and suite.seeds == 10


def test_markov_rkhs_and_quick_suites():
    markov = benchmarks.suite("markov")
    assert markov.clock == "step"
    grid = {(e.options["kernel"], e.options["epsilon"]) for e in markov.entries[:6]}
    assert grid == {(k, e) for k in ("se", "matern52") for e in (0.001, 0.01, 0.03)}
    for entry in markov.entries[:6]:
        assert entry.options["noise_variance"] == 0.01 and entry.options["horizon"] == 200
    # The run's seed selects the function realization.
    first, second = markov.entries[0].build(seed=1), markov.entries[0].build(seed=2)
    assert isinstance(first, MarkovChainGP) and (first.seed, second.seed) == (1, 2)

    rkhs = benchmarks.suite("rkhs")
    assert rkhs.clock == "step" and rkhs.entries[0].build().horizon == 500

    quick = benchmarks.suite("quick")
    assert len(quick.entries) == 3
    assert (quick.clock, quick.seeds) == ("modeled", 2)
    assert quick.policies == ("gp-ucb", "st-gp-ucb", "wdbo", "bolt")
    built = {e.label: e.build(seed=0) for e in quick.entries}
    assert built["eggholder"].dim == 1 and built["hartmann3"].dim == 2
    assert all(b.horizon == 60.0 and b.dim <= 2 for b in built.values())


def test_suites_are_frozen_and_validated():
    assert benchmarks.suites() == ["bolt", "wdbo", "markov", "rkhs", "sensors", "control", "quick"]
    suite = benchmarks.suite("quick")
    with pytest.raises(dataclasses.FrozenInstanceError):
        suite.seeds = 3
    # Each call builds a fresh suite, so editing one cannot leak into the next.
    suite.entries[0].options["horizon"] = 1.0
    assert benchmarks.suite("quick").entries[0].options["horizon"] == 60.0
    with pytest.raises(ValueError, match="clock"):
        Suite("x", (SuiteEntry("ackley", {}, "a"),), "wall", 1, ("gp-ucb",), "")
    with pytest.raises(ValueError, match="unique"):
        Suite("x", (SuiteEntry("ackley", {}, "a"),) * 2, "step", 1, ("gp-ucb",), "")
    with pytest.raises(ValueError, match="'missing'"):
        suite.entry("missing")


@pytest.mark.parametrize("name", ["eggholder", "markov", "rkhs", "wlan", "cartpole", "temperature"])
def test_f_and_optimum_check_their_inputs(name):
    bench = benchmarks.get(name)
    x = np.asarray(bench.bounds[0], dtype=float)
    bench.f(x, 1.0)  # a good call works
    bad_calls = [
        (lambda: bench.f(x, float("nan")), "t must be finite"),
        (lambda: bench.f(np.append(x, 0.0), 1.0), f"x must be \\({bench.dim},\\)"),
        (lambda: bench.f(np.full_like(x, np.nan), 1.0), "x must be finite"),
        (lambda: bench.f("ab", 1.0), "real numbers"),
        (lambda: bench.f(np.stack([x, x]), np.ones(3)), "t must be one time or \\(2,\\)"),
        (lambda: bench.optimum(float("inf")), "t must be finite"),
        (lambda: bench.optimum("noon"), "t must be a real number"),
    ]
    for call, message in bad_calls:
        with pytest.raises(ValueError, match=f"{name}: .*{message}|{message}"):
            call()


def test_control_suite_carries_table_6s_gamma_lengthscale_prior():
    from dynbo.benchmarks.cartpole import CartPole
    from dynbo.benchmarks.registry import CONTROL_POLICIES
    from dynbo.policies import make

    control = benchmarks.suite("control")
    assert control.policies == CONTROL_POLICIES and control.seeds == 20
    assert "Gamma(15, 10/3)" in control.description
    # Table 6: Gamma(15, 10/3) in z = theta / scale, where the box's sides are s
    sides = np.array([8.0, 8.0, 25.0 / 3.0, 16.0])
    for entry in control.entries:
        bench = entry.build(seed=0)
        assert np.array_equal(bench.bounds, CartPole.search_box)
        for name in CONTROL_POLICIES:
            options = entry.policy_options[name]
            assert options["ard"] is True
            concentration, rates = options["lengthscale_prior"]
            assert concentration == 15.0
            assert np.allclose(np.array(rates) / sides, 10.0 / 3.0)
            # the prior's mean in z units is Table 6's 4.5 on every axis
            assert np.allclose(concentration / np.array(rates) * sides, 4.5)
            extra = {"noise_variance": 0.02} if name == "ui-tvbo" else {}
            policy = make(name, bounds=bench.bounds, **extra, **options)
            assert policy.priors()["lengthscale_space"] == ("gamma", 15.0, tuple(rates))
        # UI-TVBO's lengthscale box (0.5, 6) in z units holds every axis's prior mean
        low, high = entry.policy_options["ui-tvbo"]["hyperparameter_bounds"]["lengthscale_space"]
        assert (low, high) == (0.5 / 16, 6 / 8)
        assert np.all((low < 15.0 / np.array(rates)) & (15.0 / np.array(rates) < high))
