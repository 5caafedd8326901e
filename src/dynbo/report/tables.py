"""Paper-style tables from stored runs: mean +- standard error over seeds."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

__all__ = ["aggregate", "summary_table"]


def aggregate(
    runs: Sequence[dict[str, Any]], metric: str = "average_regret"
) -> dict[tuple[str, str], tuple[float, float, int]]:
    """``(benchmark, policy) -> (mean, standard error, number of seeds)`` of a summary metric.

    Failed runs and runs without the metric are left out.
    """
    values: dict[tuple[str, str], list[float]] = defaultdict(list)
    for run in runs:
        value = run["summary"].get(metric) if run["status"] == "done" else None
        if value is not None:
            values[(run["label"], run["policy"])].append(float(value))
    out = {}
    for key, vals in values.items():
        n = len(vals)
        mean = sum(vals) / n
        se = math.sqrt(sum((v - mean) ** 2 for v in vals) / (n - 1) / n) if n > 1 else float("nan")
        out[key] = (mean, se, n)
    return out


def summary_table(runs: Sequence[dict[str, Any]], metric: str = "average_regret") -> str:
    """A text table: benchmarks as rows, policies as columns, ``mean +- se``."""
    stats = aggregate(runs, metric)
    if not stats:
        return "(no finished runs)"
    benchmarks = sorted({b for b, _ in stats})
    policies = sorted({p for _, p in stats})
    cells = {
        key: (f"{m:.4g} ± {se:.2g}" if not math.isnan(se) else f"{m:.4g}")
        for key, (m, se, _) in stats.items()
    }
    width = max([len(p) for p in policies] + [len(c) for c in cells.values()]) + 2
    first = max(len(b) for b in benchmarks + [metric]) + 2
    lines = [f"{metric:<{first}}" + "".join(f"{p:>{width}}" for p in policies)]
    for b in benchmarks:
        lines.append(
            f"{b:<{first}}" + "".join(f"{cells.get((b, p), '-'):>{width}}" for p in policies)
        )
    return "\n".join(lines)
