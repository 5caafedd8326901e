"""Figures from stored iterations (matplotlib, headless)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["dataset_size_figure"]


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
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    loop = iterations[iterations["warmup"] == 0]
    benchmarks = sorted(loop["benchmark"].unique())
    policies = sorted(loop["policy"].unique())
    fig, axes = plt.subplots(
        2, len(benchmarks), figsize=(4.2 * len(benchmarks), 6.0), sharex=True, squeeze=False
    )
    for column, bench in enumerate(benchmarks):
        for policy in policies:
            rows = loop[(loop["benchmark"] == bench) & (loop["policy"] == policy)]
            if rows.empty:
                continue
            rows = rows[rows["seed"] == rows["seed"].min()]
            axes[0, column].plot(rows["t"], rows["dataset_size"], label=policy, lw=1.2)
            axes[1, column].plot(rows["t"], rows["response_time"], label=policy, lw=1.2)
        axes[0, column].set_title(bench)
        axes[1, column].set_xlabel("time t (s)")
        axes[1, column].set_yscale("log")
    axes[0, 0].set_ylabel("dataset size |D|")
    axes[1, 0].set_ylabel("response time (s)")
    axes[0, -1].legend(loc="upper left", fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
