"""Figures from stored iterations (matplotlib, headless)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "dataset_size_figure",
    "overall_figure",
    "plain_log_ticks",
    "regret_figure",
    "series_styles",
]

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
) -> tuple[str, pd.DataFrame, list[str], dict[str, dict[str, Any]]]:
    """The curve column, the loop rows (no warm-up), the benchmarks and a style per curve."""
    series = _series_column(iterations)
    loop = iterations[iterations["warmup"] == 0]
    return series, loop, sorted(loop["benchmark"].unique()), series_styles(loop[series])


#: line styles and markers cycled over the series (colors cycle over tab10): two curves
#: that coincide (GP-UCB and ST-GP-UCB while neither forgets) stay told apart
LINE_STYLES = ("-", "--", "-.", ":")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
#: a marker every this fraction of a curve's length (``markevery``)
MARK_EVERY = 0.12


def series_styles(names: pd.Series | list[str]) -> dict[str, dict[str, Any]]:
    """Matplotlib line keywords per series name, the same in every panel.

    Sorted names get the tab10 colors, :data:`LINE_STYLES` and :data:`MARKERS` in turn;
    each series starts its markers at its own offset along the curve, so that two curves
    that coincide show both their markers. The reference players are reference lines:
    :data:`REFERENCE_STYLES` (grey and black, thin, no marker).
    """
    unique = sorted(set(names) - set(REFERENCE_STYLES))
    styles = {
        name: {
            "color": f"C{i % 10}",
            "linestyle": LINE_STYLES[i % len(LINE_STYLES)],
            "marker": MARKERS[i % len(MARKERS)],
            "markersize": 4,
            "markevery": (MARK_EVERY * i / max(len(unique), 1), MARK_EVERY),
        }
        for i, name in enumerate(unique)
    }
    for name in set(names) & set(REFERENCE_STYLES):
        styles[name] = dict(REFERENCE_STYLES[name])
    return styles


#: the reference players' lines (:mod:`dynbo.harness.references`): not policies, so
#: outside the policies' color cycle
REFERENCE_STYLES: dict[str, dict[str, Any]] = {
    "random": {"color": "0.55", "linestyle": "--", "linewidth": 1.2},
    "oracle-lag": {"color": "black", "linestyle": ":", "linewidth": 1.2},
}


def _legend(axes, styles: dict[str, dict[str, Any]]) -> None:  # noqa: ANN001 - Axes grid
    """One legend for the whole figure, beside the top-right panel, with every series."""
    from matplotlib.lines import Line2D

    keys = ("color", "linestyle", "marker", "markersize")
    # a reference line has no marker (and its own width)
    handles = [
        Line2D([], [], **{"linewidth": 1.5, **{k: st[k] for k in keys if k in st}})
        for st in styles.values()
    ]
    labels = [literal(name) for name in styles]
    axes[0, -1].legend(
        handles,
        labels,
        loc="upper left",
        bbox_to_anchor=(1.02, 1.0),
        borderaxespad=0.0,
        fontsize=8,
        frameon=False,
    )


def plain_log_ticks(ax, axis: str = "y") -> None:  # noqa: ANN001 - a matplotlib Axes
    """Label a log-scale axis with plain numbers (``0.5``, ``2``, ``100``), never
    ``5x10^-1``, and give it at least three ticks when it can: the powers of ten inside
    the axis's limits, else 1, 2 and 5 times them, else 1 to 9 times them (a span of
    less than a decade), else round linear steps; thinned to at most eight, no minor
    labels. Call it after the data are plotted."""
    import numpy as np
    from matplotlib.ticker import FixedLocator, FuncFormatter, MaxNLocator, NullFormatter

    target = ax.yaxis if axis == "y" else ax.xaxis
    low, high = sorted(ax.get_ylim() if axis == "y" else ax.get_xlim())
    if not (low > 0 and np.isfinite(high) and high > low):
        return
    first, last = int(np.floor(np.log10(low))), int(np.ceil(np.log10(high)))
    inside = []
    for steps in ((1.0,), (1.0, 2.0, 5.0), tuple(float(m) for m in range(1, 10))):
        ladder = [m * 10.0**e for e in range(first, last + 1) for m in steps]
        inside = [v for v in ladder if low * (1 - 1e-9) <= v <= high * (1 + 1e-9)]
        if len(inside) >= 3:
            break
    if len(inside) < 3:  # a narrow span: round linear steps inside it
        inside = [v for v in MaxNLocator(nbins=4).tick_values(low, high) if low <= v <= high]
    if len(inside) > 8:
        inside = inside[:: int(np.ceil(len(inside) / 8))]
    target.set_major_locator(FixedLocator(inside))
    target.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.3g}"))
    target.set_minor_formatter(NullFormatter())


def _save(fig, path: str | Path) -> Path:  # noqa: ANN001 - a matplotlib Figure
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    # the tight box takes in the legend beside the panels
    fig.savefig(out, dpi=110, bbox_inches="tight", pad_inches=0.1)
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
    series, loop, benchmarks, styles = _loop_series(iterations)
    fig, axes = plt.subplots(
        1, len(benchmarks), figsize=(4.2 * len(benchmarks), 3.4), squeeze=False
    )
    for column, bench in enumerate(benchmarks):
        ax = axes[0, column]
        rows = loop[loop["benchmark"] == bench]
        grid = np.linspace(rows["t"].min(), rows["t"].max(), GRID_POINTS)
        for name in sorted(rows[series].unique()):
            style = styles[name]
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
            ax.plot(grid, mean, **{"linewidth": 1.3, **style})
            ax.fill_between(grid, mean - se, mean + se, color=style["color"], alpha=0.2)
        ax.set_title(literal(bench))
        ax.set_xlabel("time t")
    axes[0, 0].set_ylabel("average regret R_k / k")
    if title:
        fig.suptitle(literal(title))
    fig.tight_layout()
    _legend(axes, styles)
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
    series, loop, benchmarks, styles = _loop_series(iterations)
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
        for name, style in styles.items():
            rows = loop[(loop["benchmark"] == bench) & (loop[series] == name)]
            if rows.empty:
                continue
            rows = rows[rows["seed"] == rows["seed"].min()]
            axes[0, column].plot(rows["t"], rows["dataset_size"], **{"linewidth": 1.2, **style})
            if timed:
                axes[1, column].plot(
                    rows["t"], rows["response_time"], **{"linewidth": 1.2, **style}
                )
        axes[0, column].set_title(literal(bench))
        axes[-1, column].set_xlabel("time t")
        if timed:
            axes[1, column].set_yscale("log")
            plain_log_ticks(axes[1, column])
    axes[0, 0].set_ylabel("dataset size |D|")
    if timed:
        axes[1, 0].set_ylabel("response time (s)")
    if title:
        fig.suptitle(literal(title))
    fig.tight_layout()
    _legend(axes, styles)
    return _save(fig, path)
