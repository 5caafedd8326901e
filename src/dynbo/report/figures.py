"""Figures from stored iterations (matplotlib, headless)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["dataset_size_figure", "overall_figure", "regret_figure"]

#: points of the common time grid the per-seed curves are interpolated on
GRID_POINTS = 200


def literal(text: str) -> str:
    """A label a campaign gave (benchmark, policy variant, title) as matplotlib text: a
    ``$`` is a dollar sign, not the start of math (``cost $x$`` must not be parsed, and an
    unknown symbol would fail the whole figure). Only these texts are escaped: the
    axes' own tick labels are mathtext (log-scale exponents)."""
    return str(text).replace("$", r"\$")


def _pyplot():  # noqa: ANN202 - the matplotlib.pyplot module
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _series_column(frame: pd.DataFrame) -> str:
    """The column naming a curve: ``variant`` when the frame has it, else ``policy``."""
    return "variant" if "variant" in frame.columns else "policy"


def _loop_series(
    iterations: pd.DataFrame,
) -> tuple[str, pd.DataFrame, list[str], dict[str, str]]:
    """The curve column, the loop rows (no warm-up), the benchmarks and a color per curve."""
    series = _series_column(iterations)
    loop = iterations[iterations["warmup"] == 0]
    return series, loop, sorted(loop["benchmark"].unique()), _colors(loop[series])


def _colors(names: pd.Series) -> dict[str, str]:
    """One color per series name, the same in every panel (sorted names, tab10 cycle)."""
    return {name: f"C{i % 10}" for i, name in enumerate(sorted(names.unique()))}


def _legend(fig, colors: dict[str, str]) -> None:  # noqa: ANN001 - a matplotlib Figure
    """One legend for the whole figure, below the panels, with every series."""
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=c, lw=2) for c in colors.values()]
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    labels = [literal(c) for c in colors]
    fig.legend(handles, labels, loc="lower center", ncol=min(len(colors), 6), fontsize=8)


def _save(fig, path: str | Path) -> Path:  # noqa: ANN001 - a matplotlib Figure
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    _pyplot().close(fig)
    return out


def regret_figure(iterations: pd.DataFrame, path: str | Path, *, title: str | None = None) -> Path:
    """Average regret ``R_k / k`` against time, mean +- standard error over seeds.

    One panel per benchmark, one curve per policy variant (BOLT Fig. 4, 6-15). Each
    run's running average is held constant between its queries and read on a common
    grid of the loop's time span; the band is the standard error over the seeds.

    Args:
        iterations: rows of :meth:`dynbo.harness.Store.iterations_frame` (columns
            ``benchmark``, ``policy`` or ``variant``, ``seed``, ``warmup``, ``t``,
            ``regret``).
        path: where to write the figure (PNG, SVG or PDF by extension).
        title: optional figure title.

    Returns:
        The written path.
    """
    import numpy as np

    plt = _pyplot()
    series, loop, benchmarks, colors = _loop_series(iterations)
    fig, axes = plt.subplots(
        1, len(benchmarks), figsize=(4.2 * len(benchmarks), 3.8), squeeze=False
    )
    for column, bench in enumerate(benchmarks):
        ax = axes[0, column]
        rows = loop[loop["benchmark"] == bench]
        grid = np.linspace(rows["t"].min(), rows["t"].max(), GRID_POINTS)
        for name in sorted(rows[series].unique()):
            color = colors[name]
            curves = []
            for _, run in rows[rows[series] == name].groupby("seed"):
                run = run.sort_values("t")
                times = run["t"].to_numpy()
                running = np.cumsum(run["regret"].to_numpy()) / np.arange(1, len(run) + 1)
                index = np.searchsorted(times, grid, side="right") - 1
                curve = np.where(index >= 0, running[np.clip(index, 0, None)], np.nan)
                curves.append(curve)
            stacked = np.vstack(curves)
            counts = np.sum(~np.isnan(stacked), axis=0)
            # grid points before a run's first query have no value in it
            total = np.nansum(stacked, axis=0)
            mean = np.where(counts > 0, total / np.maximum(counts, 1), np.nan)
            with warnings.catch_warnings():
                # columns with fewer than two values: their se is set to 0 below
                warnings.simplefilter("ignore", RuntimeWarning)
                spread = np.nanstd(stacked, axis=0, ddof=1) if len(curves) > 1 else 0 * mean
            se = np.where(counts > 1, spread / np.sqrt(np.maximum(counts, 1)), 0.0)
            ax.plot(grid, mean, color=color, lw=1.3)
            ax.fill_between(grid, mean - se, mean + se, color=color, alpha=0.2)
        ax.set_title(literal(bench))
        ax.set_xlabel("time t")
    axes[0, 0].set_ylabel("average regret R_k / k")
    if title:
        fig.suptitle(literal(title))
    _legend(fig, colors)
    return _save(fig, path)


def overall_figure(table, path: str | Path, *, title: str | None = None) -> Path:  # noqa: ANN001
    """The OVERALL row of a :class:`~dynbo.report.tables.Table` as bars with +- se.

    The normalized score of BOLT Fig. 3 / W-DBO Fig. 3 (0: the best run of every
    benchmark, 1: the worst), lower is better.

    Raises:
        ValueError: if the table has no OVERALL row (fewer than two benchmarks).
    """
    from dynbo.report.tables import OVERALL

    if OVERALL not in table.rows:
        raise ValueError("the table has no OVERALL row (it needs two benchmarks or more)")
    plt = _pyplot()
    names = [c for c in table.columns if (OVERALL, c) in table.cells]
    cells = [table.cells[(OVERALL, c)] for c in names]
    errors = [0.0 if c.se != c.se else c.se for c in cells]  # nan -> no bar
    fig, ax = plt.subplots(figsize=(1.2 * len(names) + 2.0, 3.4))
    bars = ax.bar(range(len(names)), [c.mean for c in cells], yerr=errors, capsize=4)
    for bar, cell in zip(bars, cells):
        if cell.bold:
            bar.set_hatch("//")
    ax.set_xticks(range(len(names)), [literal(n) for n in names], rotation=30, ha="right")
    ax.set_ylabel("normalized score (lower is better)")
    if title:
        ax.set_title(literal(title))
    fig.tight_layout()
    return _save(fig, path)


def dataset_size_figure(
    iterations: pd.DataFrame, path: str | Path, *, title: str | None = None
) -> Path:
    """Dataset size and response time against time, one column per benchmark.

    Args:
        iterations: rows of :meth:`dynbo.harness.Store.iterations_frame` (columns
            ``benchmark``, ``policy``, ``seed``, ``warmup``, ``t``, ``dataset_size``,
            ``response_time``); the first seed of each (benchmark, policy) is drawn.
        path: where to write the figure (PNG, SVG or PDF by extension).
        title: optional figure title.

    Returns:
        The written path.
    """
    plt = _pyplot()
    series, loop, benchmarks, colors = _loop_series(iterations)
    # the step clock charges no response time: its row would stay empty
    timed = bool((loop["response_time"].fillna(0) > 0).any())
    panels = 2 if timed else 1
    fig, axes = plt.subplots(
        panels,
        len(benchmarks),
        figsize=(4.2 * len(benchmarks), 3.0 * panels + 0.6),
        sharex="col",
        squeeze=False,
    )
    for column, bench in enumerate(benchmarks):
        for name, color in colors.items():
            rows = loop[(loop["benchmark"] == bench) & (loop[series] == name)]
            if rows.empty:
                continue
            rows = rows[rows["seed"] == rows["seed"].min()]
            axes[0, column].plot(rows["t"], rows["dataset_size"], color=color, lw=1.2)
            if timed:
                axes[1, column].plot(rows["t"], rows["response_time"], color=color, lw=1.2)
        axes[0, column].set_title(literal(bench))
        axes[-1, column].set_xlabel("time t")
        if timed:
            axes[1, column].set_yscale("log")
    axes[0, 0].set_ylabel("dataset size |D|")
    if timed:
        axes[1, 0].set_ylabel("response time (s)")
    if title:
        fig.suptitle(literal(title))
    _legend(fig, colors)
    return _save(fig, path)
