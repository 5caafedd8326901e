"""Time-varying benchmarks: every one a maximization problem ``f(x, t)`` with an exact
moving optimum (see :class:`Benchmark`), plus the suites of the papers' experiments::

    import dynbo.benchmarks as benchmarks

    bench = benchmarks.get("hartmann3")          # Hartmann(3): d = 2 plus time
    y = bench.observe(x, t, rng)                 # noisy f(x, t)
    x_star, f_star = bench.optimum(t)            # for the regret
    benchmarks.names(), benchmarks.suites(), benchmarks.suite("bolt")

Families: synthetic test functions with time as their last input
(:mod:`~dynbo.benchmarks.synthetic`), GP Markov-chain functions
(:mod:`~dynbo.benchmarks.markov`) and W-SparQ's drifting RKHS function
(:mod:`~dynbo.benchmarks.rkhs`). ``docs/benchmarks.md`` gives every definition and choice.
"""

from dynbo.benchmarks.base import Benchmark, BenchmarkInfo
from dynbo.benchmarks.markov import MarkovChainGP
from dynbo.benchmarks.registry import (
    CLOCKS,
    Suite,
    SuiteEntry,
    get,
    names,
    options,
    suite,
    suites,
)
from dynbo.benchmarks.rkhs import DriftingRKHS
from dynbo.benchmarks.synthetic import (
    Ackley,
    Eggholder,
    Griewank,
    Hartmann3,
    Hartmann6,
    PiecewiseSixHumpCamel,
    Powell,
    Rastrigin,
    Rosenbrock,
    Schwefel,
    Shekel,
    SixHumpCamel,
    StyblinskiTang,
    TimeAsInputBenchmark,
)

__all__ = [
    "CLOCKS",
    "Ackley",
    "Benchmark",
    "BenchmarkInfo",
    "DriftingRKHS",
    "Eggholder",
    "Griewank",
    "Hartmann3",
    "Hartmann6",
    "MarkovChainGP",
    "PiecewiseSixHumpCamel",
    "Powell",
    "Rastrigin",
    "Rosenbrock",
    "Schwefel",
    "Shekel",
    "SixHumpCamel",
    "StyblinskiTang",
    "Suite",
    "SuiteEntry",
    "TimeAsInputBenchmark",
    "get",
    "names",
    "options",
    "suite",
    "suites",
]
