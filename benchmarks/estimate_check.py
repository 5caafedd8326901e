"""The ``reproduce --dry-run`` estimate against the stored time of the reruns (JSON).

For each rerun JSON under ``docs/results/`` written by ``benchmarks/reproduction_rerun.py``
(its ``campaign`` and its ``timing``), the current :func:`dynbo.reproductions.estimate` of
the same campaign (one worker) beside the seconds its runs took as stored, and the ratio.
The stored seconds were measured on the machine, and under the load, that ran each
campaign; the estimate is rough by design (``docs/reproductions.md``).

    python benchmarks/estimate_check.py [--out docs/results/estimate_check.json]
"""

from __future__ import annotations

import argparse
import json
import os

from dynbo import reproductions
from dynbo.harness.campaign import build_campaign

RERUNS = ("bogunovic_fig2", "sensors_rerun", "rkhs_tuned", "control_rerun", "bolt_table3_600s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", default="docs/results")
    parser.add_argument("--out", default="docs/results/estimate_check.json")
    args = parser.parse_args()
    rows = {}
    for name in RERUNS:
        path = os.path.join(args.results, f"{name}.json")
        if not os.path.exists(path):
            continue
        with open(path) as handle:
            rerun = json.load(handle)
        campaign = build_campaign(rerun["campaign"])
        estimate = reproductions.estimate(campaign)
        stored = float(rerun["timing"]["stored_wall_seconds_total"])
        rows[name] = {
            "runs": len(campaign.specs),
            "clock": sorted({s.protocol.clock for s in campaign.specs}),
            "stored_run_seconds": stored,
            "estimate_run_seconds": estimate.run_seconds,
            "estimate_over_stored": estimate.run_seconds / stored,
            "estimate_when_the_rerun_ran": rerun["timing"].get("dry_run_estimate_seconds"),
        }
    output = {
        "script": "benchmarks/estimate_check.py",
        "constants": {
            "QUERY_SECONDS": reproductions.QUERY_SECONDS,
            "CONTINUOUS_OVERHEAD": reproductions.CONTINUOUS_OVERHEAD,
            "STEP_SECONDS": reproductions.STEP_SECONDS,
            "STEP_OVERHEAD": reproductions.STEP_OVERHEAD,
            "REFERENCE_QUERY_SECONDS": reproductions.REFERENCE_QUERY_SECONDS,
        },
        "reruns": rows,
    }
    text = json.dumps(output, indent=2)
    print(text)
    with open(args.out, "w") as handle:
        handle.write(text + "\n")


if __name__ == "__main__":
    main()
