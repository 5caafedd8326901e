"""Settings tuned on seeds apart from the evaluation seeds (``dynbo tune``).

A comparison of policies is only fair when each policy's free settings were chosen the
same way. :func:`tune` chooses them for every policy of a campaign, on *tuning seeds*
disjoint from the campaign's evaluation seeds, with a declared budget, and writes the
campaign to evaluate (``docs/tuning.md``):

1. **Candidates.** For each policy entry, ``budget`` settings of its declared
   :attr:`~dynbo.policies.Policy.tunables`: candidate 0 is the entry's own settings
   (the paper's defaults unless the entry sets them), candidates 1.. are the first
   distinct points of a scrambled Sobol sequence (Owen scrambling, fixed seed) over the
   tunables' ranges, log-scaled where declared. A tunable whose
   :attr:`~dynbo.policies.tunables.Tunable.conflicts` the entry sets, and
   ``exploration_scale`` under the campaign's ``equal_exploration``, is left as the
   entry has it.
2. **Runs.** Every candidate runs on every benchmark of the campaign and every tuning
   seed, under the campaign's protocol, as one ordinary campaign (labels such as
   ``gp-ucb#3``) stored like any other: an interrupted tuning resumes with no lost and
   no duplicated runs, and a second call runs nothing.
3. **Score.** The campaign tables' OVERALL normalization within each policy entry: on
   each benchmark every run's value of the metric becomes ``(v - m_b) / (M_b - m_b)``
   with ``m_b``, ``M_b`` the smallest and largest value of any of the entry's candidate
   runs there (0 where they are equal); a candidate's score is the mean over the
   tuning seeds of the mean over the benchmarks. A candidate with a failed or missing
   run is not eligible. The lowest score wins; of equal scores, the earlier candidate.
4. **Output.** The evaluation campaign: the input's benchmarks, protocol, evaluation
   seeds and references, each policy entry with the winner's settings merged over its
   own options and a ``tuned`` string saying how they were chosen. Reference players
   are not tuned.
"""

from __future__ import annotations

import copy
import json
import math
import os
import re
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dynbo.harness.campaign import (
    Campaign,
    CampaignOutcome,
    _entries,
    _seeds,
    build_campaign,
    run_campaign,
    validate_campaign,
)
from dynbo.harness.loop import RunResult
from dynbo.harness.store import Store

__all__ = [
    "METHODS",
    "TUNING_METRICS",
    "EntryChoice",
    "TuningPlan",
    "TuningResult",
    "campaign_toml",
    "candidate_scores",
    "finish_tuning",
    "plan_tuning",
    "seed_ranges",
    "tune",
    "write_campaign",
]

#: the search methods :func:`tune` knows
METHODS = ("sobol",)

#: the run summaries a tuning may minimize
TUNING_METRICS = ("average_regret", "time_averaged_regret")

#: the most candidates per policy (each is a run per benchmark and tuning seed)
MAX_BUDGET = 10_000

#: Sobol points drawn per candidate asked for before the design is declared exhausted
#: (integer tunables over short ranges repeat points, which are skipped)
_DRAWS_PER_CANDIDATE = 8


@dataclass(frozen=True)
class _Entry:
    """One policy entry of the campaign: what tuning it means."""

    position: int  # in the campaign's policy list
    name: str
    options: dict[str, Any]
    label: str | None
    tuned_names: tuple[str, ...]  # the tunables that apply to it
    candidates: tuple[dict[str, Any], ...]  # the settings of each candidate (0: {})

    @property
    def heading(self) -> str:
        return self.label or self.name

    def candidate_label(self, index: int) -> str:
        return f"{self.heading}#{index}"


@dataclass(frozen=True)
class TuningPlan:
    """What :func:`tune` runs: the tuning campaign and how its runs map to candidates.

    Attributes:
        config: the campaign configuration tuned (the evaluation campaign's).
        campaign: the tuning campaign (every candidate x benchmark x tuning seed).
        tuning_seeds: the seeds it runs, disjoint from the evaluation seeds.
        budget: candidates per policy entry (at most; fewer when the design repeats).
        method: the search method (:data:`METHODS`).
        metric: the run summary minimized (:data:`TUNING_METRICS`).
    """

    config: dict[str, Any]
    campaign: Campaign
    tuning_seeds: tuple[int, ...]
    budget: int
    method: str
    metric: str
    entries: tuple[_Entry, ...]
    run_candidates: Mapping[str, tuple[int, int]]  # run_id -> (entry position, candidate)
    untouched: tuple[int, ...]  # positions of entries not tuned (reference players)

    @property
    def provenance(self) -> str:
        """How the settings are chosen, in one line (the start of each ``tuned`` string)."""
        return (
            f"tuned on seeds {seed_ranges(self.tuning_seeds)}, budget {self.budget}, "
            f"Sobol design, {self.metric}"
        )


@dataclass(frozen=True)
class EntryChoice:
    """The tuning of one policy entry.

    Attributes:
        heading: the entry's label, else its policy name.
        policy: the policy name.
        tuned_names: the options tuned (empty: nothing to tune).
        candidates: each candidate's settings (candidate 0: ``{}``, the entry's own).
        scores: each candidate's score (``inf``: not eligible, a run failed or is missing).
        chosen: the index of the winner.
        options: the winner's settings merged over the entry's own options.
        provenance: the entry's ``tuned`` string.
    """

    heading: str
    policy: str
    tuned_names: tuple[str, ...]
    candidates: tuple[dict[str, Any], ...]
    scores: tuple[float, ...]
    chosen: int
    options: dict[str, Any]
    provenance: str


@dataclass(frozen=True)
class TuningResult:
    """What :func:`tune` did and chose.

    Attributes:
        config: the evaluation campaign (write it with :func:`write_campaign`).
        choices: one per tuned policy entry, in the campaign's order.
        outcome: the tuning campaign's run counts.
        campaign: the tuning campaign.
    """

    config: dict[str, Any]
    choices: tuple[EntryChoice, ...]
    outcome: CampaignOutcome
    campaign: Campaign


def tune(
    campaign: Mapping[str, Any] | Campaign,
    store: Store,
    *,
    tuning_seeds: Sequence[int],
    budget: int,
    method: str = "sobol",
    metric: str = "average_regret",
    design_seed: int = 0,
    workers: int = 1,
    scheduler: Any = None,
    retry_failed: bool = False,
    progress: bool = True,
    on_result: Callable[[RunResult], None] | None = None,
) -> TuningResult:
    """Tune every policy entry of ``campaign`` (module docstring) and return the evaluation
    campaign with the chosen settings.

    Args:
        campaign: the evaluation campaign: a configuration (``docs/campaigns.md``) or a
            :class:`Campaign` (its configuration is used).
        store: where the tuning runs go (and are found again: a rerun runs nothing).
        tuning_seeds: the seeds of the tuning runs, none of them an evaluation seed.
        budget: candidates per policy entry, >= 1 (candidate 0 is the entry's own
            settings), at most :data:`MAX_BUDGET`.
        method: ``"sobol"`` (the only one: a scrambled Sobol design).
        metric: a run summary of :data:`TUNING_METRICS`, minimized.
        design_seed: the Sobol scrambling seed (entry ``i`` uses ``design_seed + i``).
        workers, scheduler, retry_failed, progress, on_result: as for
            :func:`~dynbo.harness.campaign.run_campaign`.

    Raises:
        ValueError: a bad argument or campaign (before anything is stored), or a policy
            entry none of whose candidates finished every tuning run.
    """
    plan = plan_tuning(
        campaign,
        tuning_seeds=tuning_seeds,
        budget=budget,
        method=method,
        metric=metric,
        design_seed=design_seed,
    )
    outcome = run_campaign(
        plan.campaign,
        store,
        workers=workers,
        scheduler=scheduler,
        retry_failed=retry_failed,
        progress=progress,
        on_result=on_result,
    )
    return finish_tuning(plan, store, outcome)


def plan_tuning(
    campaign: Mapping[str, Any] | Campaign,
    *,
    tuning_seeds: Sequence[int],
    budget: int,
    method: str = "sobol",
    metric: str = "average_regret",
    design_seed: int = 0,
) -> TuningPlan:
    """The tuning campaign of :func:`tune`, checked and built, running nothing.

    Raises:
        ValueError: as :func:`tune`, before any run.
    """
    config = copy.deepcopy(dict(campaign.config if isinstance(campaign, Campaign) else campaign))
    if method not in METHODS:
        raise ValueError(f"unknown tuning method {method!r}; available: {', '.join(METHODS)}")
    if metric not in TUNING_METRICS:
        raise ValueError(
            f"the tuning metric must be one of {', '.join(TUNING_METRICS)}, got {metric!r}"
        )
    if isinstance(budget, bool) or not isinstance(budget, int) or not 1 <= budget <= MAX_BUDGET:
        raise ValueError(f"budget must be an integer from 1 to {MAX_BUDGET}, got {budget!r}")
    if isinstance(design_seed, bool) or not isinstance(design_seed, int) or design_seed < 0:
        raise ValueError(f"design_seed must be a non-negative integer, got {design_seed!r}")
    if isinstance(tuning_seeds, (str, bytes)) or not isinstance(tuning_seeds, Sequence):
        raise ValueError(f"tuning_seeds must be a list of seeds, got {tuning_seeds!r}")
    seeds = tuple(_seeds(list(tuning_seeds)))
    evaluation = build_campaign(config)
    evaluated = sorted({spec.seed for spec in evaluation.specs})
    shared = sorted(set(seeds) & set(evaluated))
    if shared:
        raise ValueError(
            f"the tuning seeds must be apart from the evaluation seeds "
            f"({seed_ranges(evaluated)}); both have {seed_ranges(shared)}"
        )
    validate_campaign(evaluation)

    from dynbo.harness.references import reference_names
    from dynbo.policies import option_defaults, policy_class

    references = set(reference_names())
    equal_exploration = config.get("equal_exploration") is not None
    entries: list[_Entry] = []
    untouched: list[int] = []
    for position, (name, own, label) in enumerate(_policy_entries(config)):
        if name in references:
            untouched.append(position)
            continue
        cls = policy_class(name)
        defaults = option_defaults(cls)
        # what the entry's runs set: its own options and a suite's per-benchmark ones
        given = [spec.policy_options for spec in evaluation.specs if spec.policy == name]
        tunables = {
            option: tunable
            for option, tunable in cls.tunables.items()
            if all(tunable.applies(options, defaults) for options in given or [own])
            and not (equal_exploration and option == "exploration_scale")
        }
        candidates = _sobol_candidates(tunables, budget, design_seed + position)
        entries.append(_Entry(position, name, dict(own), label, tuple(tunables), candidates))

    tuning_config = {k: v for k, v in config.items() if k not in ("references", "seeds")}
    tuning_config["name"] = f"{evaluation.name} tuning"
    tuning_config["seeds"] = list(seeds)
    tuning_config["policies"] = [
        _candidate_entry(e, j) for e in entries for j in range(len(e.candidates))
    ]
    tuning = build_campaign(tuning_config)
    run_candidates: dict[str, tuple[int, int]] = {}
    for entry in entries:
        for j in range(len(entry.candidates)):
            one = build_campaign({**tuning_config, "policies": [_candidate_entry(entry, j)]})
            run_candidates.update({spec.run_id: (entry.position, j) for spec in one.specs})
    return TuningPlan(
        config=config,
        campaign=tuning,
        tuning_seeds=seeds,
        budget=budget,
        method=method,
        metric=metric,
        entries=tuple(entries),
        run_candidates=run_candidates,
        untouched=tuple(untouched),
    )


def finish_tuning(
    plan: TuningPlan, store: Store, outcome: CampaignOutcome | None = None
) -> TuningResult:
    """Score the stored tuning runs of ``plan``, choose each entry's settings and build
    the evaluation campaign (module docstring, steps 3-4).

    Raises:
        ValueError: a policy entry none of whose candidates finished every tuning run.
    """
    rows = {run["run_id"]: run for run in store.runs(plan.campaign.campaign_id)}
    benchmarks = sorted({spec.display_benchmark for spec in plan.campaign.specs})
    choices = []
    for entry in plan.entries:
        values: list[dict[str, dict[int, float]]] = [{} for _ in entry.candidates]
        for run_id, (position, j) in plan.run_candidates.items():
            run = rows.get(run_id)
            if position != entry.position or run is None or run["status"] != "done":
                continue
            value = run["summary"].get(plan.metric)
            if value is not None and math.isfinite(float(value)):
                values[j].setdefault(run["label"], {})[int(run["seed"])] = float(value)
        scores = candidate_scores(values, benchmarks, plan.tuning_seeds)
        finite = [j for j, score in enumerate(scores) if math.isfinite(score)]
        if not finite:
            raise ValueError(
                f"policy entry {entry.heading!r}: none of its {len(scores)} candidates "
                f"finished every tuning run ({outcome.failed if outcome else 'some'} runs "
                "failed); see the store's failed runs"
            )
        chosen = min(finite, key=lambda j: (scores[j], j))
        settings = entry.candidates[chosen]
        if not entry.tuned_names:
            provenance = "not tuned: none of its settings is free in this campaign"
        elif chosen == 0:
            provenance = f"{plan.provenance}; candidate 0 of {len(scores)} (its own settings)"
        else:
            shown = ", ".join(f"{k} = {v}" for k, v in settings.items())
            provenance = f"{plan.provenance}; candidate {chosen} of {len(scores)} ({shown})"
        choices.append(
            EntryChoice(
                heading=entry.heading,
                policy=entry.name,
                tuned_names=entry.tuned_names,
                candidates=entry.candidates,
                scores=tuple(scores),
                chosen=chosen,
                options={**entry.options, **settings},
                provenance=provenance,
            )
        )
    config = _evaluation_config(plan, choices)
    validate_campaign(build_campaign(config))
    if outcome is None:
        total = len(plan.campaign.specs)
        outcome = CampaignOutcome(plan.campaign.campaign_id, total, total, 0, 0)
    return TuningResult(
        config=config, choices=tuple(choices), outcome=outcome, campaign=plan.campaign
    )


def candidate_scores(
    values: Sequence[Mapping[str, Mapping[int, float]]],
    benchmarks: Sequence[str],
    seeds: Sequence[int],
) -> list[float]:
    """Each candidate's score (module docstring, step 3): lower is better.

    Args:
        values: per candidate, ``benchmark -> seed -> metric value`` of its finished runs.
        benchmarks: the benchmarks (rows) every candidate must have run.
        seeds: the tuning seeds every candidate must have run.

    Returns:
        Per candidate, the mean over ``seeds`` of the mean over ``benchmarks`` of the
        values min-max normalized per benchmark over every candidate's runs; ``inf``
        for a candidate missing a (benchmark, seed) value.
    """
    anchors = {}
    for bench in benchmarks:
        seen = [v for per_bench in values for v in per_bench.get(bench, {}).values()]
        anchors[bench] = (min(seen), max(seen)) if seen else (0.0, 0.0)
    scores = []
    for per_bench in values:
        total = 0.0
        complete = True
        for bench in benchmarks:
            low, high = anchors[bench]
            runs = per_bench.get(bench, {})
            if any(seed not in runs for seed in seeds):
                complete = False
                break
            # equal anchors: every run of the benchmark is as good as the best
            total += sum((runs[s] - low) / (high - low) if high > low else 0.0 for s in seeds)
        scores.append(total / (len(benchmarks) * len(seeds)) if complete else math.inf)
    return scores


def seed_ranges(seeds: Sequence[int]) -> str:
    """Seeds as runs of consecutive integers: ``[100, 101, 102, 7]`` -> ``"7, 100-102"``."""
    ordered = sorted(set(seeds))
    parts = []
    start = previous = None
    for seed in [*ordered, None]:
        if seed is not None and previous is not None and seed == previous + 1:
            previous = seed
            continue
        if start is not None:
            parts.append(str(start) if start == previous else f"{start}-{previous}")
        start = previous = seed
    return ", ".join(parts)


def write_campaign(config: Mapping[str, Any], path: str | os.PathLike[str]) -> Path:
    """Write a campaign configuration as a TOML file (replacing ``path`` whole, never
    leaving it half-written); returns the path."""
    target = Path(path)
    text = campaign_toml(config)
    handle, staging = tempfile.mkstemp(prefix=f".{target.name}-", dir=target.parent or ".")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(staging, target)
    except BaseException:
        Path(staging).unlink(missing_ok=True)
        raise
    return target


def campaign_toml(config: Mapping[str, Any]) -> str:
    """A campaign configuration as TOML text that reads back to the same values: plain
    keys first, then one ``[table]`` per table-valued key; list items one per line."""
    lines = ["# written by `dynbo tune`: the evaluation campaign with tuned settings"]
    tables = []
    for key, value in config.items():
        if isinstance(value, Mapping):
            tables.append((key, value))
        else:
            lines.append(f"{_toml_key(key)} = {_toml_value(value, top=True)}")
    for key, table in tables:
        lines += ["", f"[{_toml_key(key)}]"]
        lines += [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------- helpers
def _policy_entries(config: Mapping[str, Any]) -> list[tuple[str, dict[str, Any], str | None]]:
    """The campaign's policy entries: its ``policies``, else its suites' policies (those
    this version provides, each once, as the campaign runs them)."""
    if "policies" in config:
        return _entries(config["policies"], "policies")
    from dynbo import benchmarks as registry
    from dynbo.harness.references import reference_names
    from dynbo.policies import available

    known = set(available()) | set(reference_names())
    suites = config.get("suites", [])
    names: list[str] = []
    for suite in [suites] if isinstance(suites, str) else suites:
        names += [p for p in registry.suite(suite).policies if p in known and p not in names]
    return [(name, {}, None) for name in names]


def _sobol_candidates(tunables: Mapping[str, Any], budget: int, seed: int) -> tuple[dict, ...]:
    """Candidate 0 (``{}``: the entry's own settings), then up to ``budget - 1`` distinct
    settings at the points of a scrambled Sobol sequence over ``tunables``."""
    candidates: list[dict[str, Any]] = [{}]
    if not tunables or budget == 1:
        return tuple(candidates)
    from scipy.stats import qmc

    wanted = budget - 1
    # a power of two of points keeps the Sobol sequence's balance (and scipy quiet)
    draws = 1 << max(0, math.ceil(math.log2(wanted * _DRAWS_PER_CANDIDATE)))
    points = qmc.Sobol(len(tunables), scramble=True, seed=seed).random(draws)
    seen: set[str] = set()
    for point in points:
        settings = {
            name: tunable.value(float(u)) for (name, tunable), u in zip(tunables.items(), point)
        }
        key = json.dumps(settings, sort_keys=True)
        if key not in seen:
            seen.add(key)
            candidates.append(settings)
        if len(candidates) == budget:
            break
    return tuple(candidates)


def _candidate_entry(entry: _Entry, index: int) -> dict[str, Any]:
    options = {**entry.options, **entry.candidates[index]}
    return {"name": entry.name, "options": options, "label": entry.candidate_label(index)}


def _evaluation_config(plan: TuningPlan, choices: Sequence[EntryChoice]) -> dict[str, Any]:
    """The tuned campaign: the plan's configuration with each policy entry's options and
    ``tuned`` string (reference players as they were listed)."""
    config = copy.deepcopy(plan.config)
    listed = config.get("policies")
    originals = list(listed) if isinstance(listed, list) else []
    by_position = {entry.position: choice for entry, choice in zip(plan.entries, choices)}
    policies: list[Any] = []
    count = len(plan.entries) + len(plan.untouched)
    names = _policy_entries(plan.config)
    for position in range(count):
        choice = by_position.get(position)
        if choice is None:  # a reference player named among the policies
            policies.append(originals[position] if originals else names[position][0])
            continue
        _, _, label = names[position]
        entry: dict[str, Any] = {"name": choice.policy}
        if choice.options:
            entry["options"] = choice.options
        if label is not None:
            entry["label"] = label
        entry["tuned"] = choice.provenance
        policies.append(entry)
    config["policies"] = policies
    return config


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def _toml_key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else _toml_string(key)


def _toml_string(text: str) -> str:
    # JSON's escapes are TOML's basic-string escapes; non-ASCII stays as it is (TOML has
    # no surrogate pairs, which ensure_ascii would write)
    return json.dumps(text, ensure_ascii=False)


def _toml_value(value: Any, *, top: bool = False) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, Mapping):
        inner = ", ".join(f"{_toml_key(str(k))} = {_toml_value(v)}" for k, v in value.items())
        return "{" + inner + "}"
    if isinstance(value, (list, tuple)):
        items = [_toml_value(v) for v in value]
        if top and any(isinstance(v, Mapping) for v in value):
            return "[\n" + "".join(f"    {item},\n" for item in items) + "]"
        return "[" + ", ".join(items) + "]"
    raise ValueError(f"a campaign value must be a TOML value, got {value!r}")
