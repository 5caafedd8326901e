"""Constraints in a run: what the policy is told, and the violations every run counts.

A run on a constrained benchmark (one with :attr:`~dynbo.benchmarks.Benchmark.constraint_names`)
may ask its policy to model the constraints with the policy option ``constraint_mode``
(``"feasibility"`` or ``"safe"``): :func:`constraint_options` then sets the policy's
``constraints`` to the benchmark's names and, in safe mode, its ``safe_points`` to the
benchmark's (:meth:`~dynbo.benchmarks.Benchmark.safe_points`), unless the options give
them. The loop then tells the policy a noisy observation of every modeled constraint with
each answer (:meth:`~dynbo.benchmarks.Benchmark.observe_constraints`, from a noise stream
of its own, ``[seed, 2]``, so that the objective's noise is the same whether or not the
policy models the constraints), and in safe mode the warm-up design is the safe points
(cycled, at the usual warm-up times) instead of uniform points of the box.

Violations are counted on every run on a constrained benchmark, whether or not its policy
models the constraints: a query violates when its **noise-free** constraint values at
``(x_k, t_k)`` are below 0 for any constraint (:func:`violation_fields`). Each record holds
the flag (``violation``: 0 or 1; ``None`` on an unconstrained benchmark) and the values
(``constraints``, JSON); the run's summary holds ``violations`` (the loop's count),
``violation_rate`` (that count over the loop's queries) and ``warmup_violations``
(:func:`violation_summary`). Additional queries (re-evaluations of past inputs) are not
counted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from dynbo.benchmarks.base import Benchmark

__all__ = [
    "CONSTRAINT_MODES",
    "constraint_options",
    "modeled_constraints",
    "violation_fields",
    "violation_summary",
    "warmup_points",
]

#: the policy's modes (``dynbo.acquisition.constraints``)
CONSTRAINT_MODES = ("feasibility", "safe")


def constraint_options(options: Mapping[str, Any], bench: Benchmark) -> dict[str, Any]:
    """The policy options with the benchmark's constraints filled in (module docstring).

    Args:
        options: the run's policy options (left unchanged).
        bench: the run's benchmark.

    Returns:
        A copy of ``options``; with ``constraint_mode`` and no ``constraints``, it gains
        ``constraints`` (the benchmark's names) and, in safe mode without ``safe_points``,
        ``safe_points`` (the benchmark's, ``(k, d)`` nested lists).

    Raises:
        ValueError: a mode that is not one of :data:`CONSTRAINT_MODES`, constraints on a
            benchmark without them, constraint names the benchmark does not have, or safe
            mode on a benchmark that knows no safe point and none given.
    """
    out = dict(options)
    if "constraint_mode" not in out and "constraints" not in out:
        return out
    mode = out.get("constraint_mode", "feasibility")
    if mode not in CONSTRAINT_MODES:
        raise ValueError(f"constraint_mode must be one of {CONSTRAINT_MODES}, got {mode!r}")
    if not bench.constraint_names:
        raise ValueError(
            f"benchmark {bench.name!r} has no constraints: drop the policy options "
            "constraint_mode and constraints, or choose a constrained benchmark"
        )
    names = out.setdefault("constraints", list(bench.constraint_names))
    if isinstance(names, str) or not isinstance(names, Sequence):
        raise ValueError(f"constraints must be a list of names, got {names!r}")
    unknown = [n for n in names if n not in bench.constraint_names]
    if unknown:
        raise ValueError(
            f"benchmark {bench.name!r} has no constraint(s) {unknown}; its constraints: "
            f"{list(bench.constraint_names)}"
        )
    if mode == "safe" and "safe_points" not in out:
        seeds = bench.safe_points()
        if len(seeds) == 0:
            raise ValueError(
                f"benchmark {bench.name!r} knows no safe point: safe mode needs the policy "
                "option safe_points"
            )
        out["safe_points"] = np.asarray(seeds, dtype=float).tolist()
    return out


def modeled_constraints(options: Mapping[str, Any]) -> tuple[str, ...]:
    """The constraint names a policy made with ``options`` (filled by
    :func:`constraint_options`) is told, in order."""
    return tuple(str(name) for name in options.get("constraints") or ())


def warmup_points(options: Mapping[str, Any], count: int) -> np.ndarray | None:
    """``(count, d)`` warm-up points of a safe-mode policy: its ``safe_points`` cycled in
    order; ``None`` in any other mode (the warm-up then draws uniform points)."""
    if options.get("constraint_mode") != "safe" or count == 0:
        return None
    seeds = np.asarray(options["safe_points"], dtype=float)
    return seeds[np.arange(count) % len(seeds)]


def violation_fields(bench: Benchmark, x: np.ndarray, t: float) -> dict[str, Any]:
    """A record's ``violation`` flag and ``constraints`` values at ``(x (d,), t)``.

    Returns:
        ``{"violation": 1 if some noise-free c_j(x, t) < 0 else 0, "constraints": JSON of
        name -> value}``; ``{"violation": None, "constraints": None}`` without constraints.
    """
    if not bench.constraint_names:
        return {"violation": None, "constraints": None}
    values = {k: float(v) for k, v in bench.constraints(np.asarray(x, dtype=float), t).items()}
    return {
        "violation": int(any(v < 0.0 for v in values.values())),
        "constraints": json.dumps(values, sort_keys=True, separators=(",", ":")),
    }


def violation_summary(
    loop: Sequence[Mapping[str, Any]], warm: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """The run's violation counts from its loop and warm-up records (``{}`` when the
    records carry no flag: an unconstrained benchmark, or a store written before them).

    Returns:
        ``violations`` (loop queries that violated), ``violation_rate`` (over the loop's
        queries; ``None`` without one) and ``warmup_violations``.
    """
    flags = [r.get("violation") for r in loop]
    warm_flags = [r.get("violation") for r in warm]
    if all(f is None for f in flags + warm_flags):
        return {}
    count = int(sum(f or 0 for f in flags))
    return {
        "violations": count,
        "violation_rate": count / len(flags) if flags else None,
        "warmup_violations": int(sum(f or 0 for f in warm_flags)),
    }
