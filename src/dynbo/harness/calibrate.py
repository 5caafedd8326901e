"""Fit this machine's response-time model R(n) by timing a policy at several dataset sizes."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from dynbo.harness.clocks import ResponseTimeModel, calibration_path, fit_cubic

__all__ = ["calibrate", "save_calibration"]


def calibrate(
    policy: str = "st-gp-ucb",
    sizes: Sequence[int] = (25, 50, 100, 200, 400),
    *,
    dim: int = 3,
    repeats: int = 3,
    seed: int = 0,
    threads: int = 1,
    horizon: float = 600.0,
) -> tuple[ResponseTimeModel, list[dict[str, float]]]:
    """Time ``suggest`` (fit + cleaning + acquisition) at each dataset size; fit a cubic.

    For each ``n`` the policy observes ``n`` points of a smooth random function spread
    over ``[0, horizon]`` and is asked ``repeats + 1`` times for a query; the first call
    (which includes the first, cold hyperparameter fit) is not timed.

    Returns:
        The fitted :class:`ResponseTimeModel` and the measured ``(n, seconds)`` pairs.
    """
    from dynbo.policies import make, policy_class

    if not sizes or any(int(n) < 2 for n in sizes):
        raise ValueError(f"sizes must be integers >= 2, got {list(sizes)}")
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    torch.set_num_threads(threads)
    rng = np.random.default_rng(seed)
    rows = []
    for n in sizes:
        # the synthetic objective below has noise standard deviation 0.1
        known = {"noise_variance": 0.01} if policy_class(policy).known_noise else {}
        p = make(policy, bounds=[[0.0] * dim, [1.0] * dim], seed=seed, **known)
        times = np.sort(rng.uniform(0, horizon, int(n)))
        for t in times:
            x = rng.uniform(0, 1, dim)
            p.observe(
                x, t, float(np.sin(5 * x.sum()) * np.cos(t / 60) + 0.1 * rng.standard_normal())
            )
        p.suggest(horizon)
        durations = []
        for r in range(repeats):
            p.cancel_pending()  # each repeat times the same n-point iteration
            start = time.perf_counter()
            p.suggest(horizon + 1e-3 * (r + 1))
            durations.append(time.perf_counter() - start)
        rows.append({"n": int(n), "seconds": float(np.median(durations))})
    model = fit_cubic([r["n"] for r in rows], [r["seconds"] for r in rows])
    return model, rows


def calibration_target(path: str | Path | None = None) -> Path:
    """Where :func:`save_calibration` writes, checked before any measuring.

    Raises:
        ValueError: if the path is a directory, or an existing file that is not a
            calibration file (never overwritten: it may be a result store or anything else
            a user keeps).
    """
    p = Path(path) if path is not None else calibration_path()
    if p.is_dir():
        raise ValueError(f"calibration output {p} is a directory")
    if p.exists():
        try:
            old = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            old = None
        if not (isinstance(old, dict) and "coefficients" in old):
            raise ValueError(
                f"{p} exists and is not a calibration file; not overwriting it "
                "(choose another --output)"
            )
    return p


def save_calibration(
    model: ResponseTimeModel, path: str | Path | None = None, **info: object
) -> Path:
    """Write the model as JSON (default: :func:`dynbo.harness.clocks.calibration_path`).

    Raises:
        ValueError: as :func:`calibration_target`.
    """
    p = calibration_target(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps({"coefficients": list(model.coefficients), **info}, indent=2))
    return p
