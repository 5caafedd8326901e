"""Checks of a saved policy state before it is restored (``Policy.load_state_dict``).

A state is plain values and tensors (``Policy.state_dict``); these checks reject one of
another format, policy or configuration, or an incomplete or inconsistent one, with a
``ValueError`` naming what is wrong, before anything is changed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

__all__ = ["STATE_FORMAT", "check_state"]

#: version of the ``state_dict`` layout.
STATE_FORMAT = 2


def check_state(
    state: Mapping[str, Any],
    *,
    policy: str,
    config: Mapping[str, Any],
    dim: int,
    input_dim: int,
) -> None:
    """Raise a ``ValueError`` unless ``state`` fits the policy described by the arguments.

    Args:
        state: a ``Policy.state_dict()`` (or anything claiming to be one).
        policy: the registered name of the policy that will load it.
        config: that policy's constructor arguments (plain values).
        dim: its spatial dimension ``d``.
        input_dim: columns of its GP inputs (``d`` or ``d + 1``).
    """
    if not isinstance(state, Mapping):
        raise ValueError(f"a policy state must be a mapping, got {type(state).__name__}")
    if state.get("format") != STATE_FORMAT:
        raise ValueError(f"unsupported policy state format {state.get('format')!r}")
    if state.get("policy") != policy:
        raise ValueError(f"state is for policy {state.get('policy')!r}, not {policy!r}")
    required = {
        "config",
        "iteration",
        "fitted",
        "time_scale",
        "first_time",
        "last_suggest_time",
        "last_observe_time",
        "data",
        "gp",
        "generator",
        "diagnostics",
        "extra",
    }
    missing = sorted(required - set(state))
    if missing:
        raise ValueError(f"policy state is missing {', '.join(missing)}")
    if state["config"] != config:
        keys = sorted(
            k for k in set(state["config"]) | set(config) if state["config"].get(k) != config.get(k)
        )
        raise ValueError(f"state was saved with a different configuration ({', '.join(keys)})")
    data, gp = state["data"], state["gp"]
    if not isinstance(data, Mapping) or not isinstance(gp, Mapping):
        raise ValueError("policy state: 'data' and 'gp' must be mappings")
    for where, part, keys in (
        ("data", data, ("x", "t", "y")),
        ("gp", gp, ("inputs", "targets", "noise_scale", "factor", "alpha")),
    ):
        for key in keys:
            if not isinstance(part.get(key), torch.Tensor):
                got = type(part.get(key)).__name__ if key in part else "nothing"
                raise ValueError(f"policy state: {where}.{key} must be a tensor, got {got}")
    if not isinstance(state["generator"], torch.Tensor):
        raise ValueError("policy state: generator must be a tensor (torch.Generator state)")
    for key in ("time_scale", "first_time", "last_suggest_time", "last_observe_time"):
        value = state[key]
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise ValueError(f"policy state: {key} must be a number or None, got {value!r}")
    if isinstance(state["iteration"], bool) or not isinstance(state["iteration"], int):
        raise ValueError(f"policy state: iteration must be an integer, got {state['iteration']!r}")
    try:
        n = int(data["y"].shape[0])
        shapes = {
            "data.x": (data["x"].shape, (n, dim)),
            "data.t": (data["t"].shape, (n,)),
            "gp.inputs": (gp["inputs"].shape, (n, input_dim)),
            "gp.targets": (gp["targets"].shape, (n,)),
            "gp.noise_scale": (gp["noise_scale"].shape, (n,)),
            "gp.factor": (gp["factor"].shape, (n, n)),
            "gp.alpha": (gp["alpha"].shape, (n,)),
        }
    except (KeyError, AttributeError, TypeError, IndexError) as err:
        raise ValueError(f"policy state is incomplete: {type(err).__name__}: {err}") from None
    for name, (got, want) in shapes.items():
        if tuple(got) != want:
            raise ValueError(f"policy state: {name} has shape {tuple(got)}, expected {want}")
