"""The papers' headline experiments as shipped campaigns, with their published numbers.

    from dynbo import reproductions
    reproductions.available()   # ['bolt-table3', 'wdbo-table2', 'bogunovic-fig2', ...]
    config, paper = reproductions.load("bolt-table3")
    campaign = reproductions.campaign_for("bolt-table3", seeds=1, horizon=30)
    print(reproductions.estimate(campaign, workers=2).describe())

Each reproduction is a campaign file (``NAME.toml`` beside this module, the format of
``docs/campaigns.md``) holding the paper's protocol: its suite brings the benchmarks,
the policies with the paper's settings, the clock and the horizon; the file adds the
paper's number of seeds. A paper with a table of results also ships it as data
(``NAME.json``: ``benchmark label -> policy -> [mean, standard error or null]`` with the
citation), which the report prints beside the measured numbers
(:mod:`dynbo.report.paper`). ``dynbo reproduce NAME`` runs one (``docs/reproductions.md``).

A cheaper version keeps the protocol but runs fewer seeds (``seeds``: the first
``seeds`` of the paper's). A shorter horizon (``horizon``) is a *time-compressed*
protocol under the real-time clocks (modeled, measured): the run covers ``[0, T']``
with the benchmark's whole time course mapped onto it, and the evaluation cost and the
response time shrink by the same factor ``kappa = T / T'`` (:class:`~dynbo.harness.Protocol`
``compression``), so the queries, dataset sizes and BOLT's ``n*`` stay those of the
paper's protocol; it checks the same algorithms faster on the simulated clock, not
with less computing (the queries are as many). Under the step clock (the within-model
experiments) ``T'`` steps replace the paper's ``T``, and the policies' settings derived
from it, such as R-GP-UCB's block length.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

from dynbo.harness.campaign import Campaign, build_campaign, with_horizon
from dynbo.harness.labels import REFERENCE_PLAYERS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = [
    "Estimate",
    "UNAVAILABLE",
    "available",
    "campaign_for",
    "comparison",
    "describe",
    "estimate",
    "known",
    "load",
    "paper_table_html",
    "paper_table_markdown",
]

#: name -> what the reproduction runs (one line)
_REPRODUCTIONS: dict[str, str] = {
    "bolt-table3": (
        "Bardou & Thiran (2025), Optimizing Through Change, Table 3; the paper's "
        "protocol: eight synthetic and two real-world benchmarks x seven policies, "
        "measured clock, T = 600 s, 10 seeds"
    ),
    "wdbo-table2": (
        "Bardou, Thiran & Ranieri (2024), This Too Shall Pass, Table 2; the paper's "
        "protocol: ten synthetic and two real-world benchmarks x six policies, measured "
        "clock, T = 600 s, 10 seeds"
    ),
    "bogunovic-fig2": (
        "Bogunovic, Scarlett & Cevher (2016), Time-Varying Gaussian Process Bandit "
        "Optimization, Fig. 2a/2b; the paper's protocol: within-model Markov-chain GP "
        "functions, step clock, T = 200 steps, 200 seeds"
    ),
    "et-gp-ucb-temperature": (
        "Brunzema, von Rohr, Solowjow & Trimpe (2025), Event-Triggered Time-Varying "
        "Bayesian Optimization, Fig. 3b/c (and Bogunovic et al. 2016, Fig. 4); the "
        "paper's protocol on the shipped Intel Lab tables: sensor selection with a known "
        "kernel, step clock, 20 seeds"
    ),
    "et-gp-ucb-cartpole": (
        "Brunzema, von Rohr, Solowjow & Trimpe (2025), Event-Triggered Time-Varying "
        "Bayesian Optimization, Fig. 3d and Table 6; the paper's protocol: cart-pole "
        "policy search (4 LQR gains, friction x2.5 at step 100, and UI-TVBO's smooth "
        "drift) x five policies, step clock, T = 300 steps, 20 seeds"
    ),
    "w-sparq-rkhs": (
        "Mauduit, Berthier & Simonetto (2025), No-Regret Gaussian Process Optimization of "
        "Time-Varying Functions, Sec. 4.1, Fig. 2; the paper's protocol: the drifting "
        "RKHS function x seven policies (SparQ-GP-UCB, W-SparQ-GP-UCB and five "
        "baselines), step clock, T = 500 steps, 30 seeds"
    ),
}

#: reproductions that are known but cannot run in this version, with the reason
UNAVAILABLE: dict[str, str] = {}

#: rough wall-clock cost model of one run (see :func:`run_estimate`): seconds of
#: computing per query under a real-time clock (the policy's fit and acquisition and the
#: harness's regret oracle), calibrated on the `bolt` suite under the modeled clock on
#: this project's 2-core machine (docs/reproductions.md)
QUERY_SECONDS = 0.2
CONTINUOUS_OVERHEAD = 5.0
#: step clock: seconds per step of a GP policy and per run, calibrated on the stored
#: timings of three step-clock reruns on a shared 2-core machine (the GP policies'
#: runs took 0.010, 0.018 and 0.037 s per step: ``docs/results/sensors_rerun.json``,
#: ``bogunovic_fig2.json``, ``rkhs_tuned.json``)
STEP_SECONDS = 0.02
STEP_OVERHEAD = 0.3
#: a reference player's step or query (``random``, ``oracle-lag``: no model to fit; the
#: same reruns: about 0.001 s per step)
REFERENCE_QUERY_SECONDS = 0.001


def available() -> list[str]:
    """The reproductions this version can run."""
    return list(_REPRODUCTIONS)


def known() -> list[str]:
    """Every reproduction name, the unavailable ones (:data:`UNAVAILABLE`) included."""
    return [*_REPRODUCTIONS, *UNAVAILABLE]


def describe(name: str) -> str:
    """One line: the paper and the protocol of a reproduction."""
    _check(name)
    return _REPRODUCTIONS[name]


def _check(name: str) -> None:
    if name in _REPRODUCTIONS:
        return
    if name in UNAVAILABLE:
        raise ValueError(f"reproduction {name!r} is not available: {UNAVAILABLE[name]}")
    later = f" (known but not available yet: {', '.join(UNAVAILABLE)})" if UNAVAILABLE else ""
    raise ValueError(f"unknown reproduction {name!r}; available: {', '.join(available())}{later}")


def _data(filename: str) -> str | None:
    path = resources.files(__name__) / filename
    return path.read_text(encoding="utf-8") if path.is_file() else None


def load(name: str) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The campaign config of a reproduction and the paper's published numbers.

    Returns:
        ``(config, paper)``: the campaign dict (``dynbo.harness.build_campaign`` takes
        it) and the paper's table (``None`` when the paper prints no numbers, e.g. a
        figure): ``citation`` (authors, year, title, table), ``metric``, ``statistic``,
        ``policies`` (the paper's column order), ``paper_labels``, ``table``
        (``label -> policy -> [mean, standard error or None]``, ``OVERALL`` last),
        ``not_run`` (``label -> why``) and ``notes``.

    Raises:
        ValueError: an unknown name, or a known reproduction this version cannot run.
    """
    _check(name)
    text = _data(f"{name}.toml")
    if text is None:  # pragma: no cover - a broken installation
        raise ValueError(f"reproduction {name!r}: its campaign file is missing")
    config = tomllib.loads(text)
    paper_text = _data(f"{name}.json")
    paper = json.loads(paper_text) if paper_text is not None else None
    return config, paper


def campaign_for(name: str, seeds: int | None = None, horizon: float | None = None) -> Campaign:
    """The campaign of a reproduction, optionally cheaper.

    Args:
        name: one of :func:`available`.
        seeds: run seeds ``0 .. seeds - 1`` instead of the paper's.
        horizon: ``T'`` (seconds, or steps for the step clock) instead of the paper's
            ``T``. Real-time clocks: each run's protocol is time-compressed by
            ``T / T'`` (the module docstring); the campaign's name says so. Step clock:
            it replaces the benchmarks' ``horizon`` option and the policy options
            derived from it (R-GP-UCB's ``horizon``). The campaign's recorded config
            says ``[protocol] compression = T / T'`` (real-time clocks, one factor) or
            ``[protocol] horizon = T'``.

    The campaign's name says which overrides it runs with (``bolt-table3 [seeds=1,
    horizon=30]``), so that a store holding several versions tells them apart. A run's
    identity is its configuration: the runs a cheaper version shares with another one
    in the same store (the same seeds at the same horizon) are not run again.

    Raises:
        ValueError: unknown name, or a seed count or horizon that is not positive.
    """
    config, _ = load(name)
    suffix = []
    if seeds is not None:
        if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1:
            raise ValueError(f"seeds must be a positive integer, got {seeds!r}")
        config["seeds"] = seeds
        suffix.append(f"seeds={seeds}")
    if horizon is not None:
        if isinstance(horizon, bool) or not (
            isinstance(horizon, (int, float)) and math.isfinite(horizon) and horizon > 0
        ):
            raise ValueError(f"horizon must be a positive number, got {horizon!r}")
    campaign = build_campaign(config)
    if horizon is None:
        if suffix:
            campaign = dataclasses.replace(campaign, name=f"{campaign.name} [{', '.join(suffix)}]")
        return campaign
    cache: dict[str, tuple[float, float]] = {}
    specs, factors = [], set()
    for spec in campaign.specs:
        if spec.protocol.clock in ("modeled", "measured"):
            full = _run_shape(spec, cache)[0]
            factors.add(full / float(horizon))
            protocol = dataclasses.replace(spec.protocol, compression=full / float(horizon))
            specs.append(dataclasses.replace(spec, protocol=protocol))
        else:
            # The suites put T on each benchmark (it defines the benchmark's time
            # mapping), and a protocol horizon that disagrees with it is an error; so T'
            # replaces it there.
            specs.append(with_horizon(spec, float(horizon)))
    shown = f"horizon={horizon:g}"
    if factors:
        shown += " time-compressed x" + "/".join(f"{k:.3g}" for k in sorted(factors))
    suffix.append(shown)
    recorded = copy.deepcopy(config)
    if len(factors) == 1:
        # the runs' own protocol: the paper's horizon, compressed (rebuilding the campaign
        # from this config gives the same runs)
        recorded.setdefault("protocol", {})["compression"] = factors.pop()
    else:
        recorded.setdefault("protocol", {})["horizon"] = horizon
    return Campaign(
        name=f"{campaign.name} [{', '.join(suffix)}]",
        specs=tuple(specs),
        config=recorded,
        skipped_policies=campaign.skipped_policies,
    )


@dataclass(frozen=True)
class Estimate:
    """How many runs a campaign has and roughly how long they take.

    Attributes:
        runs: the campaign's runs.
        benchmarks, policies, seeds: the distinct benchmark labels, policies and seeds.
        run_seconds: the estimated compute of all runs, one after the other.
        longest_run: the estimated time of the longest run.
        workers: worker processes the wall time is estimated for.
    """

    runs: int
    benchmarks: int
    policies: int
    seeds: int
    run_seconds: float
    longest_run: float
    workers: int = 1

    @property
    def seconds(self) -> float:
        """Estimated wall time on ``workers`` processes (never less than the longest run)."""
        return max(self.run_seconds / self.workers, self.longest_run)

    def describe(self) -> str:
        """Two lines for a terminal: the run count and the time."""
        shape = " x ".join(
            f"{n} {one if n == 1 else many}"
            for n, one, many in (
                (self.benchmarks, "benchmark", "benchmarks"),
                (self.policies, "policy", "policies"),
                (self.seeds, "seed", "seeds"),
            )
        )
        worker_text = f"{self.workers} worker{'s' if self.workers != 1 else ''}"
        return (
            f"{self.runs} runs ({shape})\n"
            f"estimated time: about {_duration(self.seconds)} on {worker_text} "
            "(rough: see docs/reproductions.md)"
        )


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _run_shape(spec: Any, cache: dict[str, tuple[float, float]]) -> tuple[float, float]:
    """``(T, c)`` of a run's full (uncompressed) protocol: horizon and evaluation cost."""
    key = json.dumps([spec.benchmark, spec.benchmark_options], sort_keys=True, default=str)
    if key not in cache:
        from dynbo.benchmarks import get

        bench = get(spec.benchmark, **spec.benchmark_options)
        cache[key] = (float(bench.horizon), float(bench.cost))
    horizon, cost = cache[key]
    if spec.protocol.horizon is not None:
        horizon = float(spec.protocol.horizon)
    elif spec.benchmark_options.get("horizon") is not None:
        horizon = float(spec.benchmark_options["horizon"])
    if spec.protocol.cost is not None:
        cost = float(spec.protocol.cost)
    return horizon, cost


def run_estimate(
    clock: str,
    horizon: float,
    cost: float = 0.0,
    response_time: tuple[float, ...] | list[float] | None = None,
    warmup: int = 0,
    reference: bool = False,
) -> float:
    """The rough wall time in seconds of one run.

    Step clock: ``STEP_SECONDS`` per step plus ``STEP_OVERHEAD`` (the within-model runs
    take 10-40 ms per step on a busy 2-core machine).

    Real-time clocks: the run makes ``N`` queries, each costing ``QUERY_SECONDS`` of
    computing, plus ``CONTINUOUS_OVERHEAD``. Measured and wall clocks: each query advances
    the clock by its computing and the cost ``c``, so ``N = T / (QUERY_SECONDS + c)``.
    Modeled clock: each query advances it by ``R(n) + c`` whatever the computing took;
    ``N`` is the count of a policy that keeps every observation (``n`` grows from
    ``warmup`` by one per query). Policies that remove observations make more queries
    (W-DBO and R-GP-UCB about 2.5-3 times GP-UCB's), ABO far fewer; ``QUERY_SECONDS``
    is calibrated so that the mean over the policies comes out. A time-compressed run
    makes the queries of its full protocol: pass the full ``T``.

    A reference player (``reference=True``: ``random``, ``oracle-lag``) fits no model:
    each of its queries or steps costs ``REFERENCE_QUERY_SECONDS`` instead (and under a
    measured clock it makes correspondingly more queries).
    """
    per_query = REFERENCE_QUERY_SECONDS if reference else None
    if clock == "step":
        return (per_query or STEP_SECONDS) * horizon + STEP_OVERHEAD
    if clock != "modeled" or response_time is None:
        seconds = per_query or QUERY_SECONDS
        queries = horizon / (seconds + cost)
        return queries * seconds + CONTINUOUS_OVERHEAD
    queries, t, n = 0, 0.0, warmup
    while t < horizon and queries < 10**6:  # the cap: a model that barely advances
        t += max(float(sum(a * n**k for k, a in enumerate(response_time))), 0.0) + cost
        n += 1
        queries += 1
    return queries * (per_query or QUERY_SECONDS) + CONTINUOUS_OVERHEAD


def estimate(campaign: Campaign, workers: int = 1) -> Estimate:
    """The number of runs of a campaign and a rough estimate of its time.

    Each run costs :func:`run_estimate` of its clock, horizon, cost and ``R(n)``; the runs share
    ``workers`` processes evenly. The estimate counts every run, stored or not.
    """
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a positive integer, got {workers!r}")
    cache: dict[str, tuple[float, float]] = {}
    costs = [
        run_estimate(
            s.protocol.clock,
            *_run_shape(s, cache),
            response_time=s.protocol.response_time,
            warmup=s.protocol.warmup,
            reference=s.policy in REFERENCE_PLAYERS,
        )
        for s in campaign.specs
    ]
    return Estimate(
        runs=len(campaign.specs),
        benchmarks=len({s.display_benchmark for s in campaign.specs}),
        policies=len({s.policy for s in campaign.specs}),
        seeds=len({s.seed for s in campaign.specs}),
        run_seconds=float(sum(costs)),
        longest_run=max(costs, default=0.0),
        workers=workers,
    )


def paper_table_html(
    paper: Mapping[str, Any], table: Any, note: str | None = None, time_averaged: Any = None
) -> str:
    """The paper's numbers beside the measured ones (see :mod:`dynbo.report.paper`)."""
    from dynbo.report.paper import paper_table_html as render

    return render(paper, table, note=note, time_averaged=time_averaged)


def paper_table_markdown(
    paper: Mapping[str, Any], table: Any, note: str | None = None, time_averaged: Any = None
) -> str:
    """The Markdown version of :func:`paper_table_html`."""
    from dynbo.report.paper import paper_table_markdown as render

    return render(paper, table, note=note, time_averaged=time_averaged)


def comparison(
    name: str, table: Any, note: str | None = None, time_averaged: Any = None
) -> tuple[str, str]:
    """``(html, markdown)`` of the paper-vs-measured comparison of a reproduction.

    For a paper with a table, :func:`paper_table_html` and :func:`paper_table_markdown`;
    for one whose result is a figure (``bogunovic-fig2``), a paragraph saying so: the
    report's regret figure is the comparison. ``time_averaged`` (a table of the same
    runs' time-averaged regret) adds a measured column per policy beside the paper's
    per-query average.
    """
    import html

    _, paper = load(name)
    if paper is not None:
        return paper_table_html(
            paper, table, note=note, time_averaged=time_averaged
        ), paper_table_markdown(paper, table, note=note, time_averaged=time_averaged)
    text = (
        f"{describe(name)}. The paper shows this result as a figure and prints no "
        "numbers: compare the average-regret figure of this report with it."
    )
    if note:
        text += f" {note}"
    return (
        f'<section class="paper-comparison"><h2>The paper</h2><p>{html.escape(text)}</p></section>',
        text + "\n",
    )
