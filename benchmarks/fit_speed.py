"""The per-iteration hyperparameter fit: ``fit_strategy="warm-newton"`` against ``"two-start"``
from the same saved policy states (JSON).

States: W-DBO and GP-UCB run a few benchmarks of the ``bolt`` suite (Table 2's dimensions,
noise variances and costs) under the modeled clock (``R(n) = 0.05 + 2e-7 n^3`` s, the
campaigns' default) with a short horizon and an iteration cap (``RUNS``; a cheaper
acquisition search, 128 raw samples and 3 restarts, which does not touch the fit), with the
default fit strategy. Every few iterations the policy's state is copied, the answer of its
query observed, and the result saved: the state a ``suggest`` starts from, with the restart
rule's history as that run left it.

From each state the fit of the next ``suggest`` runs twice, once per strategy (the
``two-start`` state is the same one with its configuration's ``fit_strategy`` changed),
timed one after the other. The relative difference of the fitted objectives (negative
log posterior) is ``(new - old) / max(1, |old|)``: negative where the new fit is better;
"worse" means above ``1e-6``. Evaluations are counted (deterministic); seconds are wall
time on this machine, under whatever load it had (recorded).

``fresh_start_methods`` says why a restart uses L-BFGS-B: from every state, the fresh
values alone are fitted once by L-BFGS-B and once by Newton, and the two optima compared.

``suggestion_agreement``: from every state, one whole ``suggest`` per strategy (the fit,
W-DBO's removals and the runs' acquisition search, from the same random state), and the
distance of the two chosen points in the unit box (largest coordinate difference): how
often the new fit changes what the policy asks for.

``--every-fit-size N`` replaces the restart rule's ``every_fit_size`` (up to how many
observations the fresh start runs at every fit) for the runs and the fits: what another
setting would have given.

    python benchmarks/fit_speed.py [--threads 1] [--seed 0] [--every K] [--every-fit-size N]
        [--output docs/results/fit_speed.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time
import warnings

# importing it pins the thread pools (from --threads) before NumPy and torch load
from wdbo_iteration import machine_record  # isort: skip

import numpy as np  # noqa: E402
import torch  # noqa: E402

from dynbo.benchmarks import suite  # noqa: E402
from dynbo.harness import Protocol, RunSpec, execute  # noqa: E402
from dynbo.harness.campaign import DEFAULT_RESPONSE_TIME  # noqa: E402
from dynbo.models import fit as fit_module  # noqa: E402
from dynbo.policies import Policy, fit_strategy  # noqa: E402
from dynbo.policies.fit_strategy import DISTINCT_LOG_CHANGE, RUNNER_UP_MARGIN  # noqa: E402
from dynbo.policies.records import Diagnostics  # noqa: E402

#: (policy, bolt-suite entry, horizon s, iteration cap, save every k-th iteration): short
#: horizons (the benchmark's drift compressed into them) for the small datasets where the
#: fits have several basins, one long GP-UCB run for datasets up to n = 200
RUNS = (
    ("wdbo", "shekel", 60.0, 60, 4),
    ("wdbo", "hartmann3", 60.0, 60, 4),
    ("wdbo", "ackley", 60.0, 60, 4),
    ("wdbo", "griewank", 60.0, 60, 4),
    ("wdbo", "eggholder", 60.0, 60, 4),
    ("gp-ucb", "shekel", 60.0, 60, 4),
    ("gp-ucb", "hartmann6", 60.0, 60, 4),
    ("gp-ucb", "schwefel", 60.0, 60, 4),
    ("gp-ucb", "powell", 60.0, 60, 4),
    ("gp-ucb", "hartmann3", 600.0, 185, 12),
)
#: the acquisition search of the runs that make the states (the fit does not read it)
SEARCH = {"raw_samples": 128, "restarts": 3}
WORSE = 1e-6
QUANTILES = (0.0, 0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99, 1.0)
SIZE_BINS = ((1, 25), (25, 50), (50, 100), (100, 250))


def saved_states(seed: int, every: int | None = None) -> list[dict]:
    """Run :data:`RUNS` and keep, every few iterations, the state the next suggest starts from.

    ``every``: keep every ``every``-th iteration's state in each run (``None``: each run's
    own in :data:`RUNS`).

    Returns:
        ``{"policy", "benchmark", "k", "t", "state"}`` per state (``t``: when the next
        suggest runs: the answer's time plus the evaluation cost).
    """
    entries = {entry.label: entry for entry in suite("bolt").entries}
    states: list[dict] = []
    for policy, label, horizon, iterations, own_every in RUNS:
        kept_every = own_every if every is None else every
        entry = entries[label]
        options = {**entry.options, "horizon": horizon}
        spec = RunSpec(
            benchmark=entry.benchmark,
            policy=policy,
            seed=seed,
            protocol=Protocol(
                clock="modeled",
                response_time=DEFAULT_RESPONSE_TIME,
                horizon=horizon,
                max_iterations=iterations,
            ),
            benchmark_options=options,
            policy_options=SEARCH,
        )
        cost = float(options["cost"])

        def keep(live, row, policy=policy, label=label, every=kept_every, cost=cost):
            if row["k"] % every:
                return
            # a copy: an observer must not change the run's policy
            copy = Policy.from_state_dict(live.state_dict())
            copy.observe(np.array(json.loads(row["x"])), row["t"], row["y"])
            states.append(
                {
                    "policy": policy,
                    "benchmark": label,
                    "k": row["k"],
                    "t": row["t"] + cost,
                    "state": copy.state_dict(),
                }
            )

        result = execute(spec, observer=keep)
        if result.status != "done":
            raise RuntimeError(f"{policy} on {label} failed: {result.error}")
    return states


def fit_from(state: dict, strategy: str, t: float) -> tuple[object, float]:
    """The fit a ``suggest(t)`` from ``state`` runs under ``strategy``, and its seconds."""
    changed = dict(state, config={**state["config"], "fit_strategy": strategy})
    policy = Policy.from_state_dict(changed)
    policy._prepare(t, Diagnostics(iteration=policy.iteration + 1, time=t))
    start = time.perf_counter()
    result = policy._fit(t)
    return result, time.perf_counter() - start


def suggestion_from(state: dict, strategy: str, t: float) -> np.ndarray:
    """The point a whole ``suggest(t)`` from ``state`` chooses under ``strategy`` (unit box)."""
    changed = dict(state, config={**state["config"], "fit_strategy": strategy})
    policy = Policy.from_state_dict(changed)
    lower, upper = policy.bounds
    return (np.asarray(policy.suggest(t).x, dtype=float) - lower) / (upper - lower)


def summary(values: list[float]) -> dict[str, float]:
    return {
        "median": statistics.median(values),
        "mean": statistics.fmean(values),
        "max": max(values),
    }


def fresh_start_optima(state: dict) -> dict[str, float]:
    """The objective L-BFGS-B and Newton reach from the fresh values alone (``state``'s data)."""
    out = {}
    for method in fit_module.FIT_METHODS:
        policy = Policy.from_state_dict(state)
        fresh = policy._initial_hyperparameters(policy._t)
        policy._gp.set_hyperparameters(fresh)
        result = fit_module.fit_hyperparameters(
            policy._gp,
            bounds=policy.fit_bounds(),
            max_iterations=policy.fit_iterations,
            priors=policy.priors(),
            method=method,
        )
        out[method] = result.negative_log_likelihood
    return out


def compare(states: list[dict]) -> list[dict]:
    """Both fits from every state, alternating which runs first (load drifts alike)."""
    rows = []
    for i, saved in enumerate(states):
        order = ("two-start", "warm-newton") if i % 2 == 0 else ("warm-newton", "two-start")
        fits = {strategy: fit_from(saved["state"], strategy, saved["t"]) for strategy in order}
        (old, old_seconds), (new, new_seconds) = fits["two-start"], fits["warm-newton"]
        reference = old.negative_log_likelihood
        relative = (new.negative_log_likelihood - reference) / max(1.0, abs(reference))
        fresh = fresh_start_optima(saved["state"])
        points = {s: suggestion_from(saved["state"], s, saved["t"]) for s in order}
        distance = float(np.abs(points["warm-newton"] - points["two-start"]).max())
        rows.append(
            {
                "policy": saved["policy"],
                "benchmark": saved["benchmark"],
                "k": saved["k"],
                "n": int(saved["state"]["data"]["y"].shape[0]),
                "relative_difference": relative,
                "two_start": {
                    "objective": reference,
                    "evaluations": old.evaluations,
                    "seconds": old_seconds,
                    "hyperparameters": old.hyperparameters.as_dict(),
                },
                "warm_newton": {
                    "objective": new.negative_log_likelihood,
                    "evaluations": new.evaluations,
                    "hessian_evaluations": new.hessian_evaluations,
                    "starts": new.starts,
                    "restart_reason": new.restart_reason,
                    "seconds": new_seconds,
                    "hyperparameters": new.hyperparameters.as_dict(),
                },
                "fresh_start_only": fresh,
                "suggestion_distance": distance,
            }
        )
    return rows


def fresh_start_methods(rows: list[dict]) -> dict:
    """How often L-BFGS-B and Newton from the same fresh values end in different optima."""
    differences = [
        (r["fresh_start_only"]["newton"] - r["fresh_start_only"]["l-bfgs-b"])
        / max(1.0, abs(r["fresh_start_only"]["l-bfgs-b"]))
        for r in rows
    ]
    return {
        "definition": "(newton - l-bfgs-b) / max(1, |l-bfgs-b|) from the fresh values alone",
        "states": len(rows),
        "different_optima": sum(abs(d) > WORSE for d in differences),
        "newton_lower": sum(d < -WORSE for d in differences),
        "l_bfgs_b_lower": sum(d > WORSE for d in differences),
        "largest_relative_difference": max(map(abs, differences)),
    }


def reason_kind(reason: str | None) -> str:
    """A restart reason without its numbers (``"10 fits since ..."`` -> ``"period"``)."""
    if reason is None:
        return "none"
    for key, kind in (
        ("fits since", "period"),
        ("dataset size", "size change"),
        ("did not converge", "not converged"),
        ("reached a bound", "bound reached"),
        ("log-hyperparameter", "large move"),
        ("search gained", "large gain"),
        ("no fit history", "no history"),
        ("observations", "small dataset"),
    ):
        if key in reason:
            return kind
    return reason


def suggestion_agreement(rows: list[dict]) -> dict:
    """How far apart the points chosen with the two fits are, by whether the fits agree."""
    distances = np.array([r["suggestion_distance"] for r in rows])
    fits_agree = np.array([abs(r["relative_difference"]) <= WORSE for r in rows])

    def counts(mask: np.ndarray) -> dict:
        part = distances[mask]
        return {
            "states": int(mask.sum()),
            "identical": int((part == 0.0).sum()),
            "within_1e-6": int((part <= 1e-6).sum()),
            "within_1e-3": int((part <= 1e-3).sum()),
            "within_0.05": int((part <= 0.05).sum()),
            "largest": float(part.max()) if part.size else None,
        }

    return {
        "definition": "largest coordinate difference, unit box, of the points two whole "
        "suggests choose from the same state (fit, removals, acquisition search)",
        "all": counts(np.ones_like(fits_agree)),
        "fits_within_1e-6": counts(fits_agree),
        "fits_differ": counts(~fits_agree),
        "quantiles": {f"{q:g}": float(np.quantile(distances, q)) for q in QUANTILES},
    }


def report(rows: list[dict], seconds: float, threads: int, load_before, arguments: dict) -> dict:
    relative = np.array([r["relative_difference"] for r in rows])
    old_ev = [r["two_start"]["evaluations"] for r in rows]
    new_ev = [r["warm_newton"]["evaluations"] for r in rows]
    old_s = [r["two_start"]["seconds"] for r in rows]
    new_s = [r["warm_newton"]["seconds"] for r in rows]
    reasons: dict[str, int] = {}
    for r in rows:
        kind = reason_kind(r["warm_newton"]["restart_reason"])
        reasons[kind] = reasons.get(kind, 0) + 1
    by_size = []
    for low, high in SIZE_BINS:
        part = [r for r in rows if low <= r["n"] < high]
        if not part:
            continue
        by_size.append(
            {
                "n": [low, high - 1],
                "states": len(part),
                "two_start_evaluations_median": statistics.median(
                    r["two_start"]["evaluations"] for r in part
                ),
                "warm_newton_evaluations_median": statistics.median(
                    r["warm_newton"]["evaluations"] for r in part
                ),
                "two_start_seconds_median": statistics.median(
                    r["two_start"]["seconds"] for r in part
                ),
                "warm_newton_seconds_median": statistics.median(
                    r["warm_newton"]["seconds"] for r in part
                ),
                "paired_time_ratio_median": statistics.median(
                    r["two_start"]["seconds"] / r["warm_newton"]["seconds"] for r in part
                ),
            }
        )
    worse = [r for r in rows if r["relative_difference"] > WORSE]
    better = [r for r in rows if r["relative_difference"] < -WORSE]
    return {
        "script": "benchmarks/fit_speed.py",
        "arguments": arguments,
        "states": len(rows),
        "dataset_sizes": {
            "smallest": min(r["n"] for r in rows),
            "largest": max(r["n"] for r in rows),
        },
        "runs": [
            {"policy": p, "benchmark": b, "horizon": h, "iterations": i, "every": e}
            for p, b, h, i, e in RUNS
        ],
        "clock": {"kind": "modeled", "response_time": list(DEFAULT_RESPONSE_TIME)},
        "acquisition_search_of_the_runs": SEARCH,
        "restart_rule": {
            **dataclasses.asdict(fit_strategy.RESTART_RULE),
            "distinct_log_change": DISTINCT_LOG_CHANGE,
            "runner_up_margin": RUNNER_UP_MARGIN,
        },
        "newton": {
            "relative_tolerance": fit_module._NEWTON_TOLERANCE,
            "longest_step": fit_module._NEWTON_LONGEST_STEP,
        },
        "relative_difference": {
            "definition": "(warm-newton - two-start) / max(1, |two-start|), fitted objective",
            "quantiles": {f"{q:g}": float(np.quantile(relative, q)) for q in QUANTILES},
            "worse_than_1e-6": len(worse),
            "better_than_-1e-6": len(better),
            "within_1e-6": len(rows) - len(worse) - len(better),
        },
        "evaluations_per_fit": {
            "two_start": summary(old_ev),
            "warm_newton": summary(new_ev),
            "warm_newton_with_hessian": summary(
                [r["warm_newton"]["hessian_evaluations"] for r in rows]
            ),
            "ratio_of_means": statistics.fmean(old_ev) / statistics.fmean(new_ev),
        },
        "seconds_per_fit_under_load": {
            "two_start": summary(old_s),
            "warm_newton": summary(new_s),
            "ratio_of_medians": statistics.median(old_s) / statistics.median(new_s),
            "ratio_of_means": statistics.fmean(old_s) / statistics.fmean(new_s),
            "paired_ratio_median": statistics.median(o / n for o, n in zip(old_s, new_s)),
        },
        "evaluations_per_fit_without_fresh_start": {
            "warm_start_only": summary(
                [r["warm_newton"]["evaluations"] for r in rows if r["warm_newton"]["starts"] == 1]
                or [0]
            ),
            "warm_start_and_runner_up": summary(
                [
                    r["warm_newton"]["evaluations"]
                    for r in rows
                    if r["warm_newton"]["starts"] == 2
                    and r["warm_newton"]["restart_reason"] is None
                ]
                or [0]
            ),
        },
        "fresh_start_runs": sum(r["warm_newton"]["restart_reason"] is not None for r in rows),
        "fresh_start_methods": fresh_start_methods(rows),
        "restart_reasons": reasons,
        "suggestion_agreement": suggestion_agreement(rows),
        "by_dataset_size": by_size,
        "worse_states": [
            {key: r[key] for key in ("policy", "benchmark", "k", "n", "relative_difference")}
            | {
                "two_start": r["two_start"]["hyperparameters"],
                "warm_newton": r["warm_newton"]["hyperparameters"],
                "restart_reason": r["warm_newton"]["restart_reason"],
            }
            for r in worse
        ],
        "better_states": [
            {key: r[key] for key in ("policy", "benchmark", "k", "n", "relative_difference")}
            for r in better
        ],
        "script_seconds": seconds,
        "machine": machine_record(threads, load_before),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--every", type=int, default=None, help="keep every k-th iteration (default: RUNS')"
    )
    parser.add_argument(
        "--every-fit-size",
        type=int,
        default=None,
        help="the restart rule's every_fit_size for the runs and the fits (default: the rule's)",
    )
    parser.add_argument("--output", default="docs/results/fit_speed.json")
    args = parser.parse_args(argv)
    if args.every_fit_size is not None:
        if args.every_fit_size < 0:
            parser.error("--every-fit-size must be >= 0")
        # the rule is read at each fit: the runs that make the states use this one too
        fit_strategy.RESTART_RULE = dataclasses.replace(
            fit_strategy.RESTART_RULE, every_fit_size=args.every_fit_size
        )
    torch.set_num_threads(args.threads)
    load_before = os.getloadavg()
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # jitter warnings of trial points; counted in rows
        states = saved_states(args.seed, args.every)
        rows = compare(states)
    result = report(rows, time.perf_counter() - started, args.threads, load_before, vars(args))
    text = json.dumps(result, indent=2)
    print(text)
    if args.output:
        os.makedirs(os.path.dirname(args.output) or ".", exist_ok=True)
        with open(args.output, "w") as handle:
            handle.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
