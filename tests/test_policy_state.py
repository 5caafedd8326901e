"""Saved policy states: foreign files, copies on load, states of another policy, boxes
too narrow for the dtype."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from dynbo.policies import Policy, make


def _observed(name: str, n: int = 4, **options: object) -> Policy:
    """A 1-d policy told ``n`` observations (no suggest: cheap)."""
    policy = make(name, bounds=[[0.0], [1.0]], seed=0, **options)
    for i in range(n):
        policy.observe([i / n], float(i), float(np.sin(3.0 * i)))
    return policy


@pytest.mark.parametrize("kind", ["text", "empty", "other torch object", "torch list", "pickle"])
def test_load_of_a_foreign_file_says_only_that_it_is_not_a_policy_file(tmp_path, kind):
    path = tmp_path / "file"
    if kind == "text":
        path.write_text("# dynbo\n\nnot a policy\n")
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "other torch object":
        torch.save({"weights": torch.ones(3)}, path)
    elif kind == "torch list":
        torch.save([1, 2, 3], path)
    else:
        import pickle

        path.write_bytes(pickle.dumps({"a": 1}, protocol=4))
    with pytest.raises(ValueError) as caught:
        Policy.load(path)
    message = str(caught.value)
    assert message == f"{path} is not a dynbo policy file (one written by Policy.save)"
    # torch's advice to switch its safety off must never reach a user
    assert "weights_only" not in message
    assert "arbitrary code" not in message


def test_load_of_a_policy_file_still_restores_it(tmp_path):
    policy = _observed("wdbo")
    policy.save(tmp_path / "p.pt")
    loaded = Policy.load(tmp_path / "p.pt")
    assert loaded.name == "wdbo"
    np.testing.assert_array_equal(loaded.dataset.y, policy.dataset.y)


def test_load_names_the_file_when_its_state_is_refused(tmp_path):
    state = _observed("bolt").state_dict()
    state["policy"] = "st-gp-ucb"
    torch.save(state, tmp_path / "p.pt")
    with pytest.raises(ValueError, match=r"p\.pt: .*does not belong to policy 'st-gp-ucb'"):
        Policy.load(tmp_path / "p.pt")


def test_from_state_dict_keeps_no_reference_into_the_state():
    policy = _observed("wdbo", n=6)
    policy.suggest(6.0)  # diagnostics with hyperparameters and extras
    state = policy.state_dict()
    loaded = Policy.from_state_dict(state)
    before = copy.deepcopy(loaded.diagnostics.as_dict())
    assert before["hyperparameters"]
    state["diagnostics"]["hyperparameters"]["noise"] = -123.0
    state["diagnostics"]["hyperparameters"]["lengthscale_space"] = "changed"
    state["diagnostics"]["extra"]["injected"] = True
    state["extra"]["budget"] = 1e9
    state["config"]["seed"] = 99
    state["data"]["y"].fill_(7.0)
    assert loaded.diagnostics.as_dict() == before
    assert loaded.config["seed"] == 0
    assert loaded.state_dict()["extra"]["budget"] == policy.state_dict()["extra"]["budget"]
    np.testing.assert_array_equal(loaded.dataset.y, policy.dataset.y)


@pytest.mark.parametrize(
    ("written_by", "named", "reason"),
    [
        ("bolt", "st-gp-ucb", "has max_size, previous_size, previous_time, responses"),
        ("wdbo", "st-gp-ucb", "has budget, previous_time"),
        ("st-gp-ucb", "wdbo", "lacks budget, previous_time"),
        ("wdbo", "bolt", "has budget and lacks max_size"),
        ("w-sparq-gp-ucb", "sparq-gp-ucb", "has next_window"),
        ("sw-gp-ucb", "gp-ucb", "has dropped"),
    ],
)
def test_a_state_of_another_policy_is_refused(written_by, named, reason):
    state = _observed(written_by).state_dict()
    state["policy"] = named
    with pytest.raises(ValueError, match=f"does not belong to policy '{named}'") as caught:
        Policy.from_state_dict(state)
    assert reason in str(caught.value)
    # the same check guards load_state_dict into an existing policy, which stays as it was
    target = _observed(named, n=2)
    before = target.state_dict()
    with pytest.raises(ValueError, match="does not belong"):
        target.load_state_dict(state)
    after = target.state_dict()
    np.testing.assert_array_equal(after["data"]["y"], before["data"]["y"])
    assert after["extra"].keys() == before["extra"].keys()


def test_a_box_too_narrow_for_the_dtype_is_refused_at_make():
    bounds = [[0.0] * 8, [1e-300] * 8]
    with pytest.raises(ValueError, match=r"too narrow.*1\.18e-38.*float32"):
        make("wdbo", bounds=bounds, dtype="float32")
    # float64 holds that width: the same box works there, end to end
    policy = make("wdbo", bounds=bounds, seed=0)
    policy.observe([5e-301] * 8, 0.0, 1.0)
    policy.observe([2e-301] * 8, 1.0, 0.5)
    assert np.all(np.isfinite(policy.suggest(2.0).x))
    # a float32 box just above the limit is accepted and its observations are finite
    narrow = make("gp-ucb", bounds=[[0.0], [1e-30]], dtype="float32", seed=0)
    narrow.observe([5e-31], 0.0, 1.0)
    narrow.observe([2e-31], 1.0, 0.0)
    assert np.isfinite(narrow.suggest(2.0).x).all()
    with pytest.raises(ValueError, match=r"upper\[1\] - lower\[1\] = 1e-39"):
        make("gp-ucb", bounds=[[0.0, 0.0], [1.0, 1e-39]], dtype="float32")
