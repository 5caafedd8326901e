import io
import os

import numpy as np
import pytest
import torch

from dynbo.policies import GPUCB, Policy, available, make


def moving_peak(x, t):
    c = np.array([0.5 + 0.3 * np.sin(t / 10), 0.5])
    return -float(np.sum((np.asarray(x) - c) ** 2))


def warmed_policy(name="gp-ucb", n=8, **kw):
    p = make(name, bounds=[[0.0, 0.0], [1.0, 2.0]], seed=3, raw_samples=64, restarts=3, **kw)
    rng = np.random.default_rng(0)
    for i in range(n):
        x = rng.uniform([0, 0], [1, 2])
        p.observe(x, 0.1 * i, moving_peak(x, 0.1 * i))
    return p


def assert_states_equal(a, b):
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and torch.equal(a, b)
    elif isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            assert_states_equal(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for u, v in zip(a, b):
            assert_states_equal(u, v)
    else:
        assert a == b or (isinstance(a, float) and np.isnan(a) and np.isnan(b))


def without_timings(state):
    state = dict(state)
    state["diagnostics"] = None
    return state


def test_registry_lists_policies():
    assert {"gp-ucb", "st-gp-ucb", "wdbo", "bolt"} <= set(available())
    with pytest.raises(ValueError, match="unknown policy"):
        make("gp-ucbb", bounds=[[0], [1]])


@pytest.mark.parametrize("name", ["gp-ucb", "st-gp-ucb", "wdbo", "bolt"])
def test_state_round_trip_is_exact(name):
    p = warmed_policy(name)
    t = 1.0
    for _ in range(3):
        q = p.suggest(t)
        p.observe(q.x, q.t, moving_peak(q.x, q.t))
        t += 1.0
    buffer = io.BytesIO()
    torch.save(p.state_dict(), buffer)
    buffer.seek(0)
    clone = Policy.from_state_dict(torch.load(buffer, weights_only=True))
    assert type(clone) is type(p) and clone.config == p.config
    assert_states_equal(without_timings(clone.state_dict()), without_timings(p.state_dict()))
    for _ in range(3):
        qa, qb = p.suggest(t), clone.suggest(t)
        np.testing.assert_array_equal(qa.x, qb.x)
        assert qa.t == qb.t
        y = moving_peak(qa.x, qa.t)
        p.observe(qa.x, qa.t, y)
        clone.observe(qb.x, qb.t, y)
        t += 1.0
    assert_states_equal(without_timings(clone.state_dict()), without_timings(p.state_dict()))


def test_save_and_load_file(tmp_path):
    p = warmed_policy()
    p.suggest(1.0)
    path = str(tmp_path / "policy.pt")
    p.save(path)
    q = Policy.load(path)
    np.testing.assert_array_equal(q.suggest(2.0).x, p.suggest(2.0).x)


def test_a_failed_save_keeps_the_previous_file_and_foreign_files_do_not_load(tmp_path, monkeypatch):
    p = warmed_policy()
    path = tmp_path / "policy.pt"
    p.save(path)
    before = path.read_bytes()
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask  # not the temporary file's 0600
    buffer = io.BytesIO()
    p.save(buffer)  # a file object is written as torch.save writes it
    assert buffer.getvalue()

    def broken(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(torch, "save", broken)
    p.observe([0.5, 0.5], 5.0, 0.0)
    with pytest.raises(RuntimeError, match="disk full"):
        p.save(path)
    assert path.read_bytes() == before  # the previous save is whole
    assert sorted(f.name for f in tmp_path.iterdir()) == ["policy.pt"]  # no partial file
    monkeypatch.undo()
    text = tmp_path / "notes.pt"
    text.write_text("hello\n")
    with pytest.raises(ValueError, match="is not a dynbo policy file"):
        Policy.load(text)
    with pytest.raises(FileNotFoundError):
        Policy.load(tmp_path / "missing.pt")


def test_set_valued_options_save_and_load(tmp_path):
    # a frozenset of fixed hyperparameters must not make the saved state unloadable
    p = make(
        "gp-ucb",
        bounds=[[0.0, 0.0], [1.0, 1.0]],
        seed=0,
        hyperparameter_bounds={"fixed": frozenset({"noise", "outputscale"})},
    )
    p.observe([0.2, 0.3], 0.0, 1.0)
    path = str(tmp_path / "policy.pt")
    p.save(path)
    q = Policy.load(path)
    assert q.config["hyperparameter_bounds"]["fixed"] == ["noise", "outputscale"]
    np.testing.assert_array_equal(q.suggest(1.0).x, p.suggest(1.0).x)


BAD_OBSERVATIONS = [
    (([0.5], 1.0, 0.0), "shape"),
    (([0.5, 1.0, 0.2], 1.0, 0.0), "shape"),
    (([[0.5, 1.0], [0.1, 0.1]], 1.0, 0.0), "shape"),
    (([0.5, float("nan")], 1.0, 0.0), "NaN"),
    (([0.5, 1.0], 1.0, float("inf")), "y must be finite"),
    (([0.5, 1.0], float("nan"), 0.0), "t must be finite"),
    (([1.5, 1.0], 1.0, 0.0), r"x\[0\] = 1.5 lies outside"),
    (([0.5, -0.1], 1.0, 0.0), r"x\[1\] = -0.1 lies outside"),
    (([0.5, 1.0], 0.1, 0.0), "time went backwards"),
    (("ab", 1.0, 0.0), "x must"),
    (([0.5, 1.0], 1.0, "y"), "y must be a real number"),
]


@pytest.mark.parametrize("args,message", BAD_OBSERVATIONS)
def test_bad_observation_raises_and_leaves_state_unchanged(args, message):
    p = warmed_policy()
    before = p.state_dict()
    with pytest.raises(ValueError, match=message):
        p.observe(*args)
    assert_states_equal(p.state_dict(), before)


@pytest.mark.parametrize(
    "t,message", [(float("nan"), "finite"), (float("-inf"), "finite"), ("soon", "number")]
)
def test_bad_suggest_time_raises(t, message):
    p = warmed_policy()
    before = p.state_dict()
    with pytest.raises(ValueError, match=message):
        p.suggest(t)
    assert_states_equal(p.state_dict(), before)


def test_suggest_time_going_backwards_raises_and_leaves_state_unchanged():
    p = warmed_policy()
    p.suggest(5.0)
    before = p.state_dict()
    with pytest.raises(ValueError, match="time went backwards"):
        p.suggest(4.0)
    assert_states_equal(p.state_dict(), before)


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"bounds": [[0, 0], [1]]}, "bounds"),
        ({"bounds": [[0, 1], [1, 1]]}, "not below"),
        ({"bounds": [[0, 0], [1, np.inf]]}, "finite"),
        ({"bounds": [[0], [1]], "seed": -1}, "seed"),
        ({"bounds": [[0], [1]], "raw_samples": 0}, "raw_samples"),
        ({"bounds": [[0], [1]], "restarts": 2.5}, "restarts"),
        ({"bounds": [[0], [1]], "spatial_kernel": "matern72"}, "unknown correlation family"),
        ({"bounds": [[0], [1]], "beta": "bogus"}, "beta schedule"),
        ({"bounds": [[0], [1]], "hyperparameter_bounds": {"noise": (1, 0.1)}}, "noise"),
        (
            {"bounds": [[0], [1]], "hyperparameter_bounds": {"nosie": (0.1, 1)}},
            "unknown hyperparameter_bounds",
        ),
        ({"bounds": [[0], [1]], "initial_hyperparameters": {"noise": -1.0}}, "noise"),
        (
            {"bounds": [[0], [1]], "initial_hyperparameters": {"lengthscale_space": 0.0}},
            "lengthscale_space",
        ),
        ({"bounds": [[0], [1]], "candidates": [[0.5], [1.5]]}, "outside"),
        ({"bounds": [[0], [1]], "candidates": [[0.5, 0.5]]}, "candidates must have shape"),
        ({"bounds": [[0], [1]], "dtype": "float16"}, "dtype"),
    ],
)
def test_bad_settings_raise(kwargs, message):
    with pytest.raises(ValueError, match=message):
        GPUCB(**kwargs)


def test_domain_mapping_and_dataset_in_original_units():
    p = make("gp-ucb", bounds=[[-5.0, 10.0], [5.0, 20.0]], seed=0, raw_samples=32, restarts=2)
    p.observe([-5.0, 20.0], 0.0, 1.0)
    p.observe([0.0, 15.0], 1.0, 2.0)
    np.testing.assert_array_equal(p.dataset.x, [[-5.0, 20.0], [0.0, 15.0]])
    np.testing.assert_allclose(p.model.inputs.numpy(), [[0.0, 1.0], [0.5, 0.5]])
    q = p.suggest(2.0)
    assert np.all(q.x >= [-5, 10]) and np.all(q.x <= [5, 20]) and q.t == 2.0


def test_gp_ucb_tracks_a_static_optimum_and_reports_diagnostics():
    p = make("gp-ucb", bounds=[[0.0, 0.0], [1.0, 1.0]], seed=1, raw_samples=128, restarts=4)

    def f(x):
        return -float(np.sum((np.asarray(x) - [0.3, 0.7]) ** 2))

    for x in [[0.1, 0.1], [0.9, 0.9], [0.5, 0.2], [0.2, 0.9]]:
        p.observe(x, 0.0, f(x))
    for k in range(25):
        q = p.suggest(float(k + 1))
        p.observe(q.x, q.t, f(q.x))
    best = p.dataset.x[np.argmax(p.dataset.y)]
    assert np.allclose(best, [0.3, 0.7], atol=0.05)
    d = p.diagnostics
    assert (
        d.iteration == 25
        and d.dataset_size == 28
        and d.fit_seconds > 0
        and d.acquisition_seconds > 0
    )
    assert set(d.hyperparameters) == {
        "outputscale",
        "lengthscale_space",
        "lengthscale_time",
        "noise",
    }


def test_candidates_give_exact_argmax_over_the_set():
    cand = np.array([[0.1], [0.4], [0.8]])
    p = make(
        "gp-ucb", bounds=[[0.0], [1.0]], candidates=cand, learn_hyperparameters=False, beta=0.0
    )
    p.observe([0.1], 0.0, 0.0)
    p.observe([0.8], 0.0, 5.0)
    q = p.suggest(1.0)
    assert q.x.tolist() == [0.8]


def test_policies_follow_dtype_and_device():
    p = make("st-gp-ucb", bounds=[[0.0], [1.0]], dtype="float32", raw_samples=16, restarts=2)
    for i in range(5):
        p.observe([i / 5], float(i), float(i % 2))
    q = p.suggest(6.0)
    assert p.model.cholesky_factor.dtype == torch.float32 and 0 <= q.x[0] <= 1


@pytest.mark.parametrize(
    "args,message",
    [
        ((["a", "b"], 1.0, 0.0), "real numbers"),
        (([True, False], 1.0, 0.0), "real numbers"),
        (([0.5 + 0j, 1.0], 1.0, 0.0), "real numbers"),
        (([0.5, 1.0], np.True_, 0.0), "t must be a real number"),
        (([0.5, 1.0], 1.0, 2 + 1j), "y must be a real number"),
        (([0.5, 1.0], 1.0, 1e200), "too large"),
    ],
)
def test_non_real_inputs_are_refused(args, message):
    p = warmed_policy()
    before = p.state_dict()
    with pytest.raises(ValueError, match=message):
        p.observe(*args)
    assert_states_equal(p.state_dict(), before)


def test_one_clock_for_suggest_and_observe():
    p = warmed_policy()  # observations up to t = 0.7
    with pytest.raises(ValueError, match=r"suggest\(t=0.5\) after observe\(t=0.7"):
        p.suggest(0.5)
    q = p.suggest(10.0)
    before = p.state_dict()
    with pytest.raises(ValueError, match=r"observe\(t=5.5\) after suggest\(t=10.0\)"):
        p.observe(q.x, 5.5, 0.0)
    assert_states_equal(p.state_dict(), before)
    p.observe(q.x, 10.0, 0.0)  # at the present time is fine


@pytest.mark.parametrize("name", ["bolt", "wdbo", "st-gp-ucb"])
def test_a_failing_iteration_leaves_the_policy_unchanged(name, monkeypatch):
    from dynbo.models.linalg import NumericalError

    p = warmed_policy(name)
    t = 1.0
    for _ in range(6):
        q = p.suggest(t)
        p.observe(q.x, t, moving_peak(q.x, t))
        t += 1.0
    before = p.state_dict()

    def broken_fit(*args, **kwargs):
        p.model.restandardize()  # some work happens, then the fit fails
        raise NumericalError("simulated failure")

    monkeypatch.setattr("dynbo.policies.fit_strategy.fit_hyperparameters", broken_fit)
    with pytest.raises(NumericalError):
        p.suggest(t)
    assert_states_equal(p.state_dict(), before)
    monkeypatch.undo()
    reference = Policy.from_state_dict(before)
    np.testing.assert_array_equal(p.suggest(t).x, reference.suggest(t).x)


def test_a_failing_observation_leaves_the_policy_unchanged(monkeypatch):
    p = warmed_policy()
    before = p.state_dict()
    original = p.model.add

    def broken_add(*args, **kwargs):
        original(*args, **kwargs)
        raise RuntimeError("simulated failure after the data changed")

    monkeypatch.setattr(p.model, "add", broken_add)
    with pytest.raises(RuntimeError, match="simulated"):
        p.observe([0.5, 1.0], 5.0, 1.0)
    monkeypatch.undo()
    assert_states_equal(p.state_dict(), before)


def test_load_state_dict_refuses_foreign_or_broken_states():
    p = warmed_policy()
    p.suggest(1.0)
    state = p.state_dict()
    other = make(
        "gp-ucb", bounds=[[0.0, 0.0, 0.0], [1.0, 2.0, 1.0]], seed=3, raw_samples=64, restarts=3
    )
    with pytest.raises(ValueError, match="different configuration"):
        other.load_state_dict(state)
    target = warmed_policy()
    before = target.state_dict()
    broken = dict(state)
    del broken["extra"]
    with pytest.raises(ValueError, match="missing extra"):
        target.load_state_dict(broken)
    bad_shape = {**state, "gp": {**state["gp"], "alpha": state["gp"]["alpha"][:-1]}}
    with pytest.raises(ValueError, match="gp.alpha has shape"):
        target.load_state_dict(bad_shape)
    with pytest.raises(ValueError, match="state is for policy"):
        target.load_state_dict({**state, "policy": "wdbo"})
    # malformed pieces are ValueErrors that say what is wrong, never TypeError & co.
    nan_y = state["data"]["y"].clone()
    nan_y[0] = float("nan")
    for broken, message in [
        ({**state, "config": None}, "invalid policy state|configuration"),
        ({**state, "config": {}}, "different configuration"),
        ({**state, "last_observe_time": float("nan")}, "last_observe_time must be a finite"),
        ({**state, "iteration": -1}, "iteration must be an integer >= 0"),
        (
            {**state, "data": {**state["data"], "y": state["data"]["y"].reshape(-1, 1)}},
            "data.y has shape",
        ),
        ({**state, "data": {**state["data"], "y": nan_y}}, "data.y holds NaN"),
    ]:
        with pytest.raises(ValueError, match=message):
            target.load_state_dict(broken)
    with pytest.raises(ValueError, match="cannot build"):
        Policy.from_state_dict({**state, "config": {}})
    assert_states_equal(target.state_dict(), before)


def test_settings_accept_numpy_integers_and_name_bad_values():
    p = make(
        "bolt",
        bounds=[[0.0], [1.0]],
        max_size=np.int64(50),
        min_dataset_size=np.int32(3),
        raw_samples=np.int64(16),
    )
    assert p.max_size == 50 and p.min_dataset_size == 3
    assert make("wdbo", bounds=[[0.0], [1.0]], alpha=np.float32(0.5)).alpha == 0.5
    with pytest.raises(ValueError, match="noise"):
        make("gp-ucb", bounds=[[0.0], [1.0]], initial_hyperparameters={"noise": "a"})
    with pytest.raises(ValueError, match="device"):
        make("gp-ucb", bounds=[[0.0], [1.0]], device="toaster")
    with pytest.raises(ValueError, match="unknown option"):
        make("gp-ucb", bounds=[[0.0], [1.0]], kappa=3)
    p = make("gp-ucb", bounds=[[0.0], [1.0]], hyperparameter_bounds={"fixed": "noise"})
    assert p.hyperparameter_bounds.fixed == frozenset({"noise"})


def test_shared_options_are_parsed_into_one_object_that_round_trips():
    from dynbo.policies import WDBO, PolicyOptions

    policy = make("gp-ucb", bounds=[[0.0], [2.0]], seed=4, beta=2.0, min_fit_size=3)
    options = policy.options
    assert isinstance(options, PolicyOptions)
    assert (options.seed, options.min_fit_size, options.dim) == (4, 3, 1)
    assert policy.search is options.search and policy.kernel is options.kernel
    config = options.as_config()
    # every shared option, defaults included, as plain values
    assert config["bounds"] == [[0.0], [2.0]] and config["dtype"] == "float64"
    again = PolicyOptions.parse(type(policy), **config)
    assert again.as_config() == config
    # the class decides what the options may be
    with pytest.raises(ValueError, match="wdbo needs a stationary spatial kernel"):
        PolicyOptions.parse(
            WDBO, **{**config, "candidates": [[0.5], [1.5]], "arm_covariance": [[1, 0], [0, 1]]}
        )
