"""An animated GIF of one run on a 1-D benchmark (W-DBO Fig. 18).

Each frame shows, over space (vertical) and time (horizontal), the policy's posterior
mean at that iteration, the observations it keeps, the ones it has dropped (removed,
reset or windowed out), the moving maximizer of the benchmark and the present time.

The store keeps each iteration's query, answer and dataset size but not the model, so
the animation **re-runs the stored configuration** and draws the model as it goes.
Under the ``step`` and ``modeled`` clocks the re-run is exact (the same records as the
stored run). A run stored under the ``measured`` or ``wall`` clock depends on the
machine's timing and cannot be replayed: it is re-run under the modeled clock with the
run's ``response_time`` coefficients if it has them, else this machine's calibration
or the default ``R(n)`` (see ``docs/harness.md``), and the animation says so in its
title.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np

from dynbo.harness.campaign import DEFAULT_RESPONSE_TIME
from dynbo.harness.clocks import load_calibration
from dynbo.harness.loop import RunSpec, benchmark_options, execute
from dynbo.report.figures import literal

__all__ = ["run_animation"]


def _replayable(spec: RunSpec) -> tuple[RunSpec, bool]:
    """The spec to re-run and whether it replays the stored run exactly."""
    protocol = spec.protocol
    if protocol.clock in ("step", "modeled"):
        return spec, True
    response = protocol.response_time
    if response is None:
        model = load_calibration()
        response = model.coefficients if model is not None else DEFAULT_RESPONSE_TIME
    modeled = dataclasses.replace(protocol, clock="modeled", response_time=tuple(response))
    return dataclasses.replace(spec, protocol=modeled), False


def run_animation(
    spec: RunSpec, path: str | Path, *, frames: int = 40, grid: int = 80, fps: int = 4
) -> Path:
    """Re-run ``spec`` and write its animation as a GIF.

    Args:
        spec: a run on a benchmark with one spatial dimension (e.g. from
            ``RunSpec`` fields of :meth:`dynbo.harness.Store.runs`).
        path: the GIF to write.
        frames: number of frames (iterations evenly spread over the run; at most one per
            iteration).
        grid: points per axis of the posterior-mean image.
        fps: frames per second.

    Returns:
        The written path.

    Raises:
        ValueError: if the benchmark is not 1-D, or the re-run fails or makes no query.
    """
    from dynbo.benchmarks import get

    if frames < 2 or grid < 2 or fps < 1:
        raise ValueError(f"frames and grid must be >= 2 and fps >= 1, got {frames}, {grid}, {fps}")
    bench = get(spec.benchmark, **benchmark_options(spec))
    if bench.dim != 1:
        raise ValueError(
            f"the animation needs a 1-D benchmark; {spec.benchmark} has d = {bench.dim}"
        )
    run, exact = _replayable(spec)
    horizon = float(run.protocol.horizon or bench.horizon)
    xs = np.linspace(bench.bounds[0, 0], bench.bounds[1, 0], grid)
    ts = np.linspace(0.0, horizon, grid)
    points = np.repeat(xs, grid)[:, None]
    times = np.tile(ts, grid)
    captured: list[dict[str, Any]] = []

    def observe(policy: Any, row: dict[str, Any]) -> None:
        mean, _ = policy.predict(points, times)
        data = policy.dataset
        captured.append(
            {
                "s": row["s"],
                "mean": mean.reshape(grid, grid),
                "kept": (data.t.copy(), data.x[:, 0].copy()),
            }
        )

    result = execute(run, observer=observe, benchmark=bench)
    if result.status != "done":
        raise ValueError(f"the re-run of the stored configuration failed: {result.error}")
    if not captured:
        raise ValueError(
            "the re-run of the stored configuration made no query after its warm-up "
            "(its horizon ends before the first response): nothing to animate"
        )
    seen_t = np.array([r["t"] for r in result.iterations])
    seen_x = np.array([json.loads(r["x"])[0] for r in result.iterations], dtype=float)
    optimum = np.array([bench.optimum(t)[0][0] for t in ts])
    chosen = np.unique(np.linspace(0, len(captured) - 1, frames).round().astype(int))
    low = min(c["mean"].min() for c in captured)
    high = max(c["mean"].max() for c in captured)
    return _draw(
        [captured[i] for i in chosen],
        seen_t,
        seen_x,
        xs,
        ts,
        optimum,
        (low, high),
        f"{spec.policy} on {spec.label or spec.benchmark}, seed {spec.seed}"
        + ("" if exact else " (re-run under the modeled clock)"),
        Path(path),
        fps,
    )


def _draw(
    shots: list[dict[str, Any]],
    seen_t: np.ndarray,
    seen_x: np.ndarray,
    xs: np.ndarray,
    ts: np.ndarray,
    optimum: np.ndarray,
    limits: tuple[float, float],
    title: str,
    path: Path,
    fps: int,
) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.animation import FuncAnimation, PillowWriter

    fig, ax = plt.subplots(figsize=(7.0, 4.0))
    extent = (ts[0], ts[-1], xs[0], xs[-1])
    image = ax.imshow(
        shots[0]["mean"],
        origin="lower",
        aspect="auto",
        extent=extent,
        vmin=limits[0],
        vmax=limits[1],
        cmap="viridis",
    )
    fig.colorbar(image, ax=ax, label="posterior mean")
    ax.plot(ts, optimum, color="red", lw=1.2, label="maximizer")
    dropped = ax.scatter([], [], s=10, marker="x", color="0.6", label="dropped")
    kept = ax.scatter([], [], s=12, color="black", label="kept")
    now = ax.axvline(shots[0]["s"], color="white", lw=1.0, ls="--")
    ax.set_xlabel("time t")
    ax.set_ylabel("x")
    ax.set_title(literal(title), fontsize=9)
    ax.legend(loc="upper left", fontsize=7)
    fig.tight_layout()

    def frame(i: int) -> tuple[Any, ...]:
        shot = shots[i]
        image.set_data(shot["mean"])
        kept_t, kept_x = shot["kept"]
        kept.set_offsets(np.column_stack([kept_t, kept_x]) if len(kept_t) else np.empty((0, 2)))
        before = seen_t <= shot["s"] + 1e-12
        pairs = set(zip(np.round(kept_t, 9), np.round(kept_x, 9)))
        gone = [
            (t, x)
            for t, x in zip(seen_t[before], seen_x[before])
            if (round(t, 9), round(x, 9)) not in pairs
        ]
        dropped.set_offsets(np.array(gone) if gone else np.empty((0, 2)))
        now.set_xdata([shot["s"], shot["s"]])
        return image, kept, dropped, now

    animation = FuncAnimation(fig, frame, frames=len(shots), blit=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    animation.save(path, writer=PillowWriter(fps=fps))
    plt.close(fig)
    return path
