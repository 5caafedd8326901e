"""Campaigns: benchmarks x policies x seeds, run on a process pool or a Dask cluster.

A campaign is described by a TOML file (or the equivalent dict); ``docs/campaigns.md``
documents every key with a complete example. In short::

    name = "my-campaign"
    suites = ["quick"]                       # benchmarks, policies, seeds, clock of a suite
    benchmarks = ["eggholder", {name = "hartmann3", options = {noise_variance = 0.05}}]
    policies = ["gp-ucb", {name = "wdbo", options = {alpha = 0.25}}]
    seeds = 3                                # or a list: [0, 4, 7]
    references = ["random", "oracle-lag"]    # reference players beside the policies
    equal_exploration = 2.0                  # one multiplier of sigma for every policy

    [protocol]
    clock = "modeled"                        # wall | measured | modeled | step
    horizon = 60                             # seconds (or steps); default: the benchmark's
    response_time = [0.05, 0.0, 0.0, 2e-7]   # R(n) cubic, or "calibrated"
    warmup = 15
    threads = 1

Explicit ``benchmarks`` / ``policies`` / ``seeds`` / ``[protocol]`` keys override what
the suites say. Every run is identified by the hash of what determines it; running a
campaign skips the runs the store already holds, so an interrupted campaign resumes
with no lost and no duplicated runs (finished runs are kept, unfinished ones are redone
from their start).
"""

from __future__ import annotations

import ctypes
import dataclasses
import datetime
import gc
import hashlib
import json
import os
import signal
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from dynbo.harness.clocks import load_calibration
from dynbo.harness.labels import RESERVED_ROWS
from dynbo.harness.loop import (
    Protocol,
    RunResult,
    RunSpec,
    benchmark_options,
    check_clock_advances,
    execute,
    make_run_policy,
    run_horizon,
    to_json,
)
from dynbo.harness.store import Store

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = [
    "Campaign",
    "CampaignOutcome",
    "DEFAULT_RESPONSE_TIME",
    "campaign_labels",
    "connect_scheduler",
    "load_campaign",
    "record_missing_labels",
    "run_campaign",
    "validate_campaign",
]

#: R(n) = 0.05 + 2e-7 n^3 s: the modeled clock's default when neither the config nor a
#: calibration file gives one (the order of magnitude of BOLT's worked example).
DEFAULT_RESPONSE_TIME = (0.05, 0.0, 0.0, 2e-7)

_TOP_KEYS = {
    "name",
    "suites",
    "benchmarks",
    "policies",
    "seeds",
    "protocol",
    "references",
    "equal_exploration",
}
_PROTOCOL_KEYS = {
    "clock",
    "horizon",
    "warmup",
    "warmup_fraction",
    "response_time",
    "threads",
    "cost",
    "max_iterations",
    "additional_cost",
    "compression",
    "devices",
}


@dataclass(frozen=True)
class Campaign:
    """A named list of runs.

    ``skipped_policies`` names the policies its suites list that this version does not
    provide (they are left out of the runs).
    """

    name: str
    specs: tuple[RunSpec, ...]
    config: Mapping[str, Any] = field(default_factory=dict)
    skipped_policies: tuple[str, ...] = ()

    @property
    def campaign_id(self) -> str:
        digest = hashlib.sha256(
            to_json({"name": self.name, "runs": sorted(s.run_id for s in self.specs)}).encode()
        )
        return digest.hexdigest()[:16]

    def __len__(self) -> int:
        return len(self.specs)


@dataclass
class CampaignOutcome:
    """What a call to :func:`run_campaign` did."""

    campaign_id: str
    total: int
    skipped: int
    done: int
    failed: int
    failures: list[tuple[str, str]] = field(default_factory=list)


def _check_label(label: Any, what: str, name: Any) -> None:
    """A label is a row or column heading of every table: one printable line, no ``|``."""
    if not isinstance(label, str) or not label.strip():
        raise ValueError(
            f"label of {what} entry {name!r} must be a non-empty string, got {label!r}"
        )
    if not label.isprintable() or "|" in label:
        raise ValueError(
            f"label of {what} entry {name!r} must be one printable line without '|' (it heads "
            f"a table row or column), got {label!r}"
        )


def _check_distinct_headings(
    bench_entries: list[tuple[str, dict[str, Any], str | None]],
    policy_entries: list[tuple[str, dict[str, Any], str | None]],
) -> None:
    """Refuse entries that would share a table row or column and mix their runs, and
    entries that are the same runs under two headings (a run is stored once)."""
    rows: dict[str, tuple[str, str]] = {}
    for what, entries in (("benchmark", bench_entries), ("policy", policy_entries)):
        headings: dict[tuple[str, str], str] = {}
        for name, options, label in entries:
            heading = label or name
            identity = (name, json.dumps(options, sort_keys=True, default=str))
            if identity in headings:
                raise ValueError(
                    f"the {what} entries {headings[identity]!r} and {heading!r} are the same "
                    f"{what} with the same options: their runs would be the same runs; list "
                    "it once"
                )
            headings[identity] = heading
    for name, options, label in bench_entries:
        heading = label or name
        if heading.strip().upper() in RESERVED_ROWS:
            raise ValueError(
                f"the benchmark heading {heading!r} is reserved: the tables' "
                f"{heading.strip().upper()} row scores every policy over the benchmarks; "
                "choose another 'label'"
            )
        identity = (name, json.dumps(options, sort_keys=True, default=str))
        if rows.setdefault(heading, identity) != identity:
            raise ValueError(
                f"two benchmark entries would share the table row {heading!r} (different "
                "benchmarks or options); give each its own 'label'"
            )
    unlabelled = {name for name, _, label in policy_entries if not label}
    columns: dict[str, tuple[str, str]] = {}
    for name, options, label in policy_entries:
        if not label:
            continue
        identity = (name, json.dumps(options, sort_keys=True, default=str))
        if columns.setdefault(label, identity) != identity or label in unlabelled - {name}:
            raise ValueError(
                f"two policy entries would share the table column {label!r}; give each its "
                "own 'label'"
            )


def _entries(items: Any, what: str) -> list[tuple[str, dict[str, Any], str | None]]:
    if items is None:
        return []
    if isinstance(items, (str, Mapping)):
        items = [items]
    if not isinstance(items, Sequence):
        raise ValueError(f"{what} must be a list of names or tables, got {items!r}")
    out = []
    for item in items:
        if isinstance(item, str):
            out.append((item, {}, None))
        elif isinstance(item, Mapping):
            # a policy entry may say how its options were chosen (`dynbo tune` writes it;
            # reports show it): it changes no run
            keys = {"name", "options", "label"} | ({"tuned"} if what == "policies" else set())
            unknown = set(item) - keys
            if "name" not in item or unknown:
                raise ValueError(
                    f"each entry of {what} needs a 'name' (and optional "
                    f"{', '.join(repr(k) for k in sorted(keys - {'name'}))}); got {dict(item)!r}"
                )
            tuned = item.get("tuned")
            if tuned is not None and (not isinstance(tuned, str) or not tuned.strip()):
                raise ValueError(
                    f"tuned of {what} entry {item['name']!r} must be a non-empty string "
                    f"saying how its options were chosen, got {_short(tuned)}"
                )
            options = item.get("options", {})
            if not isinstance(options, Mapping):
                raise ValueError(f"options of {what} entry {item['name']!r} must be a table")
            label = item.get("label")
            if label is not None:
                _check_label(label, what, item["name"])
            out.append((str(item["name"]), dict(options), label))
        else:
            raise ValueError(f"{what} entries must be names or tables, got {item!r}")
    return out


#: the most seeds a campaign may list: each is a run per benchmark and policy
MAX_SEEDS = 100_000


def _seeds(value: Any) -> list[int]:
    if isinstance(value, bool):
        raise ValueError(f"seeds must be a count or a list of integers, got {value!r}")
    if isinstance(value, int):
        if not 1 <= value <= MAX_SEEDS:
            raise ValueError(f"seeds must be a count from 1 to {MAX_SEEDS}, got {value}")
        return list(range(value))
    if (
        isinstance(value, Sequence)
        and not isinstance(value, str)
        and value
        and all(isinstance(s, int) and not isinstance(s, bool) and 0 <= s < 2**63 for s in value)
    ):
        if len(value) > MAX_SEEDS:
            raise ValueError(f"seeds lists {len(value)} seeds, more than {MAX_SEEDS}")
        seeds = [int(s) for s in value]
        seen: set[int] = set()
        for seed in seeds:
            if seed in seen:
                raise ValueError(f"seeds lists {seed} more than once: a seed is one run each")
            seen.add(seed)
        return seeds
    raise ValueError(
        "seeds must be a positive count or a list of integers in [0, 2**63) (what a random "
        f"generator takes), got {_short(value)}"
    )


def _short(value: Any, limit: int = 200) -> str:
    """``repr(value)``, cut to ``limit`` characters."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def _check_plain_values(value: Any, where: str) -> None:
    """Refuse what a campaign cannot store as JSON (TOML dates and times), naming its key."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            _check_plain_values(item, f"{where}: {key}")
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _check_plain_values(item, f"{where}[{i}]")
    elif isinstance(value, (datetime.date, datetime.time)):  # datetime is a date
        raise ValueError(
            f"{where} is a date or time ({value.isoformat()}); campaign values are "
            "numbers, strings, booleans, lists and tables"
        )


def _check_suites_agree(
    suites: Sequence[str], protocol_section: Mapping[str, Any], seeds_given: bool
) -> None:
    """Several suites run under one protocol: refuse suites that time (or seed) their
    runs differently unless the campaign says which value holds."""
    from dynbo import benchmarks as registry

    if len(suites) < 2:
        return
    settings: dict[str, dict[str, Any]] = {}
    for name in suites:
        suite = registry.suite(name)
        values = {"clock": suite.clock, **suite.protocol}
        if not seeds_given:
            values["seeds"] = suite.seeds
        settings[name] = values
    for key in sorted({k for values in settings.values() for k in values}):
        if key in protocol_section:
            continue
        seen = {name: values.get(key) for name, values in settings.items()}
        if len({json.dumps(v, default=str) for v in seen.values()}) > 1:
            given = ", ".join(f"{name}: {value!r}" for name, value in seen.items())
            where = "'seeds'" if key == "seeds" else f"[protocol] {key}"
            raise ValueError(
                f"the suites differ in {key} ({given}); give {where} in a campaign file "
                "(docs/campaigns.md) to run them together, or run them as separate campaigns"
            )


def _references(config: Mapping[str, Any]) -> list[str]:
    """The reference players a campaign adds to its policies (default: none)."""
    from dynbo.harness.references import reference_names

    value = config.get("references", [])
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise ValueError(f"references must be a list of reference players, got {_short(value)}")
    known = reference_names()
    for name in value:
        if name not in known:
            raise ValueError(
                f"unknown reference player {_short(name)}; available: {', '.join(known)}"
            )
    if len(set(value)) != len(value):
        raise ValueError(f"references lists a player twice: {_short(value)}")
    return list(value)


def _equal_exploration(config: Mapping[str, Any]) -> float | None:
    """The campaign's ``equal_exploration`` (``None`` when absent), checked."""
    from dynbo.acquisition.ucb import MAX_SIGMA_MULTIPLIER

    value = config.get("equal_exploration")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"equal_exploration must be a number, got {_short(value)}")
    if not 0.0 <= float(value) <= MAX_SIGMA_MULTIPLIER:
        raise ValueError(
            f"equal_exploration must be in [0, {MAX_SIGMA_MULTIPLIER:g}], got {value!r}"
        )
    return float(value)


def _with_equal_exploration(
    policy: str, options: Mapping[str, Any], value: float
) -> dict[str, Any]:
    """``options`` with ``sigma_multiplier = value``: the policy's beta schedule is then
    replaced, not shaped (an entry that sets its own exploration is refused)."""
    own = options.get("sigma_multiplier")
    if own is not None and float(own) != value:
        raise ValueError(
            f"policy {policy!r} sets sigma_multiplier = {own!r} but the campaign's "
            f"equal_exploration is {value!r}"
        )
    if float(options.get("exploration_scale", 1.0)) != 1.0:
        raise ValueError(
            f"policy {policy!r} sets exploration_scale, which equal_exploration replaces"
        )
    return {**options, "sigma_multiplier": value}


def build_campaign(config: Mapping[str, Any]) -> Campaign:
    """Expand a campaign config (see the module docstring) into its runs.

    Raises:
        ValueError: naming the first problem found (unknown key, suite, benchmark or
            policy; bad seeds; bad protocol values).
    """
    from dynbo import benchmarks as registry
    from dynbo.harness.references import reference_names
    from dynbo.policies import available

    unknown = set(config) - _TOP_KEYS
    if unknown:
        raise ValueError(f"unknown campaign keys: {sorted(unknown)}; allowed: {sorted(_TOP_KEYS)}")
    suites = config.get("suites", [])
    if isinstance(suites, str):
        suites = [suites]
    if not isinstance(suites, Sequence) or not all(isinstance(x, str) for x in suites):
        raise ValueError(f"suites must be a list of suite names, got {suites!r}")
    bench_entries: list[tuple[str, dict[str, Any], str | None]] = []
    # label -> policy -> the options the entry's paper used (suite entries only)
    entry_policy_options: dict[str | None, dict[str, dict[str, Any]]] = {}
    policy_entries: list[tuple[str, dict[str, Any], str | None]] = []
    seeds: list[int] | None = None
    protocol_values: dict[str, Any] = {}
    known_policies = set(available()) | set(reference_names())
    skipped: list[str] = []
    _check_plain_values(config, "the campaign")
    protocol_section = config.get("protocol", {})
    if not isinstance(protocol_section, Mapping):
        raise ValueError("[protocol] must be a table")
    _check_suites_agree(suites, protocol_section, "seeds" in config)
    for suite_name in suites:
        suite = registry.suite(suite_name)
        for e in suite.entries:
            # the rows of several suites are told apart by their suite (two suites may
            # both run e.g. 'schwefel', with different settings)
            label = f"{suite_name}/{e.label or e.benchmark}" if len(suites) > 1 else e.label
            bench_entries.append((e.benchmark, dict(e.options), label))
            entry_policy_options[label] = {p: dict(o) for p, o in e.policy_options.items()}
        listed = {q for q, _, _ in policy_entries}
        # a suite may list algorithms this version does not provide: run the others
        policy_entries += [
            (p, {}, None) for p in suite.policies if p in known_policies and p not in listed
        ]
        skipped += [p for p in suite.policies if p not in known_policies and p not in skipped]
        seeds = seeds or list(range(suite.seeds))
        protocol_values.setdefault("clock", suite.clock)
        for key, value in suite.protocol.items():
            protocol_values.setdefault(key, value)
    if "benchmarks" in config:
        bench_entries = _entries(config["benchmarks"], "benchmarks")
        entry_policy_options = {}

    if "policies" in config:
        policy_entries = _entries(config["policies"], "policies")
    if "seeds" in config:
        seeds = _seeds(config["seeds"])
    if not bench_entries:
        raise ValueError("the campaign names no benchmarks (give 'suites' or 'benchmarks')")
    if not policy_entries:
        raise ValueError("the campaign names no policies (give 'suites' or 'policies')")
    listed = {q for q, _, _ in policy_entries}
    policy_entries += [(p, {}, None) for p in _references(config) if p not in listed]
    _check_distinct_headings(bench_entries, policy_entries)
    names = set(registry.names())
    for name, _, _ in bench_entries:
        if name not in names:
            raise ValueError(f"unknown benchmark {name!r}; available: {', '.join(sorted(names))}")
    for name, _, _ in policy_entries:
        if name not in known_policies:
            raise ValueError(
                f"unknown policy {name!r}; available: {', '.join(sorted(known_policies))}"
            )
    unknown = set(protocol_section) - _PROTOCOL_KEYS
    if unknown:
        raise ValueError(
            f"unknown protocol keys: {sorted(unknown)}; allowed: {sorted(_PROTOCOL_KEYS)}"
        )
    protocol_values.update(protocol_section)
    protocol = make_protocol(protocol_values)
    specs = []
    equal = _equal_exploration(config)
    for bench, bench_options, label in bench_entries:
        for policy, own_options, _ in policy_entries:
            # the paper's settings for this entry, then the campaign's own options
            policy_options = {**entry_policy_options.get(label, {}).get(policy, {}), **own_options}
            if equal is not None and policy not in reference_names():
                policy_options = _with_equal_exploration(policy, policy_options, equal)
            for seed in seeds or [0]:
                specs.append(
                    RunSpec(
                        benchmark=bench,
                        policy=policy,
                        seed=seed,
                        protocol=protocol,
                        benchmark_options=bench_options,
                        policy_options=policy_options,
                        label=label,
                    )
                )
    if "horizon" in protocol_section and "benchmarks" not in config:
        # the campaign's horizon replaces the suites' own, which some suites give as
        # their benchmarks' horizon option and R-GP-UCB's (see with_horizon)
        specs = [with_horizon(spec, protocol.horizon, add=False) for spec in specs]
    name = config.get("name")
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise ValueError(f"name must be a non-empty string, got {_short(name)}")
    name = name or "+".join(suites) or "campaign"
    if "policies" in config:
        skipped = []
    return Campaign(
        name=name, specs=tuple(specs), config=dict(config), skipped_policies=tuple(skipped)
    )


def with_horizon(spec: RunSpec, horizon: float, *, add: bool = True) -> RunSpec:
    """``spec`` run to ``horizon``: the protocol's, the benchmark's ``horizon`` option
    where the benchmark takes one (it sets the benchmark's time mapping, and the two must
    agree), and a ``horizon`` policy option (R-GP-UCB's block length ``N = min(T, ..)``).

    With ``add=False`` a benchmark option is replaced only where the spec gives one (the
    run passes the protocol's horizon to the benchmark anyway: ``benchmark_options``),
    so that a spec that had none keeps its identity.
    """
    from dynbo.benchmarks import options as benchmark_accepted

    bench_options = dict(spec.benchmark_options)
    if "horizon" in benchmark_accepted(spec.benchmark):
        old = bench_options.get("horizon")
        if add:
            bench_options["horizon"] = horizon
        elif old is not None and float(old) != float(horizon):
            bench_options["horizon"] = int(horizon) if isinstance(old, int) else horizon
    policy_options = dict(spec.policy_options)
    if "horizon" in policy_options:  # an int stays an int: an equal value keeps the run id
        old = policy_options["horizon"]
        policy_options["horizon"] = int(horizon) if isinstance(old, int) else horizon
    return dataclasses.replace(
        spec,
        benchmark_options=bench_options,
        policy_options=policy_options,
        protocol=dataclasses.replace(spec.protocol, horizon=horizon),
    )


def make_protocol(values: Mapping[str, Any]) -> Protocol:
    """A :class:`Protocol` from config values; resolves the modeled clock's ``R(n)``.

    ``response_time`` may be 4 cubic coefficients, ``"calibrated"`` (this machine's
    ``dynbo calibrate`` file) or absent (the calibration file if there is one, else
    :data:`DEFAULT_RESPONSE_TIME`). The resolved coefficients become part of every run's
    identity, so runs with different models never mix.
    """
    try:
        return _make_protocol(dict(values))
    except (TypeError, ValueError, OverflowError) as err:
        raise ValueError(f"invalid protocol: {err}") from None


def _make_protocol(values: dict[str, Any]) -> Protocol:
    clock = values.get("clock", "measured")
    response = values.get("response_time")
    if response is not None and response != "calibrated":
        if (
            isinstance(response, str)
            or not isinstance(response, Sequence)
            or len(response) != 4
            or not all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in response)
        ):
            raise ValueError(
                "response_time must be 4 cubic coefficients [c0, c1, c2, c3] (seconds) "
                f"or 'calibrated', got {response!r}"
            )
    for key in ("horizon", "warmup_fraction", "cost", "additional_cost", "compression"):
        value = values.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise ValueError(f"{key} must be a number, got {value!r}")
    if clock == "modeled":
        if response is None or response == "calibrated":
            model = load_calibration()
            if model is None and response == "calibrated":
                raise ValueError(
                    "response_time = 'calibrated' but no calibration file exists; "
                    "run `dynbo calibrate`"
                )
            response = model.coefficients if model is not None else DEFAULT_RESPONSE_TIME
        values["response_time"] = tuple(float(c) for c in response)
    elif response is not None and response != "calibrated":
        values["response_time"] = tuple(float(c) for c in response)
    else:
        values.pop("response_time", None)
    for key in ("horizon", "warmup_fraction", "cost", "additional_cost", "compression"):
        if key in values and values[key] is not None:
            values[key] = float(values[key])
    return Protocol(**values)


def load_campaign(path: str | os.PathLike[str]) -> Campaign:
    """Read a campaign TOML file."""
    p = Path(path)
    try:
        # utf-8-sig: a byte-order mark some editors write is not TOML
        text = p.read_bytes().decode("utf-8-sig")
    except OSError as err:
        raise ValueError(f"cannot read campaign config {p}: {err.strerror or err}") from None
    except UnicodeDecodeError as err:
        raise ValueError(
            f"campaign config {p} is not UTF-8 text (byte {err.object[err.start]:#04x} at "
            f"offset {err.start}); TOML files are UTF-8"
        ) from None
    try:
        config = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ValueError(f"campaign config {p} is not valid TOML: {err}") from None
    return build_campaign(config)


def validate_campaign(campaign: Campaign) -> None:
    """Build every distinct benchmark and policy of the campaign once, running nothing.

    A campaign whose configuration cannot run (an unknown option, a value of the wrong
    type, a negative noise variance) is rejected before its first run, instead of
    storing every run as failed.

    Raises:
        ValueError: naming the benchmark, policy and problem of the first invalid run.
    """
    from dynbo.benchmarks import get

    benchmarks: dict[str, Any] = {}
    checked: set[str] = set()
    for spec in campaign.specs:
        where = f"benchmark {spec.display_benchmark!r}"
        try:
            options = benchmark_options(spec)
            # a random benchmark (the Markov-chain GPs) draws a new function per seed:
            # one seed checks the configuration, and building each seed's function here
            # would cost as much as the runs' own setup
            key = to_json([spec.benchmark, {k: v for k, v in options.items() if k != "seed"}])
            if key not in benchmarks:
                benchmarks[key] = get(spec.benchmark, **options)
        except (TypeError, ValueError, OverflowError) as err:
            raise ValueError(f"invalid campaign: {where}: {err}") from None
        policy_key = to_json([key, spec.policy, spec.policy_options, spec.protocol.as_dict()])
        if policy_key in checked:
            continue
        bench = benchmarks[key]
        horizon = run_horizon(spec.protocol, bench)
        cost = bench.cost if spec.protocol.cost is None else spec.protocol.cost
        try:
            check_clock_advances(spec.protocol, float(cost))
        except ValueError as err:
            raise ValueError(f"invalid campaign: {where}: {err}") from None
        try:
            make_run_policy(spec, bench, horizon)
        except (TypeError, ValueError, OverflowError) as err:
            raise ValueError(
                f"invalid campaign: policy {spec.policy!r} on {where}: {err}"
            ) from None
        checked.add(policy_key)


def _worker_execute(spec: RunSpec) -> RunResult:
    return execute(spec)


#: prctl(2) option: the signal a process receives when its parent dies (Linux)
_PR_SET_PDEATHSIG = 1


def _worker_init(parent_pid: int) -> None:
    """Set up a pool worker: Ctrl-C is the parent's to handle, and the worker dies with it.

    Without this, a parent killed by SIGKILL leaves its workers (hundreds of MB each)
    computing runs nobody will store, for ever.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):  # pragma: no cover - no prctl: the watchdog
            pass
    if os.getppid() != parent_pid:  # the parent died before we got here
        os._exit(1)

    def watchdog() -> None:
        # portable fallback (and cover for a parent thread that exits): poll the parent
        while True:
            time.sleep(0.5)
            if os.getppid() != parent_pid:
                os._exit(1)

    threading.Thread(target=watchdog, name="dynbo-parent-watchdog", daemon=True).start()


@contextmanager
def _interrupts_ignored() -> Iterator[None]:
    """Ignore SIGINT while worker processes are started.

    A worker inherits an ignored SIGINT (Python keeps a disposition its parent changed),
    so a Ctrl-C on the terminal, which reaches the whole process group, interrupts only
    the parent, even while a worker is still importing; the parent then stops the
    workers itself. The window is the few milliseconds the pool needs to start them.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _pin_threads(threads: int) -> dict[str, str | None]:
    previous = {}
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        previous[var] = os.environ.get(var)
        os.environ[var] = str(threads)
    return previous


def _restore_env(previous: Mapping[str, str | None]) -> None:
    for var, value in previous.items():
        if value is None:
            os.environ.pop(var, None)
        else:
            os.environ[var] = value


def run_campaign(
    campaign: Campaign,
    store: Store,
    *,
    workers: int = 1,
    scheduler: Any = None,
    retry_failed: bool = False,
    progress: bool = True,
    on_result: Callable[[RunResult], None] | None = None,
) -> CampaignOutcome:
    """Run the campaign's missing runs and store each as soon as it finishes.

    Args:
        campaign: the runs.
        store: where results go (only this process writes to it).
        workers: size of the local process pool (1: run in this process).
        scheduler: a Dask scheduler address (``"tcp://host:8786"``), a cluster object
            or a ``distributed.Client`` (the caller's: not closed here); overrides
            ``workers``. An address or cluster is connected to before the store is
            written.
        retry_failed: also rerun runs stored as failed.
        progress: show a progress bar (runs done, running, failed).
        on_result: called with each finished run.
    """
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a positive integer, got {workers!r}")
    validate_campaign(campaign)
    if scheduler is None or _is_client(scheduler):
        return _run_campaign(campaign, store, workers, scheduler, retry_failed, progress, on_result)
    # connected before the store is written: an unreachable scheduler leaves it as it was
    client = connect_scheduler(scheduler)
    try:
        return _run_campaign(campaign, store, workers, client, retry_failed, progress, on_result)
    finally:
        client.close()


def _is_client(scheduler: Any) -> bool:
    try:
        from distributed import Client
    except ImportError:  # pragma: no cover - the harness extra installs it
        return False
    return isinstance(scheduler, Client)


def connect_scheduler(address: Any) -> Any:
    """A ``distributed.Client`` connected to the Dask scheduler at ``address`` (an address
    such as ``"tcp://host:8786"``, or a cluster object such as a ``LocalCluster``).

    Waits as long as Dask's ``distributed.comm.timeouts.connect`` setting (30 s by
    default). The caller closes the client.

    Raises:
        ValueError: the extra is not installed, the address is malformed, or no
            scheduler answers there in time.
    """
    try:
        from distributed import Client
    except ImportError:  # pragma: no cover - the harness extra installs it
        raise ValueError(
            "running on a Dask cluster needs `pip install dask[distributed]`"
        ) from None
    if isinstance(address, str):
        try:
            # a port outside 0-65535 is malformed: say so now, not after the connect
            # timeout (reading .port is what checks it)
            _ = urllib.parse.urlsplit(address if "://" in address else f"tcp://{address}").port
        except ValueError as err:
            raise ValueError(f"cannot reach a Dask scheduler at {address!r}: {err}") from None
    try:
        return Client(address)
    except (OSError, TimeoutError, ValueError, TypeError) as err:
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ValueError(f"cannot reach a Dask scheduler at {address!r}: {reason}") from None


def campaign_labels(campaign: Campaign) -> dict[str, str]:
    """``run_id -> label``: the row the campaign shows each of its runs in (its benchmark
    entry's label, ``suite/label`` in a campaign of several suites), which the store
    records beside the campaign's links."""
    return {spec.run_id: spec.display_benchmark for spec in campaign.specs}


def record_missing_labels(store: Store) -> None:
    """Fill in the label records of the campaigns of a store written before the store
    kept them, from each campaign's stored configuration (one that no longer builds, with
    a policy this version lacks say, is left to the labels its runs were stored with)."""
    for stored in store.unlabelled_campaigns():
        try:
            campaign = build_campaign(stored["config"])
        except (ValueError, TypeError, KeyError):
            continue
        store.record_labels(stored["campaign_id"], campaign_labels(campaign))


def _run_campaign(
    campaign: Campaign,
    store: Store,
    workers: int,
    scheduler: Any,
    retry_failed: bool,
    progress: bool,
    on_result: Callable[[RunResult], None] | None,
) -> CampaignOutcome:
    store.add_campaign(campaign.campaign_id, campaign.name, dict(campaign.config))
    store.link(campaign.campaign_id, [s.run_id for s in campaign.specs], campaign_labels(campaign))
    record_missing_labels(store)
    stored = store.completed_run_ids(include_failed=not retry_failed)
    pending = [s for s in campaign.specs if s.run_id not in stored]
    # the same run may appear twice in a config; run it once
    unique: dict[str, RunSpec] = {}
    for spec in pending:
        unique.setdefault(spec.run_id, spec)
    pending = list(unique.values())
    outcome = CampaignOutcome(
        campaign_id=campaign.campaign_id,
        total=len(campaign.specs),
        skipped=len(campaign.specs) - len(pending),
        done=0,
        failed=0,
    )
    bar = _progress_bar(len(pending), campaign.name) if progress else None

    def record(result: RunResult, running: int) -> None:
        store.save_run(result)
        if result.status == "done":
            outcome.done += 1
        else:
            outcome.failed += 1
            outcome.failures.append((result.spec.run_id, (result.error or "").splitlines()[0]))
        if on_result is not None:
            on_result(result)
        if bar is not None:
            bar.update(1)
            bar.set_postfix(running=running, failed=outcome.failed, refresh=False)

    threads = max((s.protocol.threads for s in pending), default=1)
    try:
        if scheduler is not None:
            _run_on_dask(pending, scheduler, record)
        elif workers == 1:
            for i, spec in enumerate(pending):
                record(execute(spec), running=min(1, len(pending) - i - 1))
        else:
            previous = _pin_threads(threads)
            try:
                _run_on_pool(pending, workers, record)
            finally:
                _restore_env(previous)
    finally:
        if bar is not None:
            bar.close()
    return outcome


def _run_on_pool(
    specs: list[RunSpec], workers: int, record: Callable[[RunResult, int], None]
) -> None:
    """Run ``specs`` on ``workers`` processes, recording each result as it arrives.

    On Ctrl-C the runs not started are cancelled, the workers are terminated at once
    (their half-done runs are redone on resume), the runs already finished are
    recorded, and the ``KeyboardInterrupt`` propagates.
    """
    # spawn: a fresh interpreter per worker, safe with torch's and BLAS's thread pools
    pool = ProcessPoolExecutor(
        max_workers=workers,
        mp_context=get_context("spawn"),
        initializer=_worker_init,
        initargs=(os.getpid(),),
    )
    pending: set[Future[RunResult]] = set()
    try:
        with _interrupts_ignored():
            # submitting starts the workers (one per submission up to ``workers``)
            pending = {pool.submit(_worker_execute, spec) for spec in specs}
        while pending:
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in finished:
                pending.discard(future)
                record(future.result(), min(workers, len(pending)))
    except BaseException:
        for future in pending:
            future.cancel()
        _terminate_workers(pool)
        # runs that finished while the interrupt arrived are kept, not redone
        for future in pending:
            if future.done() and not future.cancelled() and future.exception() is None:
                record(future.result(), 0)
        raise
    else:
        pool.shutdown(wait=True)


#: how long an interrupted pool's manager thread is given to close its queues (seconds)
_MANAGER_JOIN_SECONDS = 5.0


def _terminate_workers(pool: ProcessPoolExecutor) -> None:
    """Stop a pool's worker processes now (Python < 3.14 has no public way)."""
    terminate = getattr(pool, "terminate_workers", None)
    if terminate is not None:  # pragma: no cover - Python >= 3.14
        terminate()
        return
    processes = list(getattr(pool, "_processes", {}).values())
    # shutdown drops the pool's references to its manager thread: keep one to join it
    manager = getattr(pool, "_executor_manager_thread", None)
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        if process.is_alive():
            process.terminate()
    for process in processes:
        process.join(timeout=5)
        if process.is_alive():  # pragma: no cover - a worker that ignores SIGTERM
            process.kill()
            process.join(timeout=5)
    # The manager thread holds the pool's queues, and with them the five named
    # semaphores a spawn pool registers with multiprocessing's resource tracker. Seeing
    # its workers gone it closes the queues and ends; once it has, they are released
    # here and their semaphores unlinked. Left to a later garbage collection, a process
    # that then ends at once (the CLI's os._exit on Ctrl-C) leaves them to the tracker,
    # which warns of "leaked semaphore objects". Bounded: a manager blocked for ever (on
    # a half-written result of a killed worker) must not hold up the interrupt.
    if manager is not None and manager is not threading.current_thread():
        manager.join(timeout=_MANAGER_JOIN_SECONDS)
    del manager
    gc.collect()  # the queues and the threads' reference cycles, now


def _run_on_dask(
    specs: list[RunSpec], client: Any, record: Callable[[RunResult, int], None]
) -> None:
    from distributed import as_completed

    futures = []
    try:
        futures = client.map(_worker_execute, specs, pure=False)
        remaining = len(futures)
        for future in as_completed(futures):
            remaining -= 1
            record(future.result(), remaining)
    except BaseException:
        # an interrupt (or a failed record) must not leave the cluster computing
        client.cancel([f for f in futures if not f.done()])
        raise


def _progress_bar(total: int, name: str) -> Any:
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover - the harness extra installs it
        return None
    return tqdm(total=total, desc=name, unit="run", file=sys.stderr, dynamic_ncols=True)
