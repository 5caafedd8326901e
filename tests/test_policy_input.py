"""What a new user and a fuzzer hit through the ask/tell API: every bad input is a
ValueError naming the problem, and the policy's state is unchanged afterwards."""

import numpy as np
import pytest
import torch

from dynbo.policies import Policy, make


def _state_equal(a, b):
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, dict):
        return (
            isinstance(b, dict)
            and a.keys() == b.keys()
            and all(_state_equal(a[k], b[k]) for k in a)
        )
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_state_equal(x, y) for x, y in zip(a, b))
    return a == b or (a != a and b != b)


@pytest.fixture
def policy():
    p = make("wdbo", bounds=[[0.0, 0.0], [1.0, 1.0]], seed=3, raw_samples=32, restarts=2)
    rng = np.random.default_rng(0)
    for t in range(6):
        p.observe(rng.uniform(0, 1, 2), float(t), float(rng.normal()))
    p.suggest(6.0)
    return p


# ---------------------------------------------------------------- item 4: booleans
@pytest.mark.parametrize(
    "name,option,value",
    [
        ("gp-ucb", "learn_hyperparameters", "no"),
        ("gp-ucb", "ard", "abc"),
        ("gp-ucb", "standardize", "maybe"),
        ("wdbo", "paper_compat", 2),
        ("gp-ucb", "hyperpriors", 0),
        ("bolt", "remove_until_cap", 1),
        ("gp-ucb", "learn_hyperparameters", None),
    ],
)
def test_boolean_options_accept_only_booleans(name, option, value):
    with pytest.raises(ValueError, match=option):
        make(name, bounds=[[0.0], [1.0]], **{option: value})
    # real booleans (also NumPy's) are fine
    make(name, bounds=[[0.0], [1.0]], **{option: np.bool_(False)})


# ---------------------------------------------------------------- item 6: error types
@pytest.mark.parametrize(
    "call,message",
    [
        (lambda p: p.suggest(10**400), "too large to be a float"),
        (lambda p: p.suggest(float("nan")), "finite"),
        (lambda p: p.observe([True, 0.5], 7.0, 1.0), "real numbers"),
        (lambda p: p.observe(np.array([True, False]), 7.0, 1.0), "real numbers"),
        (lambda p: p.observe({"a": 1}, 7.0, 1.0), "real numbers"),
        (lambda p: p.observe("0.5,0.5", 7.0, 1.0), "real numbers"),
        (lambda p: p.observe([0.5, 0.5], 7.0, 10**400), "too large"),
        (lambda p: p.observe([0.5, 0.5], 7.0, True), "real number"),
        (lambda p: p.observe([0.5, 0.5], 1.0, 0.0), "backwards"),
        (lambda p: p.load_state_dict(None), "mapping"),
        (lambda p: p.load_state_dict({}), "format"),
        # NumPy's time types count as integers to NumPy, but have units
        (lambda p: p.observe([0.5, 0.5], np.timedelta64(20, "s"), 1.0), "t must be a real"),
        (lambda p: p.suggest(np.timedelta64(20, "s")), "t must be a real"),
        (lambda p: p.observe([0.5, 0.5], 7.0, np.timedelta64(2, "s")), "y must be a real"),
        (lambda p: p.observe(torch.zeros(2).to_sparse(), 7.0, 1.0), "dense tensor"),
        (lambda p: p.predict([[5.0, 0.5]], 7.0), r"x\[0\] = 5.0 lies outside"),
        (lambda p: p.predict([[0.5, 0.5], [0.5, -1.0]], 7.0), r"x\[1, 1\] = -1.0 lies outside"),
        (lambda p: p.save(None), "binary file object"),
        (lambda p: p.save(__import__("io").StringIO()), "binary file object"),
        (lambda p: p.save(""), "empty"),
    ],
)
def test_bad_calls_are_value_errors_and_change_nothing(policy, call, message):
    before = policy.state_dict()
    with pytest.raises(ValueError, match=message):
        call(policy)
    assert _state_equal(policy.state_dict(), before)


def test_a_tensor_that_requires_grad_is_accepted_as_a_value(policy):
    x = torch.tensor([0.25, 0.75], requires_grad=True)
    policy.observe(x, 7.0, 1.0)
    assert policy.dataset.x[-1].tolist() == [0.25, 0.75]


def _corrupt(state, path, value):
    *parents, last = path
    node = state
    for key in parents:
        node = node[key]
    if value is KeyError:
        del node[last]
    else:
        node[last] = value(node[last]) if callable(value) else value
    return state


@pytest.mark.parametrize(
    "path,value,message",
    [
        (("data", "x"), KeyError, "data.x must be a tensor"),
        (("data", "x"), lambda v: v.numpy(), "data.x must be a tensor, got ndarray"),
        (("gp", "factor"), None, "gp.factor must be a tensor"),
        (("gp",), None, "must be mappings"),
        (("generator",), lambda v: v.numpy(), "generator"),
        (("iteration",), "3", "iteration"),
        (("first_time",), "zero", "first_time"),
        (("extra",), KeyError, "missing extra"),
        (("extra", "budget"), KeyError, "policy-specific state lacks budget"),
        (("gp", "hyperparameters"), {"outputscale": 1.0}, "invalid policy state"),
        (("config", "alpha"), 0.5, "different configuration"),
        # values of the right kind that no policy ever held: refused when loaded, not
        # at the next suggest
        (("extra", "previous_time"), "x", "previous_time must be a real number"),
        (("extra", "budget"), -1.0, "budget must be >= 0"),
        (("time_scale",), -5.0, "time_scale must be positive"),
        (("gp", "target_scale"), 0.0, "target_scale > 0 must be finite"),
        (("gp", "target_mean"), float("nan"), "must be finite"),
        (("gp", "jitter"), -1.0, "jitter must be finite and >= 0"),
    ],
)
def test_malformed_states_are_value_errors_and_change_nothing(policy, path, value, message):
    good = policy.state_dict()
    bad = _corrupt(policy.state_dict(), path, value)
    with pytest.raises(ValueError, match=message):
        policy.load_state_dict(bad)
    assert _state_equal(policy.state_dict(), good)


@pytest.mark.parametrize(
    "state,message",
    [
        (None, "mapping"),
        ({"policy": None}, "names no policy"),
        ({"policy": "wdbo", "config": None}, "configuration"),
        ({"policy": "nope", "config": {}}, "unknown policy"),
        ({"policy": "wdbo", "config": {"bounds": [[0], [1]], "alphaa": 1}}, "unknown option"),
        ({"policy": "wdbo", "config": {"bounds": [[0], [1]], "alpha": "x"}}, "alpha"),
    ],
)
def test_from_state_dict_rejects_malformed_states(state, message):
    with pytest.raises(ValueError, match=message):
        Policy.from_state_dict(state)


@pytest.mark.parametrize(
    "options,message",
    [
        ({"device": "cuda:0"} if not torch.cuda.is_available() else {"device": "tpu"}, "device"),
        ({"device": "not-a-device"}, "invalid device"),
        ({"device": "meta"}, "holds no data"),
        ({"candidates": {"a": 1}}, "candidates"),
        ({"candidates": [[True], [False]]}, "candidates"),
        ({"candidates": [[2.0]]}, "outside"),
        ({"bounds": [[0.0], ["1"]]}, "bounds"),
        ({"bounds": [[-1e308], [1e308]]}, "too wide"),
        ({"bounds": [[0.0], [1e39]], "dtype": "float32"}, "too wide"),
        ({"seed": True}, "seed"),
        ({"seed": 1.5}, "seed"),
        ({"hyperparameter_bounds": {"noise": "tiny"}}, "noise"),
        ({"hyperparameter_bounds": {"fixed": [1]}}, "fixed"),
        ({"initial_hyperparameters": {"lengthscale_space": "0.2"}}, "lengthscale_space"),
        ({"initial_hyperparameters": {"noise": -1.0}}, "noise"),
        ({"lengthscale_time_floor": 0.0}, "lengthscale_time_floor"),
        ({"lengthscale_time_floor": "sometimes"}, "lengthscale_time_floor"),
        ({"seed": 2**64}, r"seed must be an integer in \[0, 2\*\*63\)"),
        ({"seed": -1}, "seed"),
        ({"spatial_kernel": "x"}, "spatial_kernel: unknown correlation family 'x'"),
        ({"spatial_kernel": np.array(["matern52"])}, "spatial_kernel"),
        ({"temporal_kernel": "x"}, "temporal_kernel: unknown temporal kernel 'x'"),
        ({"hyperparameter_bounds": {"noise": (1e-6, 10**400)}}, r"noise'\] holds an integer"),
        ({"bounds": [[0.0], [10**400]]}, "bounds must hold real numbers"),
        ({"time_scale": 1e306}, r"time_scale must be in \(0, 1e\+12\]"),
        ({"time_scale": 0.0}, "time_scale must be in"),
        ({"time_scale": np.timedelta64(2, "s")}, "time_scale must be a real"),
        # values that overflow the kernel or the acquisition later are refused now
        ({"hyperparameter_bounds": {"lengthscale_space": (1e-200, 1e-190)}}, "within"),
        ({"hyperparameter_bounds": {"lengthscale_time": (1e-200, 1e-190)}}, "within"),
        ({"initial_hyperparameters": {"lengthscale_space": 1e-200}}, "within"),
        ({"lengthscale_time_floor": 1e308}, "lengthscale_time_floor must be in"),
        ({"raw_samples": 2**40}, "raw_samples must be at most"),
        ({"raw_samples": 10**400}, "digits"),
        ({"acquisition_iterations": 10**9}, "acquisition_iterations must be at most"),
        ({"fit_iterations": 10**9}, "fit_iterations must be at most"),
        ({"beta": {"kind": "log_time", "c1": 1e308}}, "c1 must be at most"),
        ({"beta": {"kind": "dataset_size", "scale": 1e308}}, "scale must be at most"),
        ({"beta": {"kind": "sparq", "delta": 1e-308}}, "delta must be in"),
    ],
)
@pytest.mark.parametrize("name", ["st-gp-ucb", "gp-ucb"])
def test_bad_constructor_arguments_are_value_errors(name, options, message):
    config = {"bounds": [[0.0], [1.0]], **options}
    with pytest.raises(ValueError, match=message) as raised:
        make(name, **config)
    assert len(str(raised.value)) < 400  # a huge value is not printed whole


def test_make_names_a_missing_required_option():
    with pytest.raises(ValueError, match="policy 'gp-ucb' needs the option.*'bounds'"):
        make("gp-ucb", seed=0)


# ---------------------------------------------------------------- item 7: limits up front
@pytest.mark.parametrize("t", [1e200, -1e13, 2e12])
def test_times_beyond_the_limit_are_rejected_up_front(policy, t):
    before = policy.state_dict()
    with pytest.raises(ValueError, match="1e\\+12"):
        policy.observe([0.5, 0.5], t, 0.0)
    with pytest.raises(ValueError, match="1e\\+12"):
        policy.suggest(t)
    with pytest.raises(ValueError, match="1e\\+12"):
        policy.predict([[0.5, 0.5]], t)
    assert _state_equal(policy.state_dict(), before)


def test_times_a_trillion_apart_are_accepted_and_work():
    p = make("wdbo", bounds=[[0.0], [1.0]], seed=0, raw_samples=16, restarts=2)
    rng = np.random.default_rng(1)
    for t in np.linspace(-1e12, 1e12, 6):
        p.observe(rng.uniform(0, 1, 1), float(t), float(rng.normal()))
    q = p.suggest(1e12)
    assert 0.0 <= q.x[0] <= 1.0 and np.isfinite(p.hyperparameters.lengthscale_time)


def test_large_targets_without_standardization_are_modeled():
    p = make("gp-ucb", bounds=[[0.0, 0.0], [1.0, 1.0]], standardize=False, raw_samples=16)
    rng = np.random.default_rng(0)
    for t in range(5):
        p.observe(rng.uniform(0, 1, 2), float(t), float(rng.normal()) * 1e20)
    q = p.suggest(5.0)
    assert np.all((q.x >= 0) & (q.x <= 1))


def test_float32_limits_and_suggestions_inside_the_bounds():
    p = make("gp-ucb", bounds=[[0.1], [0.3]], candidates=[[0.1], [0.2], [0.3]], dtype="float32")
    p.observe([0.1], 0.0, 0.0)
    p.observe([0.3], 1.0, 1.0)
    x = p.suggest(2.0).x
    assert x.dtype == np.float64 and float(x[0]) in (0.1, 0.2, 0.3)
    with pytest.raises(ValueError, match="1e\\+18"):
        p.observe([0.2], 3.0, 1e39)
    box = make("st-gp-ucb", bounds=[[0.1, -3.3], [0.3, 7.7]], dtype="float32", raw_samples=32)
    rng = np.random.default_rng(0)
    for t in range(8):
        box.observe([0.1 + 0.2 * rng.uniform(), -3.3 + 11 * rng.uniform()], float(t), t % 3)
        x = box.suggest(float(t) + 0.5).x
        assert np.all(x >= box.bounds[0]) and np.all(x <= box.bounds[1])


# ---------------------------------------------------------------- item 8: no collapse
def _circling_bump(x, t):
    centre = 0.5 + 0.3 * np.array([np.cos(2 * np.pi * t / 300), np.sin(2 * np.pi * t / 300)])
    return float(np.exp(-np.sum((np.asarray(x) - centre) ** 2) / (2 * 0.15**2)))


def _drive(steps, **options):
    p = make("wdbo", bounds=[[0.0, 0.0], [1.0, 1.0]], seed=0, raw_samples=64, restarts=3, **options)
    rng = np.random.default_rng(0)
    sizes, regrets = [], []
    for k in range(steps):
        q = p.suggest(float(k))
        p.observe(q.x, float(k), _circling_bump(q.x, k) + 0.05 * rng.standard_normal())
        sizes.append(p.dataset_size)
        regrets.append(1.0 - _circling_bump(q.x, k))
    return np.array(sizes[steps // 2 :]), float(np.mean(regrets[steps // 4 :]))


def test_temporal_lengthscale_never_falls_below_the_sampling_interval():
    # white noise in time at one point, with little noise allowed: maximum likelihood
    # wants l_T -> 0
    fitted = {}
    for floor in ("sampling_interval", None, 5.0):
        rng = np.random.default_rng(0)
        p = make(
            "st-gp-ucb",
            bounds=[[0.0], [1.0]],
            hyperpriors=False,
            hyperparameter_bounds={"fixed": ["noise"]},
            initial_hyperparameters={"noise": 1e-4},
            raw_samples=8,
            lengthscale_time_floor=floor,
        )
        for k in range(30):
            p.observe([0.5], 2.0 * k + (0.5 if k % 7 == 0 else 0.0), float(rng.normal()))
        assert p.lengthscale_time_lower() == {"sampling_interval": 2.0, None: None, 5.0: 5.0}[floor]
        p.suggest(70.0)
        fitted[floor] = p.hyperparameters.lengthscale_time
    # without a floor, below the sampling interval (2): the likelihood's best local optimum
    # found is l_T ~ 1 (another lies at the lower bound, 1e-2)
    assert fitted[None] < 2.0 - 0.5
    assert fitted["sampling_interval"] >= 2.0 - 1e-9
    assert fitted[5.0] >= 5.0 - 1e-9


@pytest.mark.slow
def test_standalone_wdbo_keeps_a_working_dataset_on_a_steady_drift():
    # A 2-D bump circling with period 300, one query per time unit, driven through
    # ask/tell with default options. With the prior's time unit frozen at the first fit
    # (1 time unit here: the old default, reproduced by time_scale=1), l_T settled at
    # the prior's mode 0.35 and W-DBO kept 3 observations; with the default elapsed-time
    # unit it keeps dozens and tracks the bump.
    sizes, regret = _drive(150)
    collapsed_sizes, collapsed_regret = _drive(150, time_scale=1.0, lengthscale_time_floor=None)
    assert np.median(collapsed_sizes) <= 4  # the failure this guards against
    assert np.median(sizes) > 10 and sizes.min() > 5
    assert regret < collapsed_regret - 0.3


@pytest.mark.parametrize(
    "options", [{"ard": np.bool_(True)}, {"spatial_kernel": np.str_("se")}, {"standardize": True}]
)
def test_a_saved_policy_loads_whatever_types_its_options_were_given_in(options, tmp_path):
    from dynbo.kernels import Family

    for extra in ({}, {"spatial_kernel": Family.SE}):
        p = make("gp-ucb", bounds=[[0.0, 0.0], [1.0, 1.0]], seed=1, **{**options, **extra})
        for t in range(4):
            p.observe([0.2 * t, 0.5], float(t), float(t))
        p.save(tmp_path / "p.pt")
        loaded = Policy.load(tmp_path / "p.pt")
        assert _state_equal(loaded.state_dict(), p.state_dict())


def test_a_bfloat16_tensor_is_read_as_its_values(policy):
    policy.observe(torch.tensor([0.25, 0.75], dtype=torch.bfloat16), 7.0, 1.0)
    assert policy.dataset.x[-1].tolist() == [0.25, 0.75]


def test_make_and_policy_class_refuse_a_name_that_is_not_a_string():
    from dynbo.policies import policy_class

    for call in (lambda: make(["wdbo"], bounds=[[0.0], [1.0]]), lambda: policy_class({})):
        with pytest.raises(ValueError, match="unknown policy"):
            call()


@pytest.mark.parametrize("name", ["sparq-gp-ucb", "w-sparq-gp-ucb"])
def test_float32_sparq_asks_again_for_points_of_the_domain_exactly(name):
    p = make(name, bounds=[[0.1], [0.3]], dtype="float32", queries=2, seed=0)
    p.observe([0.3], 0.0, 1.0)
    p.observe([0.1], 0.5, 1.0)
    q = p.suggest(1.0)
    assert len(q.additional) and np.all((q.additional >= 0.1) & (q.additional <= 0.3))
    p.observe(q.x, 1.0, 0.5)
    p.observe_additional(q.additional, 1.0, [1.0] * len(q.additional))  # accepted
    arms = np.array([[0.1], [0.7], [0.33]])
    p = make(name, bounds=[[0.0], [1.0]], dtype="float32", queries=2, seed=0, candidates=arms)
    p.observe([0.7], 0.0, 1.0)
    p.observe([0.33], 0.5, 1.0)
    q = p.suggest(1.0)
    assert all(any(np.array_equal(a, arm) for arm in arms) for a in q.additional)


def test_old_observations_of_w_sparq_weigh_nothing_without_overflowing():
    p = make("w-sparq-gp-ucb", bounds=[[0.0], [1.0]], alpha=60, seed=0)
    for i in range(5):  # ages of 1e6 ** 60: far beyond a float
        p.observe([0.2 * i], i * 1e6, float(i))
    assert np.all(np.isfinite(p.suggest(5e6).x))


@pytest.mark.parametrize(
    "options,message",
    [
        ({"lengthscale_prior": (1e308, 1.0)}, r"lengthscale_prior\[0\] must be at most"),
        ({"binning": 10**400}, "binning must be at most"),
        ({"epsilon_bounds": (1e-300, 0.5)}, "epsilon_bounds must start at"),
        ({"time_step": 1e-308}, "time_step must be in"),
    ],
)
def test_options_of_ui_tvbo_and_tv_gp_ucb_that_would_overflow_are_refused(options, message):
    name = "tv-gp-ucb" if "epsilon_bounds" in options or "time_step" in options else "ui-tvbo"
    extra = {"noise_variance": 0.01} if name == "ui-tvbo" else {}
    with pytest.raises(ValueError, match=message):
        make(name, bounds=[[0.0], [1.0]], **extra, **options)


def test_ui_tvbo_holds_a_huge_known_noise_at_the_top_of_its_range():
    p = make("ui-tvbo", bounds=[[0.0], [1.0]], noise_variance=1e308, seed=0)
    for i in range(6):
        p.observe([0.15 * i], float(i), 1.0 + 1e-3 * i)
    assert np.all(np.isfinite(p.suggest(7.0).x))


def test_bolt_caps_its_search_for_n_star():
    with pytest.raises(ValueError, match="max_size must be at most"):
        make("bolt", bounds=[[0.0], [1.0]], max_size=10**7)


def test_diagnostics_are_a_copy_as_dataset_and_config_are(policy):
    before = policy.state_dict()
    policy.diagnostics.extra["edited"] = True
    policy.diagnostics.removed = 99
    assert "edited" not in policy.diagnostics.extra and policy.diagnostics.removed != 99
    assert _state_equal(policy.state_dict(), before)


@pytest.mark.parametrize(
    "name,key,value,message",
    [
        ("r-gp-ucb", "estimate", float("nan"), "estimate"),
        ("et-gp-ucb", "steps", -1, "steps must be a non-negative integer"),
        ("ui-tvbo", "origin", float("nan"), "origin must be finite"),
        ("bolt", "previous_size", -3, "previous_size"),
        ("tv-gp-ucb", "count", 1.5, "count"),
    ],
)
def test_each_policys_own_state_values_are_checked_when_loaded(name, key, value, message):
    options = {"noise_variance": 0.01} if name == "ui-tvbo" else {}
    p = make(name, bounds=[[0.0], [1.0]], seed=0, raw_samples=32, restarts=2, **options)
    for t in range(4):
        p.observe([0.25 * t], float(t), float(t % 2))
    p.suggest(4.0)
    state = p.state_dict()
    assert key in state["extra"]
    state["extra"][key] = value
    with pytest.raises(ValueError, match=message):
        Policy.from_state_dict(state)


def test_a_box_beyond_the_sobol_sequence_is_refused_when_made():
    from dynbo.acquisition.optimize import MAX_BOX_DIM

    wide = [[0.0] * (MAX_BOX_DIM + 1), [1.0] * (MAX_BOX_DIM + 1)]
    with pytest.raises(ValueError, match=f"bounds: a box search takes at most {MAX_BOX_DIM}"):
        make("gp-ucb", bounds=wide, seed=0)


def test_masked_arrays_are_refused_not_read_through_their_mask():
    p = make("gp-ucb", bounds=[[0.0, 0.0], [1.0, 1.0]], seed=0)
    hidden = np.ma.masked_array([0.5, 7.0], mask=[False, True])  # 7.0 is outside the box
    with pytest.raises(ValueError, match="x has masked entries"):
        p.observe(hidden, 0.0, 1.0)
    with pytest.raises(ValueError, match="x has masked entries"):
        p.observe([hidden], 0.0, 1.0)  # inside a list
    assert p.dataset_size == 0
    # a masked array with nothing masked is plain data
    p.observe(np.ma.masked_array([0.5, 0.25]), 0.0, 1.0)
    assert p.dataset_size == 1
