"""One run: a benchmark, a policy, a seed and a protocol, iterated until the horizon.

The loop follows the papers' protocol (``docs/harness.md``):

1. Warm-up: ``warmup`` points drawn uniformly in ``S`` (or among the benchmark's
   candidates), at times drawn uniformly in ``[0, warmup_fraction * T]`` and sorted; the
   policy observes them before the clock starts. They are recorded (flagged) and count
   for regret separately.
2. Iteration ``k`` starts at clock time ``s_k``. The policy observes the previous answer
   and computes ``suggest(s_k)``; the clock charges the response time ``D_k`` for that
   work. The query lands at ``t_k = max(s_k + D_k, query.t)`` (``query.t > s_k`` for a
   look-ahead policy) and is evaluated there; the answer arrives ``c`` seconds later,
   at ``s_{k+1} = t_k + c``. A query that would land after the horizon is not made.
3. Instantaneous regret ``r_k = max_x f(x, t_k) - f(x_k, t_k)`` with the noiseless ``f``.
4. Additional queries (SparQ-GP-UCB's fresh evaluations at past inputs,
   ``Query.additional``) are evaluated after the main answer, one after the other: under
   the step clock all at ``t_k``; under the other clocks the ``j``-th (0-based) at
   ``t_k + c + j c_a`` with ``c_a`` the protocol's ``additional_cost`` (default ``c``),
   so that the next iteration starts at ``t_k + c + m c_a``. Those that would fall after
   the horizon are not made. They count toward no regret; each record holds their
   number (``additional_queries``) and their points, times and values (``extra``).

Randomness: the warm-up design and the observation noise come from two NumPy streams
derived from the run's seed; the policy is seeded with the same seed. With the modeled
or step clock a run therefore replays exactly.

With ``Protocol.devices = q > 1`` the run is an event simulation of one policy and ``q``
devices evaluating at once (:mod:`dynbo.harness.devices`); ``q = 1`` is this loop.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from dynbo.benchmarks.base import Benchmark
from dynbo.harness.clocks import CLOCK_MODES, Clock, ResponseTimeModel
from dynbo.harness.constraints import (
    constraint_options,
    modeled_constraints,
    violation_fields,
    violation_summary,
    warmup_points,
)
from dynbo.validation import finite_number, positive_int, positive_number

__all__ = ["Protocol", "RunSpec", "RunResult", "execute", "run_horizon", "summarize"]

#: the most torch / BLAS threads a run may ask for (torch takes a C int)
MAX_THREADS = 4096

#: bump when the meaning of a run's identity (or of its records) changes.
RUN_FORMAT = 1


def _canonical(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _canonical(value[k]) for k in sorted(value, key=str)}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    if isinstance(value, np.ndarray):
        return _canonical(value.tolist())
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    if isinstance(value, torch.Tensor):
        return _canonical(value.detach().cpu().tolist())
    return value


def to_json(value: Any) -> str:
    """Deterministic JSON (sorted keys, exact float repr)."""
    return json.dumps(_canonical(value), sort_keys=True, separators=(",", ":"))


def check_clock_advances(protocol: Protocol, cost: float) -> None:
    """Refuse a modeled clock that never moves: ``R(n) = 0`` and evaluations cost 0 s.

    Such a run would iterate for ever at one time. ``cost`` is the evaluation cost the run
    uses (the protocol's, else the benchmark's).

    Raises:
        ValueError: saying so.
    """
    if protocol.clock == "modeled" and cost == 0 and not any(protocol.response_time or ()):
        raise ValueError(
            "the modeled clock would never advance: response_time is all zeros and the "
            "evaluation cost is 0 (give one of them a positive value)"
        )


@dataclass(frozen=True)
class Protocol:
    """How a run is timed and started.

    Attributes:
        clock: ``"wall"``, ``"measured"``, ``"modeled"`` or ``"step"``.
        horizon: ``T`` (``None``: the benchmark's own horizon).
        warmup: number of warm-up observations.
        warmup_fraction: warm-up times are uniform in ``[0, warmup_fraction * T]``;
            the loop starts at ``warmup_fraction * T`` (step clock: at step 1).
        response_time: cubic coefficients of ``R(n)`` for the modeled clock.
        threads: torch / BLAS threads of the run (pinned so response times compare).
        cost: override of the benchmark's evaluation cost ``c`` (seconds).
        max_iterations: stop after this many loop iterations even before the horizon
            (``None``, the default: run to the horizon). Smoke checks and demos use it
            to bound a run under the measured and wall clocks, whose iteration count
            otherwise depends on the machine.
        additional_cost: seconds each additional query takes under the real-time clocks
            (``None``, the default: the evaluation cost ``c``).
        compression: a time-compression factor ``kappa`` (``None``, the default: none)
            for cheap checks of a long protocol: the run covers ``[0, T / kappa]``, the
            benchmark's time axis is mapped onto it (its ``horizon`` option is
            ``T / kappa``), and the evaluation cost, the additional cost and the response
            time (the modeled ``R(n)``, or the measured seconds) are all divided by
            ``kappa``. Query times, dataset sizes, BOLT's ``n*`` and the number of
            queries then stay those of the full protocol (exactly, with the modeled
            clock and a power-of-two ``kappa``: the division is exact); only the
            compute it costs shrinks. Policy options given in seconds are not scaled.
            Modeled and measured clocks only; the benchmark must take a ``horizon``.
        devices: ``q``, how many devices evaluate queries at once (default 1, the
            papers' protocol). With ``q > 1`` the run is the event simulation of
            :mod:`dynbo.harness.devices` (one policy, ``q`` devices each evaluating one
            query at a time); wall, measured and modeled clocks only, 1 to 64 devices.
    """

    clock: str = "measured"
    horizon: float | None = None
    warmup: int = 15
    warmup_fraction: float = 1.0 / 40.0
    response_time: tuple[float, float, float, float] | None = None
    threads: int = 1
    cost: float | None = None
    max_iterations: int | None = None
    additional_cost: float | None = None
    compression: float | None = None
    devices: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.clock, str) or self.clock not in CLOCK_MODES:
            raise ValueError(f"unknown clock {self.clock!r}; expected one of {CLOCK_MODES}")
        # checked, not converted: the values enter the run's identity as they were given
        if self.horizon is not None:
            positive_number("horizon", self.horizon)
        if isinstance(self.warmup, bool) or not isinstance(self.warmup, int) or self.warmup < 0:
            raise ValueError(f"warmup must be a non-negative integer, got {self.warmup!r}")
        if not 0.0 <= finite_number("warmup_fraction", self.warmup_fraction) < 1.0:
            raise ValueError(f"warmup_fraction must be in [0, 1), got {self.warmup_fraction!r}")
        if self.response_time is not None:
            try:
                values = tuple(finite_number("response_time", c) for c in self.response_time)
            except TypeError:  # not a sequence
                values = ()
            if len(values) != 4:
                raise ValueError(
                    f"response_time must be 4 cubic coefficients, got {self.response_time!r}"
                )
            object.__setattr__(self, "response_time", ResponseTimeModel(values).coefficients)
        if self.clock == "modeled" and self.response_time is None:
            raise ValueError("the modeled clock needs response_time coefficients")
        if positive_int("threads", self.threads) > MAX_THREADS:
            raise ValueError(f"threads must be at most {MAX_THREADS}, got {self.threads!r}")
        for name in ("cost", "additional_cost"):
            value = getattr(self, name)
            if value is not None and finite_number(name, value) < 0:
                raise ValueError(f"{name} must be a non-negative number, got {value!r}")
        if self.cost is not None:
            check_clock_advances(self, self.cost)
        cap = self.max_iterations
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 1):
            raise ValueError(f"max_iterations must be a positive integer, got {cap!r}")
        if self.compression is not None:
            positive_number("compression", self.compression)
            if self.clock not in ("modeled", "measured"):
                raise ValueError(
                    f"compression needs the modeled or measured clock (the {self.clock} clock "
                    "cannot be compressed), got clock = " + repr(self.clock)
                )
        from dynbo.harness.devices import check_protocol_devices

        check_protocol_devices(self.devices, self.clock)

    @property
    def time_factor(self) -> float:
        """``1 / kappa``: what the compression multiplies every duration by (1 without)."""
        return 1.0 if self.compression is None else 1.0 / float(self.compression)

    def run_horizon(self, benchmark_horizon: float) -> float:
        """The horizon the run covers: ``T / kappa``, ``T`` this protocol's or else the
        benchmark's own (``benchmark_horizon``, uncompressed)."""
        full = self.horizon if self.horizon is not None else benchmark_horizon
        return float(full) * self.time_factor

    def as_dict(self) -> dict[str, Any]:
        values = {
            "clock": self.clock,
            "horizon": self.horizon,
            "warmup": self.warmup,
            "warmup_fraction": self.warmup_fraction,
            "response_time": None if self.response_time is None else list(self.response_time),
            "threads": self.threads,
            "cost": self.cost,
        }
        if self.max_iterations is not None:
            # only when set: the runs stored before the option existed keep their ids
            values["max_iterations"] = self.max_iterations
        if self.additional_cost is not None:
            values["additional_cost"] = self.additional_cost
        if self.compression is not None:
            values["compression"] = self.compression
        if self.devices != 1:
            values["devices"] = self.devices
        return values


@dataclass(frozen=True)
class RunSpec:
    """Everything that determines a run; its hash is the run's identity in the store.

    Attributes:
        benchmark: registry name of the benchmark.
        policy: registry name of the policy.
        seed: the run's seed.
        protocol: clock, horizon, warm-up.
        benchmark_options: keyword options of ``dynbo.benchmarks.get``.
        policy_options: keyword options of the policy (beyond bounds, seed, candidates).
        label: display name of the benchmark (e.g. a suite's label).
    """

    benchmark: str
    policy: str
    seed: int
    protocol: Protocol = field(default_factory=Protocol)
    benchmark_options: Mapping[str, Any] = field(default_factory=dict)
    policy_options: Mapping[str, Any] = field(default_factory=dict)
    label: str | None = None

    def identity(self) -> dict[str, Any]:
        return {
            "format": RUN_FORMAT,
            "benchmark": self.benchmark,
            "benchmark_options": _canonical(self.benchmark_options),
            "policy": self.policy,
            "policy_options": _canonical(self.policy_options),
            "seed": int(self.seed),
            "protocol": self.protocol.as_dict(),
        }

    @property
    def run_id(self) -> str:
        return hashlib.sha256(to_json(self.identity()).encode()).hexdigest()[:20]

    @property
    def display_benchmark(self) -> str:
        return self.label or self.benchmark


@dataclass
class RunResult:
    """A finished (or failed) run: its records and summary."""

    spec: RunSpec
    status: str
    iterations: list[dict[str, Any]]
    timings: list[dict[str, Any]]
    summary: dict[str, Any]
    error: str | None = None
    wall_seconds: float = 0.0


def benchmark_options(spec: RunSpec) -> dict[str, Any]:
    """The options the run's benchmark is built with.

    Besides the spec's own options: a benchmark whose function is itself random (the
    Markov-chain GPs: a new function per trial in the papers) takes the run's seed
    unless the options fix one, and a protocol horizon becomes the benchmark's horizon
    (it defines the benchmark's time mapping, so the two must agree).
    """
    from dynbo.benchmarks import get
    from dynbo.benchmarks import options as accepted_options

    options = dict(spec.benchmark_options)
    accepted = accepted_options(spec.benchmark)
    if "seed" in accepted and "seed" not in options:
        options["seed"] = int(spec.seed)
    horizon = spec.protocol.horizon
    if horizon is not None:
        given = options.get("horizon")
        if given is not None and float(given) != float(horizon):
            raise ValueError(
                f"protocol horizon {horizon} differs from the benchmark option horizon {given}"
            )
        if "horizon" in accepted:
            options["horizon"] = horizon
    if spec.protocol.compression is not None:
        # the benchmark's whole time axis onto [0, T / kappa]
        if "horizon" not in accepted:
            raise ValueError(
                f"benchmark {spec.benchmark!r} takes no horizon option: its time axis "
                "cannot be compressed"
            )
        full = options.get("horizon")
        if full is None:
            full = get(spec.benchmark, **options).horizon
        options["horizon"] = float(full) * spec.protocol.time_factor
    return options


def run_horizon(protocol: Protocol, bench: Benchmark) -> float:
    """The horizon a run covers: the protocol's, else the benchmark's (built by
    :func:`benchmark_options`, so already compressed under a compression factor)."""
    if protocol.horizon is None:
        return float(bench.horizon)
    return float(protocol.horizon) * protocol.time_factor


def _make_benchmark(spec: RunSpec) -> Benchmark:
    from dynbo.benchmarks import get

    return get(spec.benchmark, **benchmark_options(spec))


def make_run_policy(spec: RunSpec, bench: Benchmark, horizon: float) -> Any:
    """The policy a run uses: the spec's options plus what the benchmark and horizon say.

    The benchmark's candidates (and their given covariance), temporal kernel and (for
    the policies that take it) noise variance, and the horizon as the time unit of the
    temporal prior, are defaults the spec's options may override. A reference player's
    name (``random``, ``oracle-lag``: :mod:`dynbo.harness.references`) gives that player.
    """
    from dynbo.harness.devices import check_policy_devices
    from dynbo.harness.references import make_reference, reference_names
    from dynbo.policies import make, policy_class

    check_policy_devices(spec.policy, spec.protocol.devices)
    if spec.policy in reference_names():
        return make_reference(spec.policy, bench, int(spec.seed), spec.policy_options)

    for owned in ("seed", "bounds"):
        if owned in spec.policy_options:
            raise ValueError(
                f"policy option {owned!r} is the run's own ("
                + (
                    "the run's seed: --seed, or the campaign's seeds"
                    if owned == "seed"
                    else "the benchmark's domain"
                )
                + "), not a policy option"
            )
    # constraint_mode: the benchmark's constraints (and safe points) for the policy
    options = constraint_options(spec.policy_options, bench)
    if bench.candidates is not None:
        options.setdefault("candidates", bench.candidates)
    if bench.arm_covariance is not None and "candidates" not in spec.policy_options:
        # a covariance over the benchmark's arms, unless the spec chose other candidates
        options.setdefault("arm_covariance", bench.arm_covariance)
    klass = policy_class(spec.policy)
    if klass.fixed_temporal_kernel is None:
        options.setdefault("temporal_kernel", bench.temporal_kernel)
    if klass.known_noise:
        options.setdefault("noise_variance", bench.noise_variance)
    # the horizon is the problem's unit of time (W-DBO normalizes time by it, App. G.1)
    options.setdefault("time_scale", float(horizon))
    return make(spec.policy, bounds=bench.bounds, seed=int(spec.seed), **options)


def _warmup_design(
    bench: Benchmark,
    protocol: Protocol,
    horizon: float,
    rng: np.random.Generator,
    points: np.ndarray | None = None,
) -> list[tuple[np.ndarray, float]]:
    """The warm-up's ``(x, t)``: ``points`` ``(warmup, d)`` when given, else uniform draws
    (of the candidates, or of the box), at sorted uniform times (step clock: 0)."""
    count = protocol.warmup
    if count == 0:
        return []
    if points is not None:
        xs = np.asarray(points, dtype=float)
    elif bench.candidates is not None:
        xs = bench.candidates[rng.integers(0, len(bench.candidates), count)]
    else:
        xs = rng.uniform(bench.bounds[0], bench.bounds[1], size=(count, bench.dim))
    if protocol.clock == "step":
        times = np.zeros(count)
    else:
        times = np.sort(rng.uniform(0.0, protocol.warmup_fraction * horizon, size=count))
    return [(xs[i].astype(float), float(times[i])) for i in range(count)]


def _row(
    k: int,
    warmup: bool,
    s: float,
    t: float,
    x: np.ndarray,
    y: float,
    bench: Benchmark,
) -> dict[str, Any]:
    f_value = float(bench.f(np.asarray(x, dtype=float).reshape(1, -1), t)[0])
    _, f_max = bench.optimum(t)
    for what, value in (("observation", y), ("noiseless value", f_value), ("optimum", f_max)):
        if not math.isfinite(float(value)):
            # a run with such a record cannot be scored; it ends here as failed
            raise ValueError(
                f"the benchmark returned a non-finite {what} ({float(value)}) at t = {t:g}"
            )
    return {
        "k": k,
        "warmup": int(warmup),
        "s": float(s),
        "t": float(t),
        "x": to_json([float(v) for v in x]),
        "y": float(y),
        "f": f_value,
        "f_max": float(f_max),
        "regret": float(f_max) - f_value,
        # noise-free: whether the query violated a constraint (dynbo.harness.constraints)
        **violation_fields(bench, x, t),
    }


def execute(
    spec: RunSpec,
    *,
    on_iteration: Callable[[dict[str, Any]], None] | None = None,
    benchmark: Benchmark | None = None,
    observer: Callable[[Any, dict[str, Any]], None] | None = None,
) -> RunResult:
    """Run one benchmark x policy x seed to the horizon (see :func:`_execute`), with the
    BLAS pools of this process limited to the protocol's ``threads`` as torch's are (a
    campaign's worker processes get them from the environment; a run in this process,
    ``dynbo run`` or one worker, would otherwise use every core for NumPy)."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=spec.protocol.threads, user_api="blas"):
        return _execute(spec, on_iteration=on_iteration, benchmark=benchmark, observer=observer)


def _execute(
    spec: RunSpec,
    *,
    on_iteration: Callable[[dict[str, Any]], None] | None = None,
    benchmark: Benchmark | None = None,
    observer: Callable[[Any, dict[str, Any]], None] | None = None,
) -> RunResult:
    """Run one benchmark x policy x seed to the horizon.

    Exceptions raised by the objective or the policy end the run with status
    ``"failed"`` and the error text; they do not propagate (a campaign goes on).

    Args:
        spec: the run.
        on_iteration: called with each loop iteration's record (live progress).
        benchmark: an already-built benchmark to use instead of building it from the spec.
        observer: called after each loop iteration with the policy and the record (to
            draw the model as it was, e.g. the run animation); it must not change the
            policy.

    Returns:
        The :class:`RunResult` with one record per warm-up point and per iteration.
    """
    torch.set_num_threads(spec.protocol.threads)
    started = time.perf_counter()
    if spec.protocol.devices == 1:
        run = _Run(spec)
    else:
        from dynbo.harness.devices import DeviceRun

        run = DeviceRun(spec)
    status, error = "done", None
    try:
        run.prepare(benchmark)
        run.warm_up()
        run.start_clock()
        run.iterate(on_iteration, observer)
    except Exception as err:  # noqa: BLE001 - a failed run is data, not a crash
        status = "failed"
        error = f"{type(err).__name__}: {err}\n{traceback.format_exc(limit=8)}"
    return RunResult(
        spec=spec,
        status=status,
        iterations=run.iterations,
        timings=run.timings,
        summary=run.summary(),
        error=error,
        wall_seconds=time.perf_counter() - started,
    )


@dataclass
class _Step:
    """One loop iteration as the protocol's steps fill it in (times in clock seconds)."""

    #: ``s_k``: the clock time the iteration starts at
    s: float
    query: Any = None
    #: seconds the policy's work (observe the previous answer, suggest) really took
    measured: float = 0.0
    #: the dataset size ``n`` the suggestion was computed with (what ``R(n)`` reads)
    size_before: int = 0
    #: ``D_k``: the response time the clock charges
    response: float = 0.0
    #: ``t_k``: the time the query lands and is evaluated at
    landing: float = 0.0
    y: float = 0.0
    diagnostics: Any = None
    row: dict[str, Any] = field(default_factory=dict)
    #: the additional queries made: ``(points (m, d), times, values)``, or ``None``
    additional: tuple[np.ndarray, list[float], list[float]] | None = None
    #: what the run adds to the record's ``extra`` (several devices: which made it)
    extra: dict[str, Any] = field(default_factory=dict)
    #: what the policy is told of the evaluation: ``(x, t, y)`` and the observed
    #: constraints when it models some (:meth:`_Run.answer`)
    answer: tuple[Any, ...] = ()

    @property
    def made(self) -> int:
        """``m``: how many additional queries were made."""
        return 0 if self.additional is None else len(self.additional[1])


class _Run:
    """The state of one run between the steps of the protocol (module docstring).

    :func:`_execute` and :meth:`iterate` call the steps in the protocol's order; each
    method is one of them.
    Until :meth:`prepare` has run, only ``iterations``, ``timings`` and ``horizon`` are
    set (what a run that failed that early is summarized from).
    """

    def __init__(self, spec: RunSpec) -> None:
        self.spec = spec
        self.protocol = spec.protocol
        self.iterations: list[dict[str, Any]] = []
        self.timings: list[dict[str, Any]] = []
        self.horizon = 0.0
        #: loop iterations made so far (the records' ``k``)
        self.k = 0
        #: the previous answer ``(x, t, y)``, told to the policy at the next iteration
        #: (and the observed constraints, when the policy models some: :meth:`answer`)
        self.pending: tuple[Any, ...] | None = None
        #: the previous additional answers ``(points, times, values)``, likewise
        self.pending_additional: tuple[np.ndarray, list[float], list[float]] | None = None

    def prepare(self, benchmark: Benchmark | None) -> None:
        """Build the benchmark, the durations (compressed), the noise stream and the policy."""
        protocol = self.protocol
        self.bench = benchmark if benchmark is not None else _make_benchmark(self.spec)
        self.horizon = run_horizon(protocol, self.bench)
        self.factor = protocol.time_factor  # compression: every duration shrinks by 1 / kappa
        bench_cost = self.bench.cost if protocol.cost is None else protocol.cost
        self.cost = float(bench_cost) * self.factor
        check_clock_advances(protocol, self.cost)
        self.additional_cost = (
            self.cost
            if protocol.additional_cost is None
            else protocol.additional_cost * self.factor
        )
        self.discrete = protocol.clock == "step"
        self.noise_rng = np.random.default_rng([int(self.spec.seed), 1])
        self.policy = make_run_policy(self.spec, self.bench, self.horizon)
        self.constraint_options = constraint_options(self.spec.policy_options, self.bench)
        #: the constraints the policy is told (dynbo.harness.constraints), from a noise
        #: stream of their own so that the objective's noise does not depend on them
        self.told_constraints = modeled_constraints(self.constraint_options)
        self.constraint_rng = np.random.default_rng([int(self.spec.seed), 2])

    def answer(self, x: np.ndarray, t: float, y: float) -> tuple[Any, ...]:
        """What the policy is told of an evaluation: ``(x, t, y)``, and the noisy values of
        the constraints it models when it models some."""
        if not self.told_constraints:
            return (x, t, y)
        observed = self.bench.observe_constraints(x, t, self.constraint_rng)
        return (x, t, y, {name: observed[name] for name in self.told_constraints})

    def warm_up(self) -> None:
        """Step 1: the policy observes the warm-up design (recorded, flagged, ``k <= 0``)."""
        bench, policy, warmup = self.bench, self.policy, self.protocol.warmup
        design_rng = np.random.default_rng([int(self.spec.seed), 0])
        # a safe policy's warm-up is its safe points (dynbo.harness.constraints)
        points = warmup_points(self.constraint_options, warmup)
        design = _warmup_design(bench, self.protocol, self.horizon, design_rng, points)
        for i, (x, t) in enumerate(design):
            y = bench.observe(x, t, self.noise_rng)
            policy.observe(*self.answer(x, t, y))
            row = _row(i - warmup, True, t, t, x, y, bench)
            row.update(dataset_size=policy.dataset_size)
            self.iterations.append(row)

    def start_clock(self) -> None:
        """Start the clock after the warm-up (the wall clock's origin is its creation)."""
        protocol = self.protocol
        response_model = (
            ResponseTimeModel(tuple(c * self.factor for c in protocol.response_time))
            if protocol.response_time
            else None
        )
        self.clock = Clock(
            protocol.clock,
            response_time=response_model,
            start=1.0 if self.discrete else protocol.warmup_fraction * self.horizon,
        )

    def iterate(
        self,
        on_iteration: Callable[[dict[str, Any]], None] | None,
        observer: Callable[[Any, dict[str, Any]], None] | None,
    ) -> None:
        """Steps 2-4 of the protocol, iteration after iteration, until the run is over."""
        while True:
            step = self.begin()
            if step is None:  # the horizon or the iteration cap is reached
                break
            if not self.query(step, on_iteration, observer):
                break
            self.advance(step)

    def query(
        self,
        step: _Step,
        on_iteration: Callable[[dict[str, Any]], None] | None,
        observer: Callable[[Any, dict[str, Any]], None] | None,
    ) -> bool:
        """Ask, land, evaluate and record one query; ``False`` (nothing made) when it
        would land after the horizon."""
        self.suggest(step)
        self.charge_response_time(step)
        if not self.land(step):
            return False
        self.evaluate(step)
        self.evaluate_additional(step)
        self.record(step, on_iteration, observer)
        return True

    def begin(self) -> _Step | None:
        """Start iteration ``k + 1`` at ``s_k``; ``None`` when the run is over (the horizon
        reached, under the step clock passed, or ``max_iterations`` made)."""
        s = self.clock.current()
        if (self.discrete and s > self.horizon) or (not self.discrete and s >= self.horizon):
            return None
        if self.protocol.max_iterations is not None and self.k >= self.protocol.max_iterations:
            return None
        return _Step(s=s)

    def suggest(self, step: _Step) -> None:
        """Tell the policy the previous answers and ask ``suggest(s_k)``, timing the work."""
        policy = self.policy
        work_start = time.perf_counter()
        self.tell()
        step.size_before = policy.dataset_size
        step.query = policy.suggest(step.s)
        step.measured = time.perf_counter() - work_start

    def tell(self) -> None:
        """Tell the policy the previous answer and its additional answers."""
        if self.pending is not None:
            self.policy.observe(*self.pending)
        if self.pending_additional is not None:
            self.policy.observe_additional(*self.pending_additional)

    def charge_response_time(self, step: _Step) -> None:
        """``D_k``: what the clock charges for the work (modeled: ``R(n)``, step: 0)."""
        step.response = self.clock.respond(step.measured * self.factor, step.size_before)

    def land(self, step: _Step) -> bool:
        """Move the clock to ``t_k = max(s_k + D_k, query.t)``; whether that is within the
        horizon (a query that would land after it is not made)."""
        clock = self.clock
        if self.discrete:
            # a query for a later time (ABO) waits for the first step at or after it
            clock.wait_until(float(math.ceil(step.query.t - 1e-9)))
        else:
            if self.protocol.clock != "wall":
                clock.advance(step.response)
            clock.wait_until(step.query.t)
        step.landing = clock.current()
        return step.landing <= self.horizon

    def evaluate(self, step: _Step) -> None:
        """Evaluate the query at ``t_k``; its record with the regret ``r_k``."""
        self.k += 1
        step.y = self.bench.observe(step.query.x, step.landing, self.noise_rng)
        step.answer = self.answer(step.query.x, step.landing, step.y)
        step.diagnostics = self.policy.diagnostics
        step.row = _row(self.k, False, step.s, step.landing, step.query.x, step.y, self.bench)

    def evaluate_additional(self, step: _Step) -> None:
        """Evaluate the query's additional points (step clock: all at ``t_k``; else the
        ``j``-th at ``t_k + c + j c_a``), those before the horizon."""
        count = len(step.query.additional)
        if self.discrete:
            times = [step.landing] * count
        else:
            times = [step.landing + self.cost + j * self.additional_cost for j in range(count)]
        step.additional = _evaluate_additional(
            step.query.additional, self.bench, self.clock, times, self.horizon, self.noise_rng
        )

    def record(
        self,
        step: _Step,
        on_iteration: Callable[[dict[str, Any]], None] | None,
        observer: Callable[[Any, dict[str, Any]], None] | None,
    ) -> None:
        """Complete the iteration's record and timings, report them, keep the answers."""
        diag, made, protocol = step.diagnostics, step.made, self.protocol
        extra = {**diag.extra, **step.extra}
        if made:
            xs, ts, ys = step.additional  # type: ignore[misc]
            extra["additional"] = [
                {"x": [float(v) for v in xs[j]], "t": ts[j], "y": ys[j]} for j in range(made)
            ]
        # only the real-time clocks split the response time into the policy's phases
        virtual_split = protocol.clock in ("wall", "measured")
        row = step.row
        row.update(
            dataset_size=self.policy.dataset_size,
            response_time=float(step.response),
            fit_seconds=diag.fit_seconds if virtual_split else None,
            acquisition_seconds=diag.acquisition_seconds if virtual_split else None,
            cleaning_seconds=diag.cleaning_seconds if virtual_split else None,
            removed=int(diag.removed),
            reset=int(diag.reset),
            additional_queries=made,
            hyperparameters=to_json(diag.hyperparameters),
            extra=to_json(extra),
        )
        self.iterations.append(row)
        self.timings.append(
            {
                "k": self.k,
                "measured_seconds": step.measured,
                "fit_seconds": diag.fit_seconds,
                "acquisition_seconds": diag.acquisition_seconds,
                "cleaning_seconds": diag.cleaning_seconds,
            }
        )
        if on_iteration is not None:
            on_iteration(row)
        if observer is not None:
            observer(self.policy, row)
        self.pending = step.answer
        self.pending_additional = step.additional

    def advance(self, step: _Step) -> None:
        """Advance to ``s_{k+1}``: one step, or ``t_k + c + m c_a`` (the answer arrives
        ``c`` after landing, the ``m`` additional ones after it)."""
        if self.discrete:
            self.clock.advance(1.0)
        elif self.protocol.clock == "wall":
            # the recording above is not the objective's time
            self.clock.wait_until(step.landing + self.cost + step.made * self.additional_cost)
        else:
            self.clock.advance(self.cost + step.made * self.additional_cost)

    def summary(self) -> dict[str, Any]:
        """The run's metrics over what it recorded."""
        # in discrete time each query holds for one step, the last one until T + 1
        end = self.horizon + 1.0 if self.protocol.clock == "step" else self.horizon
        return summarize(self.iterations, end)


def _evaluate_additional(
    points: np.ndarray,
    bench: Benchmark,
    clock: Clock,
    times: list[float],
    horizon: float,
    noise_rng: np.random.Generator,
) -> tuple[np.ndarray, list[float], list[float]] | None:
    """Evaluate a query's additional points at ``times`` (those before the horizon).

    Under the wall clock each evaluation waits for its time. Returns ``(points, times,
    values)`` of those made, or ``None`` when none was.
    """
    made_x, made_t, made_y = [], [], []
    for point, when in zip(points, times):
        if when > horizon:
            break
        if clock.mode == "wall":
            clock.wait_until(when)
        value = bench.observe(point, when, noise_rng)
        if not math.isfinite(float(value)):
            raise ValueError(f"the benchmark returned a non-finite observation at t = {when:g}")
        made_x.append(np.asarray(point, dtype=float))
        made_t.append(float(when))
        made_y.append(float(value))
    if not made_x:
        return None
    return np.stack(made_x), made_t, made_y


def summarize(iterations: list[dict[str, Any]], horizon: float) -> dict[str, Any]:
    """The per-run metrics of the protocol from the iteration records.

    ``average_regret`` is the mean of ``r_k`` over the loop's queries (the papers'
    metric); ``time_averaged_regret`` holds each ``r_k`` until the next query (the last
    until the horizon) and divides by the duration; warm-up points are summarized apart.
    On a constrained benchmark it adds ``violations``, ``violation_rate`` and
    ``warmup_violations`` (:func:`dynbo.harness.constraints.violation_summary`).
    """
    loop = [r for r in iterations if not r["warmup"]]
    warm = [r for r in iterations if r["warmup"]]
    additional = int(sum(r.get("additional_queries") or 0 for r in loop))
    out: dict[str, Any] = {
        "queries": len(loop),
        "additional_queries": additional,
        "warmup_average_regret": float(np.mean([r["regret"] for r in warm])) if warm else None,
    }
    if not loop:
        out.update(
            average_regret=None,
            time_averaged_regret=None,
            cumulative_regret=0.0,
            mean_response_time=None,
            final_dataset_size=None,
            max_dataset_size=None,
        )
        out.update(violation_summary(loop, warm))
        return out
    regrets = np.array([r["regret"] for r in loop])
    times = np.array([r["t"] for r in loop])
    ends = np.append(times[1:], max(horizon, times[-1]))
    duration = ends[-1] - times[0]
    time_avg = float(np.sum(regrets * (ends - times)) / duration) if duration > 0 else None
    out.update(
        average_regret=float(regrets.mean()),
        time_averaged_regret=time_avg,
        cumulative_regret=float(regrets.sum()),
        mean_response_time=float(np.mean([r["response_time"] for r in loop])),
        final_dataset_size=int(loop[-1]["dataset_size"]),
        max_dataset_size=int(max(r["dataset_size"] for r in iterations)),
    )
    out.update(violation_summary(loop, warm))
    return out
