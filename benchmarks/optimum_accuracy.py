"""How accurate and how fast ``Benchmark.optimum(t)`` is (prints JSON).

For every registered benchmark (default options) and ~20 times spread over ``[0, T]``,
``optimum(t)`` is compared with a much denser, independent search:

* ``d = 1``: a uniform grid of 2^20 + 1 points refined by golden section around its 64
  best grid-local maxima;
* ``d >= 2``: 2^18 scrambled Sobol points (another seed than the benchmarks' own sample),
  then a separate L-BFGS-B run (tight tolerances, analytic gradient) from each of the 64
  best distinct points, plus the benchmark's own ``x*`` polished the same way (so a
  reference can only be better);
  benchmarks without an analytic gradient (temperature, WLAN, cart-pole) are polished
  from the 16 best starts with finite-difference L-BFGS-B instead;
* finite candidate sets (the Markov-chain GPs, the temperature sensors): the exact
  maximum over the set.

``deficit = max(f_ref - f*, 0) / range``, ``range`` being the spread of ``f`` over 1e5
uniform samples of ``S x [0, T]`` and the optima: a positive deficit would be a negative
regret of ``-deficit * range``. Times (mean, median, max over the ~20 times): ``cold``, one
call with an empty cache (nothing to warm-start from) after the one-off set-up costs,
and ``sequential``, calls at increasing new times (as in a run, warm-started from the
previous maximizers; the first call, which pays the set-up, is left out).

    python benchmarks/optimum_accuracy.py [--times 20] [--names hartmann6 shekel]
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import numpy as np
import scipy.optimize
from scipy.stats import qmc

import dynbo.benchmarks as benchmarks
from dynbo.benchmarks.search import maximize_interval
from dynbo.benchmarks.synthetic import TimeAsInputBenchmark


def reference_maximum(bench, t: float, own_x: np.ndarray) -> float:
    """The maximum of ``f(., t)`` by a search much denser than ``optimum``'s."""
    if bench.candidates is not None:
        return float(np.max(bench.f(bench.candidates, np.full(len(bench.candidates), t))))
    lower, upper = bench.bounds
    if bench.dim == 1:
        _, value = maximize_interval(
            lambda u: bench.f(u[:, None], t), lower[0], upper[0], grid_points=2**20 + 1, refine=64
        )
        return max(value, float(bench.f(own_x, t)))
    unit = qmc.Sobol(bench.dim, scramble=True, seed=12345).random_base2(18)
    raw = lower + unit * (upper - lower)
    raw_values = bench.f(raw, t)
    order = np.argsort(-raw_values)
    starts: list[np.ndarray] = [own_x]
    for index in order:
        if all(np.max(np.abs(raw[index] - other) / (upper - lower)) > 0.01 for other in starts):
            starts.append(raw[index])
        if len(starts) == 65:
            break
    best = float(np.max(raw_values))
    if isinstance(bench, TimeAsInputBenchmark):
        s = float(bench.time_coordinate(t))

        def objective(x: np.ndarray) -> tuple[float, np.ndarray]:
            value, gradient = bench.g_and_gradient(np.append(x, s)[None, :])
            return float(value[0]), gradient[0, : bench.dim]

        for start in starts:
            result = scipy.optimize.minimize(
                objective,
                start,
                jac=True,
                method="L-BFGS-B",
                bounds=list(zip(lower, upper)),
                options={"maxiter": 2000, "ftol": 0.0, "gtol": 1e-14},
            )
            point = np.clip(result.x, lower, upper)
            best = max(best, float(bench.f(point, t)))
    else:
        # no analytic gradient: finite differences in the unit cube, from the 16 best
        # starts (the objectives without one, WLAN and cart-pole, are costlier to call)
        width = upper - lower

        def negative(u: np.ndarray) -> float:
            return -float(bench.f(lower + u * width, t))

        for start in starts[:16]:
            result = scipy.optimize.minimize(
                negative,
                (start - lower) / width,
                method="L-BFGS-B",
                bounds=[(0.0, 1.0)] * bench.dim,
                options={"maxiter": 500, "ftol": 1e-15, "eps": 1e-7},
            )
            best = max(best, -float(result.fun))
    return best


def value_range(bench) -> float:
    rng = np.random.default_rng(0)
    if bench.candidates is not None:
        x = bench.candidates[rng.integers(0, len(bench.candidates), 100_000)]
    else:
        x = rng.uniform(bench.bounds[0], bench.bounds[1], size=(100_000, bench.dim))
    t = rng.uniform(0.0, bench.horizon, size=100_000)
    values = bench.f(x, t)
    return float(np.max(values) - np.min(values))


def timings(name: str, times: int) -> dict:
    """Seconds per ``optimum(t)`` call: cold (empty cache) and sequential (as in a run)."""
    bench = benchmarks.get(name)
    stamps = np.linspace(0.0, bench.horizon, times)
    sequential = []
    for t in stamps:
        start = time.perf_counter()
        bench.optimum(float(t))
        sequential.append(time.perf_counter() - start)
    cold = []
    for t in stamps:
        fresh = benchmarks.get(name)
        fresh.optimum(0.5 * float(t))  # pays one-off set-up costs (caches, factorizations)
        if hasattr(fresh, "clear_cache"):
            fresh.clear_cache()
        start = time.perf_counter()
        fresh.optimum(float(t))
        cold.append(time.perf_counter() - start)
    return {
        "cold_ms": 1e3 * float(np.mean(cold)),
        "cold_median_ms": 1e3 * float(np.median(cold)),
        "cold_max_ms": 1e3 * float(np.max(cold)),
        "sequential_ms": 1e3 * float(np.mean(sequential[1:])),
        "sequential_median_ms": 1e3 * float(np.median(sequential[1:])),
    }


def accuracy(name: str, times: int) -> dict:
    """Worst deficit of ``optimum(t)`` against the dense reference, relative to the range."""
    bench = benchmarks.get(name)
    stamps = np.linspace(0.0, bench.horizon, times)
    if bench.time_unit == "step":
        stamps = np.floor(stamps)
    optima = [bench.optimum(float(t)) for t in stamps]
    span = max(value_range(bench), max(v for _, v in optima) - min(v for _, v in optima))
    deficits = [
        max(reference_maximum(bench, float(t), x) - value, 0.0) / span
        for t, (x, value) in zip(stamps, optima)
    ]
    return {"d": bench.dim, "times": len(stamps), "range": span, "worst_deficit": max(deficits)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--times", type=int, default=20)
    parser.add_argument("--names", nargs="*", default=None)
    args = parser.parse_args()
    report = {
        "machine": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "benchmarks": {},
    }
    names = args.names or benchmarks.names()
    # All timings first: the dense reference searches allocate large arrays that would
    # disturb the timing of the calls that follow them.
    measured = {name: timings(name, args.times) for name in names}
    for name in names:
        report["benchmarks"][name] = {**accuracy(name, args.times), **measured[name]}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
