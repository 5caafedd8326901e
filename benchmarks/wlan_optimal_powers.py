"""How the WLAN benchmark's optimal powers move, how fast and how exact its optimum is.

For the BOLT size (6 access points, 27 users) and the W-DBO size (4, 18), seed 0, the
optimal powers are computed at ``--times`` equally spaced times of ``[0, 600]`` s in
increasing order (as in a run: each search warm-started from the previous maximizers),
and the script

* draws ``docs/figures/wlan_optimal_powers.png`` for the BOLT size: the optimal power of
  each AP (dBm) against time, and the optimal rate next to the rate of the powers optimal
  at ``t = 0`` kept fixed and of every AP at full power;
* prints JSON: per-call times of ``optimum`` (warm, as in a run, and cold, on a fresh
  instance), ``f`` throughput, how much the optimal powers change, and, unless
  ``--accuracy-times 0``, the deficit of ``optimum(t)`` against a much denser search
  (2^16 Sobol points plus a 5-level grid, 128 separate tight L-BFGS-B runs each followed
  by a derivative-free Powell polish, plus ``optimum``'s own maximizer polished the same
  way).

    python benchmarks/wlan_optimal_powers.py [--times 121] [--accuracy-times 10]
        [--figure docs/figures/wlan_optimal_powers.png]
"""

from __future__ import annotations

import argparse
import itertools
import json
import platform
import time

import numpy as np
import scipy.optimize
from scipy.stats import qmc

from dynbo.benchmarks.wlan import WLAN

SIZES = {"bolt": WLAN.BOLT_SIZE, "wdbo": WLAN.WDBO_SIZE}
ON_DBM = 13.0  # half-way between the bounds (1 and 25 dBm): "on" above, "off" below


def to_dbm(x: np.ndarray) -> np.ndarray:
    return 10.0 * np.log10(x)


def sequential_optima(bench: WLAN, times: np.ndarray) -> tuple[np.ndarray, np.ndarray, list]:
    """``(x* (n, A) mW, f* (n,), seconds per call)`` at increasing times."""
    xs, fs, seconds = [], [], []
    for t in times:
        start = time.perf_counter()
        x, value = bench.optimum(float(t))
        seconds.append(time.perf_counter() - start)
        xs.append(x)
        fs.append(value)
    return np.array(xs), np.array(fs), seconds


def cold_seconds(size: tuple[int, int], seed: int, times: np.ndarray) -> list[float]:
    """Seconds of one ``optimum`` call on a fresh instance (nothing cached), per time."""
    out = []
    for t in times:
        bench = WLAN(access_points=size[0], users=size[1], seed=seed)
        start = time.perf_counter()
        bench.optimum(float(t))
        out.append(time.perf_counter() - start)
    return out


def throughput(bench: WLAN, points: int = 16_384) -> dict:
    """Points per second of ``f`` at one time and at one time per point."""
    rng = np.random.default_rng(1)
    x = rng.uniform(bench.bounds[0], bench.bounds[1], (points, bench.dim))
    t = rng.uniform(0.0, bench.horizon, points)
    out = {}
    for label, when in (("scalar_t", 123.4), ("vector_t", t)):
        bench.f(x, when)
        start = time.perf_counter()
        for _ in range(5):
            bench.f(x, when)
        out[f"f_points_per_s_{label}"] = 5 * points / (time.perf_counter() - start)
    return out


def movement(bench: WLAN, times: np.ndarray, xs: np.ndarray, fs: np.ndarray) -> dict:
    """How much the optimal powers change over time, and what ignoring it costs."""
    y = to_dbm(xs)
    lower, upper = bench.power_bounds_dbm
    at_lower = np.isclose(y, lower, atol=0.01)
    at_upper = np.isclose(y, upper, atol=0.01)
    on = y > ON_DBM
    step = float(times[1] - times[0])
    lag = max(1, round(30.0 / step))
    frozen = bench.f(np.tile(xs[0], (len(times), 1)), times)
    stale = bench.f(xs[:-lag], times[lag:])
    full = bench.f(np.tile(bench.bounds[1], (len(times), 1)), times)
    return {
        "range_dbm_per_ap": np.ptp(y, axis=0).round(2).tolist(),
        "std_dbm_per_ap": y.std(axis=0).round(2).tolist(),
        "mean_abs_step_dbm": float(np.mean(np.abs(np.diff(y, axis=0)))),
        "max_change_dbm_t0_vs_T": float(np.max(np.abs(y[-1] - y[0]))),
        "fraction_at_lower_bound": float(np.mean(at_lower)),
        "fraction_at_upper_bound": float(np.mean(at_upper)),
        "fraction_interior": float(np.mean(~at_lower & ~at_upper)),
        "on_set_changes": int(np.sum(np.any(on[1:] != on[:-1], axis=1))),
        "distinct_on_sets": len({tuple(row) for row in on}),
        "f_star_mean": float(np.mean(fs)),
        "f_star_range": [float(np.min(fs)), float(np.max(fs))],
        "loss_powers_of_t0_mean": float(np.mean(fs - frozen)),
        "loss_powers_of_t0_max": float(np.max(fs - frozen)),
        "loss_powers_30s_old_mean": float(np.mean(fs[lag:] - stale)),
        "loss_all_full_power_mean": float(np.mean(fs - full)),
        "signal_variance": bench.signal_variance(samples=100_000, seed=0),
    }


def reference_maximum(bench: WLAN, t: float, own_x: np.ndarray) -> float:
    """The maximum of ``f(., t)`` by a search far denser than ``optimum``'s (in dBm)."""
    values, value_and_gradient = bench._slice_dbm(bench.gains(bench.positions(t)))
    lower, upper = bench.power_bounds_dbm
    dim = bench.dim
    unit = qmc.Sobol(dim, scramble=True, seed=12345).random_base2(16)
    grid = np.array(list(itertools.product(np.linspace(0.0, 1.0, 5), repeat=dim)))
    raw = lower + np.vstack([unit, grid]) * (upper - lower)
    raw_values = values(raw)
    starts = [to_dbm(own_x)]
    for index in np.argsort(-raw_values):
        if all(np.max(np.abs(raw[index] - other)) > 0.5 for other in starts):
            starts.append(raw[index])
        if len(starts) == 129:
            break
    bounds = list(zip(lower, upper))

    def negative(y: np.ndarray) -> tuple[float, np.ndarray]:
        value, gradient = value_and_gradient(y[None, :])
        return -float(value[0]), -gradient[0]

    def negative_value(y: np.ndarray) -> float:
        return -float(values(np.clip(y, lower, upper)[None, :])[0])

    best = float(np.max(raw_values))
    for start in starts:
        result = scipy.optimize.minimize(
            negative,
            start,
            jac=True,
            method="L-BFGS-B",
            bounds=bounds,
            options={"maxiter": 3000, "ftol": 0.0, "gtol": 1e-14},
        )
        # Powell needs no gradient, so it can also step along a kink L-BFGS-B stopped on.
        refined = scipy.optimize.minimize(
            negative_value,
            np.clip(result.x, lower, upper),
            method="Powell",
            bounds=bounds,
            options={"xtol": 1e-10, "ftol": 1e-15, "maxfev": 20_000},
        )
        best = max(best, -negative_value(result.x), -refined.fun)
    return best


def accuracy(bench: WLAN, times: np.ndarray) -> dict:
    """Relative deficit ``(f_ref - f*) / f_ref`` of the cached optima at ``times``."""
    relative, absolute = [], []
    for t in times:
        x, value = bench.optimum(float(t))
        reference = reference_maximum(bench, float(t), x)
        absolute.append(max(reference - value, 0.0))
        relative.append(absolute[-1] / reference)
    return {
        "times": len(times),
        "worst_relative_deficit": float(np.max(relative)),
        "worst_absolute_deficit_mbps": float(np.max(absolute)),
    }


def draw(path: str, times: np.ndarray, run: dict, size: tuple[int, int]) -> None:
    """One thin panel per AP (its optimal power, dBm) above the optimal summed rate."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    y = to_dbm(run["x"])
    access_points = y.shape[1]
    fig, axes = plt.subplots(
        access_points + 1,
        1,
        figsize=(9.0, 1.15 * access_points + 3.2),
        sharex=True,
        gridspec_kw={"height_ratios": [1.0] * access_points + [2.6]},
    )
    colors = plt.get_cmap("tab10").colors
    for ap in range(access_points):
        ax = axes[ap]
        ax.plot(times, y[:, ap], color=colors[ap], lw=1.4)
        ax.fill_between(times, 1.0, y[:, ap], color=colors[ap], alpha=0.15, lw=0)
        ax.set_ylim(0.0, 26.0)
        ax.set_yticks([1, 13, 25])
        ax.set_ylabel(f"AP {ap + 1}", rotation=0, ha="right", va="center")
        ax.grid(alpha=0.3)
    axes[0].set_title(
        f"Optimal transmit power of each access point (dBm), {size[0]} APs, {size[1]} users, seed 0"
    )
    ax = axes[-1]
    ax.plot(times, run["f"], color="k", lw=1.6, label="optimum f*(t)")
    ax.plot(times, run["frozen"], color="tab:red", lw=1.2, label="powers optimal at t = 0, kept")
    ax.plot(times, run["full"], color="tab:gray", lw=1.2, label="every AP at 25 dBm")
    ax.set_title("Summed rate")
    ax.set_ylabel("f (Mbit/s)")
    ax.set_xlabel("t (s)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--times", type=int, default=121)
    parser.add_argument("--accuracy-times", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--figure", default="docs/figures/wlan_optimal_powers.png")
    args = parser.parse_args()
    report: dict = {"python": platform.python_version(), "machine": platform.machine()}
    runs = {}
    for suite, size in SIZES.items():
        bench = WLAN(access_points=size[0], users=size[1], seed=args.seed)
        times = np.linspace(0.0, bench.horizon, args.times)
        xs, fs, seconds = sequential_optima(bench, times)
        runs[suite] = {
            "times": times,
            "x": xs,
            "f": fs,
            "frozen": bench.f(np.tile(xs[0], (len(times), 1)), times),
            "full": bench.f(np.tile(bench.bounds[1], (len(times), 1)), times),
        }
        # Denser sequence (one call per 0.5 s, like a run under the measured clock).
        dense = np.arange(0.25, bench.horizon, 0.5)
        dense_bench = WLAN(access_points=size[0], users=size[1], seed=args.seed)
        dense_bench.optimum(0.0)
        _, _, dense_seconds = sequential_optima(dense_bench, dense)
        cold = cold_seconds(size, args.seed, np.linspace(0.0, bench.horizon, 10))
        entry = {
            "access_points": size[0],
            "users": size[1],
            "optimum_warm_s_mean_every_5s": float(np.mean(seconds[1:])),
            "optimum_warm_s_mean_every_0.5s": float(np.mean(dense_seconds)),
            "optimum_warm_s_max_every_0.5s": float(np.max(dense_seconds)),
            "optimum_cold_s_mean": float(np.mean(cold)),
            "optimum_cold_s_max": float(np.max(cold)),
            **throughput(bench),
            "movement": movement(bench, times, xs, fs),
        }
        if args.accuracy_times > 0:
            check = np.linspace(0.0, bench.horizon, args.accuracy_times)
            entry["accuracy_warm"] = accuracy(dense_bench, check)
            fresh = WLAN(access_points=size[0], users=size[1], seed=args.seed)
            entry["accuracy_cold"] = accuracy(fresh, check)
        report[suite] = entry
    draw(args.figure, runs["bolt"]["times"], runs["bolt"], SIZES["bolt"])
    report["figure"] = args.figure
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
