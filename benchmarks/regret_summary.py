"""Shared by the reproduction scripts: final average regret per (benchmark, policy) and the
running-average curves, from a store's iterations frame (warm-up rows left out)."""

from __future__ import annotations

import numpy as np


def summarize(frame) -> tuple[dict, dict]:
    """``(results, curves)`` of an iterations frame.

    ``results[label][policy]``: mean and standard error over seeds of the final average
    regret ``R_T / T`` and the number of runs; ``curves[label][policy]``: ``(steps,)`` mean
    over seeds of the running average ``R_t / t`` (up to the shortest run).
    """
    frame = frame[frame["warmup"] == 0]
    results: dict[str, dict[str, dict[str, float]]] = {}
    curves: dict[str, dict[str, np.ndarray]] = {}
    for (label, policy), group in frame.groupby(["benchmark", "policy"]):
        per_run = group.groupby("seed")["regret"].apply(lambda r: np.asarray(r, dtype=float))
        final = np.array([r.mean() for r in per_run])
        results.setdefault(label, {})[policy] = {
            "final_average_regret_mean": float(final.mean()),
            "final_average_regret_se": float(final.std(ddof=1) / np.sqrt(len(final)))
            if len(final) > 1
            else float("nan"),
            "runs": int(len(final)),
        }
        steps = min(len(r) for r in per_run)
        running = np.stack([np.cumsum(r[:steps]) / np.arange(1, steps + 1) for r in per_run])
        curves.setdefault(label, {})[policy] = running.mean(0)
    return results, curves


def plot_curves(curves: dict, policies, path: str, title=lambda label: label) -> None:
    """One panel per benchmark label: mean running average regret against the step."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(curves), figsize=(4 * len(curves), 3.2), sharey=True)
    for ax, label in zip(np.atleast_1d(axes), sorted(curves)):
        for policy in policies:
            if policy in curves[label]:
                curve = curves[label][policy]
                ax.plot(np.arange(1, len(curve) + 1), curve, label=policy)
        ax.set_title(title(label))
        ax.set_xlabel("step t")
    np.atleast_1d(axes)[0].set_ylabel("average regret R_t / t")
    np.atleast_1d(axes)[0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
