"""Rerun a paper's reproduction with reference players and summarize it as JSON.

Runs (resumably, into ``--store``) the campaign of ``dynbo reproduce NAME`` with the
reference players ``random`` and ``oracle-lag`` added, optionally under another clock
(``--clock modeled``: ``R(n)`` = ``--response-time``, replayable) and seed count, then
writes one JSON file: per benchmark and column the mean and standard error of the
average regret per query and of the time-averaged regret, the queries and the
additional queries (SparQ's re-evaluations), the OVERALL
and SCORE rows (``docs/reports.md``), the paper's numbers beside, and Kendall's tau
between the paper's OVERALL ranking of its policies and the measured one.

    python benchmarks/reproduction_rerun.py bolt-table3 --seeds 3 --clock modeled \
        --workers 2 --store results/bolt-table3-modeled.sqlite \
        --out docs/results/bolt_table3_modeled.json
    python benchmarks/reproduction_rerun.py w-sparq-rkhs --seeds 3 --equal-exploration 2.47 \
        --workers 2 --store results/rkhs-equal.sqlite --out docs/results/rkhs_equal_exploration.json

Tuned settings (``docs/tuning.md``): ``--tuning-seeds`` and ``--budget`` first run
``dynbo tune`` on the campaign (into ``--tuning-store``, resumably; the tuning seeds must
be apart from the evaluation seeds), then evaluate the chosen settings; the JSON gets a
``tuning`` block (every candidate's settings and score, the choice). ``--campaign FILE``
evaluates a campaign file instead of the reproduction's own (e.g. the one ``dynbo tune
--out`` wrote); the paper's numbers still come from NAME, and ``--seeds`` and the
reference players still apply.

    python benchmarks/reproduction_rerun.py w-sparq-rkhs --seeds 10 \
        --tuning-seeds 100-102 --budget 4 --tuning-store results/rkhs-tuning.sqlite \
        --tuned-campaign results/rkhs-tuned.toml --workers 1 \
        --store results/rkhs-tuned.sqlite --out docs/results/rkhs_tuned.json

A paper whose result is a figure prints no OVERALL ranking; ``--stated-ranking`` gives
the ordering its text states (levels best first, ``;`` between levels, ``,`` between
tied policies) and ``--stated-ranking-source`` where it is stated, and the JSON gets
Kendall's tau-b between that ordering and the measured OVERALL (``kendall_tau_stated``;
``--stated-ranking-row LABEL`` compares with one benchmark's row instead, for a paper
whose statement is about that benchmark alone) and with every row of the table
(``kendall_tau_stated_rows``). ``--per-run`` adds every run's regrets, queries and
dataset sizes (``per_run``), for claims about the spread over seeds.

    python benchmarks/reproduction_rerun.py et-gp-ucb-cartpole --workers 1 \
        --stated-ranking "et-gp-ucb;ui-tvbo;r-gp-ucb,tv-gp-ucb" \
        --stated-ranking-source "..." --stated-ranking-row cartpole-sudden --per-run \
        --store results/control-rerun.sqlite --out docs/results/control_rerun.json
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time

from scipy.stats import kendalltau

from dynbo import reproductions
from dynbo.cli.commands.tune import seed_list
from dynbo.harness import Store
from dynbo.harness.campaign import (
    DEFAULT_RESPONSE_TIME,
    build_campaign,
    load_campaign,
    run_campaign,
)
from dynbo.harness.tune import tune, write_campaign
from dynbo.report.tables import OVERALL, SCORE, build_table


def table_json(table) -> dict:  # noqa: ANN001 - a Table
    return {
        row: {
            column: [cell.mean, None if cell.se != cell.se else cell.se, cell.seeds]
            for (r, column), cell in table.cells.items()
            if r == row
        }
        for row in table.rows
    }


def timing(runs: list[dict], estimated: float) -> dict:
    """Per policy: median wall seconds of a run and of a query (the run's wall time over
    its queries), as stored; and the whole campaign's stored wall time beside the
    ``reproduce --dry-run`` estimate of it (one worker)."""
    per_policy: dict[str, dict[str, list[float]]] = {}
    for run in runs:
        if run["status"] != "done" or run["wall_seconds"] is None:
            continue
        entry = per_policy.setdefault(run["policy"], {"run": [], "query": [], "queries": []})
        queries = run["summary"].get("queries") or 0
        entry["run"].append(run["wall_seconds"])
        entry["queries"].append(queries)
        if queries:
            entry["query"].append(run["wall_seconds"] / queries)
    return {
        "note": "wall seconds as stored: measured on the machine (and under the load) "
        "that ran the campaign",
        "per_policy": {
            policy: {
                "median_run_seconds": statistics.median(v["run"]),
                "median_query_seconds": statistics.median(v["query"]) if v["query"] else None,
                "queries_range": [min(v["queries"]), max(v["queries"])],
                "runs": len(v["run"]),
            }
            for policy, v in sorted(per_policy.items())
        },
        "stored_wall_seconds_total": sum(
            r["wall_seconds"] for r in runs if r["wall_seconds"] is not None
        ),
        "dry_run_estimate_seconds": estimated,
    }


def campaign_config(args: argparse.Namespace) -> tuple[dict, dict | None]:
    """The campaign to run (the reproduction's, or ``--campaign``'s, with the command's
    overrides and the reference players) and the paper's numbers (``None``: a figure)."""
    config, paper = reproductions.load(args.name)
    if args.campaign is not None:
        config = dict(load_campaign(args.campaign).config)
    config["references"] = ["random", "oracle-lag"]
    if args.seeds is not None:
        config["seeds"] = args.seeds
    if args.equal_exploration is not None:
        config["equal_exploration"] = args.equal_exploration
    if args.clock is not None:
        protocol = config.setdefault("protocol", {})
        protocol["clock"] = args.clock
        if args.clock == "modeled":
            protocol["response_time"] = args.response_time
    return config, paper


def tuning_json(result) -> dict:  # noqa: ANN001 - a TuningResult
    """Every candidate's settings and score, and the choice, per policy entry."""
    return {
        "tuning_seeds": list(result.campaign.config["seeds"]),
        "tuning_runs": result.outcome.total,
        "tuning_failed": result.outcome.failed,
        "entries": [
            {
                "heading": choice.heading,
                "policy": choice.policy,
                "tuned": list(choice.tuned_names),
                "candidates": [
                    {"settings": settings, "score": score if score != float("inf") else None}
                    for settings, score in zip(choice.candidates, choice.scores)
                ],
                "chosen": choice.chosen,
                "options": choice.options,
                "provenance": choice.provenance,
            }
            for choice in result.choices
        ],
    }


def stated_levels(text: str) -> list[list[str]]:
    """``"a,b;c"`` -> ``[["a", "b"], ["c"]]`` (``argparse`` type)."""
    levels = [[p.strip() for p in level.split(",") if p.strip()] for level in text.split(";")]
    if not all(levels) or len(levels) < 2:
        raise argparse.ArgumentTypeError(
            f"expected two or more levels such as 'a,b;c', got {text!r}"
        )
    return levels


def stated_tau(levels: list[list[str]], measured: dict) -> dict:
    """Kendall's tau-b between a stated ordering (levels, ties inside a level) and the
    measured OVERALL means of the same policies (``measured``: policy -> mean)."""
    rank = {p: i for i, level in enumerate(levels) for p in level}
    common = [p for p in rank if p in measured]
    tau = kendalltau([rank[p] for p in common], [measured[p] for p in common])
    return {
        "levels": levels,
        "policies": common,
        "tau_b": float(tau.statistic),
        "p_value": float(tau.pvalue),
    }


#: the stored summary fields ``--per-run`` copies into the JSON, per run
PER_RUN_FIELDS = (
    "average_regret",
    "time_averaged_regret",
    "queries",
    "final_dataset_size",
    "max_dataset_size",
)


def per_run(runs: list[dict]) -> list[dict]:
    """One row per finished run: its row label, policy, seed, :data:`PER_RUN_FIELDS`
    and wall seconds, ordered by label, policy and seed."""
    rows = [
        {
            "label": run["label"],
            "policy": run["policy"],
            "seed": run["seed"],
            **{field: run["summary"].get(field) for field in PER_RUN_FIELDS},
            "wall_seconds": run["wall_seconds"],
        }
        for run in runs
        if run["status"] == "done"
    ]
    return sorted(rows, key=lambda r: (r["label"], r["policy"], r["seed"]))


def row_means(table, row: str) -> dict:  # noqa: ANN001 - a Table
    """``column -> mean`` of one row of a table."""
    return {column: cell.mean for (r, column), cell in table.cells.items() if r == row}


def stated_by_row(levels: list[list[str]], table, row: str | None) -> tuple[dict, dict]:  # noqa: ANN001
    """Kendall's tau-b of a stated ordering against the headline row (``row``, else
    OVERALL, else the only row) and against every row of ``table``.

    Raises:
        ValueError: ``row`` is not a row of the table.
    """
    if row is None:
        row = OVERALL if OVERALL in table.rows else table.rows[0]
    elif row not in table.rows:
        raise ValueError(f"--stated-ranking-row {row!r} is not a row; rows: {list(table.rows)}")
    every = {r: stated_tau(levels, row_means(table, r)) for r in table.rows}
    return {**every[row], "row": row}, every


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", help="a reproduction (dynbo reproduce --help)")
    parser.add_argument("--seeds", type=int, help="seed count (default: the paper's)")
    parser.add_argument("--clock", help="replace the reproduction's clock")
    parser.add_argument(
        "--response-time",
        type=float,
        nargs=4,
        default=list(DEFAULT_RESPONSE_TIME),
        help="R(n) cubic coefficients for --clock modeled",
    )
    parser.add_argument(
        "--equal-exploration",
        type=float,
        help="one multiplier of sigma for every policy (the campaign key equal_exploration)",
    )
    parser.add_argument(
        "--campaign",
        help="a campaign TOML file to evaluate instead of the reproduction's own "
        "(e.g. the one `dynbo tune --out` wrote)",
    )
    parser.add_argument(
        "--tuning-seeds",
        type=seed_list,
        help="tune every policy first (dynbo tune) on these seeds, e.g. 100-104",
    )
    parser.add_argument("--budget", type=int, help="candidate settings per policy (tuning)")
    parser.add_argument("--tuning-store", help="the tuning runs' store (required to tune)")
    parser.add_argument("--tuned-campaign", help="also write the tuned campaign (TOML)")
    parser.add_argument(
        "--stated-ranking",
        type=stated_levels,
        help="for a paper without a table: the ordering its text states, best level "
        "first, levels split by ';' and tied policies by ',' (e.g. 'a,b;c,d'); the JSON "
        "gets Kendall's tau-b between it and the measured OVERALL",
    )
    parser.add_argument("--stated-ranking-source", help="where the paper states it")
    parser.add_argument(
        "--stated-ranking-row",
        help="the table row the stated ordering is compared with in kendall_tau_stated "
        "(default: OVERALL, or the only benchmark's row)",
    )
    parser.add_argument(
        "--per-run",
        action="store_true",
        help="also write every run's regrets, queries and dataset sizes (per_run)",
    )
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--store", required=True)
    parser.add_argument("--out", required=True, help="the JSON file to write")
    args = parser.parse_args()
    tuning_args = (args.tuning_seeds, args.budget, args.tuning_store)
    if any(a is not None for a in tuning_args) and None in tuning_args:
        parser.error("--tuning-seeds, --budget and --tuning-store go together")
    config, paper = campaign_config(args)
    started = time.time()
    tuning = None
    if args.tuning_seeds is not None:
        with Store(args.tuning_store) as store:
            tuned = tune(
                config,
                store,
                tuning_seeds=args.tuning_seeds,
                budget=args.budget,
                workers=args.workers,
                progress=False,
            )
            tuning_runs = store.runs(tuned.outcome.campaign_id)
        config = tuned.config
        tuning = tuning_json(tuned)
        tuning["wall_seconds_this_call"] = time.time() - started
        tuning["stored_wall_seconds_total"] = sum(
            r["wall_seconds"] for r in tuning_runs if r["wall_seconds"] is not None
        )
        if args.tuned_campaign is not None:
            write_campaign(config, args.tuned_campaign)
    campaign = build_campaign(config)
    rows = {spec.display_benchmark for spec in campaign.specs} | {OVERALL}
    if args.stated_ranking_row is not None and args.stated_ranking_row not in rows:
        parser.error(f"--stated-ranking-row must be one of {sorted(rows)}")
    with Store(args.store) as store:
        outcome = run_campaign(campaign, store, workers=args.workers, progress=False)
        runs = store.runs(outcome.campaign_id)
    tables = {
        metric: build_table(runs, metric, campaign.config)
        for metric in ("average_regret", "time_averaged_regret", "queries", "additional_queries")
    }
    result = {
        "script": "benchmarks/reproduction_rerun.py",
        "reproduction": args.name,
        "date": time.strftime("%Y-%m-%d"),
        "machine": {"python": platform.python_version(), "processor": platform.machine()},
        "campaign": {k: v for k, v in campaign.config.items()},
        "runs": outcome.total,
        "failed": outcome.failed,
        "failures": [message.splitlines()[0] for _, message in outcome.failures],
        "wall_seconds_this_call": time.time() - started,
        "tables": {metric: table_json(table) for metric, table in tables.items()},
    }
    if tuning is not None:
        result["tuning"] = tuning
    if paper is not None and OVERALL in paper.get("table", {}):
        published = paper["table"][OVERALL]
        measured = tables["average_regret"].cells
        common = [
            p
            for p in paper.get("policies", published)
            if p in published and (OVERALL, p) in measured
        ]
        tau = kendalltau(
            [published[p][0] for p in common], [measured[(OVERALL, p)].mean for p in common]
        )
        result["paper"] = paper
        result["kendall_tau_overall"] = {
            "policies": common,
            "tau": float(tau.statistic),
            "p_value": float(tau.pvalue),
        }
    else:
        result["kendall_tau_overall"] = None
        result["kendall_tau_note"] = (
            "the paper prints no table of numbers (its result is a figure), so there is "
            "no published OVERALL ranking to compare with"
        )
    if args.stated_ranking is not None:
        headline, every = stated_by_row(
            args.stated_ranking, tables["average_regret"], args.stated_ranking_row
        )
        result["kendall_tau_stated"] = {**headline, "source": args.stated_ranking_source}
        result["kendall_tau_stated_rows"] = every
    if args.per_run:
        result["per_run"] = per_run(runs)
    result["score_row"] = SCORE in tables["average_regret"].rows
    result["timing"] = timing(runs, reproductions.estimate(campaign).run_seconds)
    text = json.dumps(result, indent=1, default=str)
    with open(args.out, "w", encoding="utf-8") as handle:
        handle.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
