"""Checks of a saved policy state before it is restored (``Policy.load_state_dict``).

A state is plain values and tensors (``Policy.state_dict``); these checks reject one of
another format, policy or configuration, or an incomplete or inconsistent one, with a
``ValueError`` naming what is wrong, before anything is changed.
"""

from __future__ import annotations

import copy
import io
import math
import os
import tempfile
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from dynbo.acquisition.latency import DurationTable
from dynbo.policies.additional import AdditionalRequests
from dynbo.policies.fit_strategy import FitHistory
from dynbo.policies.health import HealthMonitor
from dynbo.policies.records import Diagnostics
from dynbo.validation import optional_number

if TYPE_CHECKING:
    from dynbo.policies.base import Policy

__all__ = [
    "STATE_FORMAT",
    "capture_state",
    "check_state",
    "read_state_file",
    "restore_state",
    "write_state_file",
]

#: version of the ``state_dict`` layout.
STATE_FORMAT = 2


def read_state_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The policy state in a file written by ``Policy.save`` (not yet checked).

    Raises:
        OSError: the file cannot be read (``FileNotFoundError`` if it is missing).
        ValueError: the file is not a dynbo policy file. The message says only that:
            torch's own message on a foreign file advises loading it with its safety
            off, which a library must never pass on.
    """
    not_ours = f"{os.fspath(path)} is not a dynbo policy file (one written by Policy.save)"
    try:
        with warnings.catch_warnings():
            # torch warns about a foreign pickle protocol before it refuses the file
            warnings.simplefilter("ignore")
            state = torch.load(path, weights_only=True)
    except OSError:
        raise
    except Exception:  # noqa: BLE001 - torch's unpickler raises many types on a foreign file
        raise ValueError(not_ours) from None
    if (
        not isinstance(state, dict)
        or state.get("format") is None
        or not isinstance(state.get("policy"), str)
    ):
        raise ValueError(not_ours)  # a torch file of something else
    return state


def _is_binary(handle: Any) -> bool:
    """Whether a writable file object takes bytes (a text stream has an ``encoding``)."""
    return not isinstance(handle, io.TextIOBase) and getattr(handle, "encoding", None) is None


def write_state_file(
    state: Callable[[], dict[str, Any]], path: str | os.PathLike[str] | Any
) -> None:
    """``Policy.save``: write ``state()`` to ``path`` (torch serialization), or to a binary
    file object.

    A path is written to a temporary file beside it and renamed over it: a save that
    fails or is interrupted leaves the previous file whole. ``state`` is called only once
    ``path`` has been checked.

    Raises:
        ValueError: ``path`` is empty, a directory, or a file object that takes text.
    """
    if not isinstance(path, (str, os.PathLike)):
        if not (callable(getattr(path, "write", None)) and _is_binary(path)):
            raise ValueError(
                f"save needs a path or a binary file object (opened with 'wb'), got "
                f"{type(path).__name__}"
            )
        torch.save(state(), path)  # a file object: the caller's to manage
        return
    if isinstance(path, str) and not path.strip():
        raise ValueError("save needs a path; got an empty one")
    target = Path(path)
    if target.is_dir():
        raise ValueError(f"cannot save to {target}: it is a directory")
    handle, partial = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    os.close(handle)
    try:
        torch.save(state(), partial)
        # mkstemp's file is private (0600); a saved policy gets the usual mode
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(partial, 0o666 & ~umask)
        os.replace(partial, target)
    finally:
        if os.path.exists(partial):
            os.unlink(partial)


def check_state(
    state: Mapping[str, Any],
    *,
    policy: str,
    config: Mapping[str, Any],
    dim: int,
    input_dim: int,
    extra_keys: frozenset[str] | None = None,
) -> None:
    """Raise a ``ValueError`` unless ``state`` fits the policy described by the arguments.

    Args:
        state: a ``Policy.state_dict()`` (or anything claiming to be one).
        policy: the registered name of the policy that will load it.
        config: that policy's constructor arguments (plain values).
        dim: its spatial dimension ``d``.
        input_dim: columns of its GP inputs (``d`` or ``d + 1``).
        extra_keys: the keys of that policy's own state (``Policy._extra_state``);
            ``None`` skips this check. A state keeping other keys was written by
            another policy (a BOLT state renamed ``"st-gp-ucb"``, say), even when its
            configuration would also build the named one.
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
    extra = state["extra"]
    if not isinstance(extra, Mapping):
        raise ValueError(f"policy state: extra must be a mapping, got {type(extra).__name__}")
    if extra_keys is not None and set(extra) != set(extra_keys):
        unexpected = sorted(str(k) for k in set(extra) - extra_keys)
        lacking = sorted(extra_keys - set(extra))
        what = [f"has {', '.join(unexpected)}"] if unexpected else []
        what += [f"lacks {', '.join(lacking)}"] if lacking else []
        raise ValueError(
            f"policy state does not belong to policy {policy!r}: its policy-specific state "
            f"{' and '.join(what)} (it was written by another policy)"
        )
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
        if value is not None and (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
        ):
            # a NaN time would switch off the time-order checks of observe and suggest
            raise ValueError(f"policy state: {key} must be a finite number or None, got {value!r}")
    iteration = state["iteration"]
    if isinstance(iteration, bool) or not isinstance(iteration, int) or iteration < 0:
        raise ValueError(f"policy state: iteration must be an integer >= 0, got {iteration!r}")
    try:
        n = int(data["y"].shape[0])
        shapes = {
            "data.x": (data["x"].shape, (n, dim)),
            "data.t": (data["t"].shape, (n,)),
            "data.y": (data["y"].shape, (n,)),
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
    for where, part in (("data", data), ("gp", gp)):
        for key, value in part.items():
            if not isinstance(value, torch.Tensor):
                continue
            if value.is_complex() or value.dtype == torch.bool:
                raise ValueError(f"policy state: {where}.{key} must be real, got {value.dtype}")
            if value.is_floating_point() and not bool(torch.isfinite(value).all()):
                raise ValueError(f"policy state: {where}.{key} holds NaN or infinite values")


def capture_state(policy: Policy) -> dict[str, Any]:
    """``Policy.state_dict``: the policy's whole state as plain values and tensors (copies)."""
    diagnostics = policy._diagnostics
    return {
        "format": STATE_FORMAT,
        "policy": policy.name,
        "config": policy.config,
        "iteration": policy._iteration,
        "fitted": policy._fitted,
        "time_scale": policy._time_scale,
        "first_time": policy._first_time,
        "last_suggest_time": policy._last_suggest_time,
        "last_observe_time": policy._last_observe_time,
        "data": {"x": policy._x.clone(), "t": policy._t.clone(), "y": policy._y.clone()},
        "gp": policy._gp.state_dict(),
        "generator": policy._generator.get_state(),
        "diagnostics": None if diagnostics is None else diagnostics.as_dict(),
        "extra": policy._extra_state(),
        "latency": {"delays": policy._delays.state(), "awaiting": policy._awaiting},
        "additional": policy._requests.state(),
        "health": policy._health.state(),
        "pending": [[x.tolist(), t] for x, t in policy._pending],
        "fit_history": None if policy._fit_history is None else policy._fit_history.state(),
        "constraints": {**policy._constraints.state_dict(), **policy._safety.state()},
    }


def restore_state(policy: Policy, state: Mapping[str, Any]) -> None:
    """Put a checked state (:func:`check_state`) into ``policy``.

    It may fail half-way on a malformed piece: ``Policy.load_state_dict`` snapshots the
    policy first and restores it then. The policy keeps copies only: changing ``state``
    afterwards (its diagnostics, say) leaves the policy as loaded.
    """
    state = copy.deepcopy(dict(state))
    data = state["data"]
    policy._x = data["x"].clone().to(policy.dtype)
    policy._t = data["t"].clone().to(policy.dtype)
    policy._y = data["y"].clone().to(policy.dtype)
    policy._gp.load_state_dict(state["gp"])
    policy._iteration = int(state["iteration"])
    policy._fitted = bool(state["fitted"])
    time_scale = optional_number("time_scale", state["time_scale"])
    if time_scale is not None and time_scale <= 0:
        raise ValueError(f"time_scale must be positive, got {time_scale}")
    policy._time_scale = time_scale
    policy._first_time = optional_number("first_time", state["first_time"])
    policy._last_suggest_time = optional_number("last_suggest_time", state["last_suggest_time"])
    policy._last_observe_time = optional_number("last_observe_time", state["last_observe_time"])
    policy._generator.set_state(state["generator"])
    diagnostics = state["diagnostics"]
    policy._diagnostics = None if diagnostics is None else Diagnostics(**diagnostics)
    policy._load_extra_state(state["extra"])
    # states saved before latency-aware acquisition (or additional queries) have none
    latency = state.get("latency") or {"delays": {}, "awaiting": None}
    policy._delays = DurationTable.from_state(latency["delays"])
    awaiting = latency["awaiting"]
    policy._awaiting = (
        None if awaiting is None else (float(awaiting[0]), int(awaiting[1]), float(awaiting[2]))
    )
    # states saved before the restart rule have none: the next fit runs the fresh start
    policy._fit_history = FitHistory.from_state(state.get("fit_history"))
    # states saved before the health monitor have none: a fresh one
    policy._health = HealthMonitor.from_state(state.get("health"))
    # states saved before pending queries were tracked have none
    policy._pending = tuple(
        (np.asarray(policy._domain.validate_point(x).cpu(), dtype=float), float(t))
        for x, t in state.get("pending") or ()
    )
    _restore_constraints(policy, state.get("constraints"))
    additional = state.get("additional")
    policy._requests = (
        policy._no_requests()
        if additional is None
        else AdditionalRequests.from_state(additional, policy._domain.tolerance())
    )


def _restore_constraints(policy: Policy, state: Mapping[str, Any] | None) -> None:
    """The constraint GPs and the remembered points (states saved before constraints
    have none: nothing remembered, and no constraint data, which only fits a policy
    without constraints or without data)."""
    safety = policy._safety.restored(state, policy.dim)
    if state is None:
        if len(policy._constraints) and policy.dataset_size:
            raise ValueError("policy state has no constraint data for the declared constraints")
        policy._safety = safety
        return
    models = policy._constraints.loaded(state, FitHistory.from_state)
    if len(models) and models.n != policy.dataset_size:
        raise ValueError(
            f"policy state: the constraint GPs hold {models.n} observations, the dataset "
            f"{policy.dataset_size}"
        )
    policy._constraints, policy._safety = models, safety
