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
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time

from scipy.stats import kendalltau

from dynbo import reproductions
from dynbo.harness import Store
from dynbo.harness.campaign import DEFAULT_RESPONSE_TIME, build_campaign, run_campaign
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
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--store", required=True)
    parser.add_argument("--out", required=True, help="the JSON file to write")
    args = parser.parse_args()
    config, paper = reproductions.load(args.name)
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
    campaign = build_campaign(config)
    started = time.time()
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
    result["score_row"] = SCORE in tables["average_regret"].rows
    result["timing"] = timing(runs, reproductions.estimate(campaign).run_seconds)
    text = json.dumps(result, indent=1, default=str)
    with open(args.out, "w", encoding="utf-8") as handle:
        handle.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
