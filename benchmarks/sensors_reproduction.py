"""Intel Lab sensor selection: Bogunovic et al. Fig. 4 / ET-GP-UCB Fig. 3 (prints JSON).

The ``sensors`` suite: arms = sensors, the empirical covariance of the training days as
the known kernel, the test days as the objective (normalized with the training mean and
standard deviation), step clock, sigma^2 = 0.01, beta_t = 0.8 log(0.4 t), TV-GP-UCB
eps = 0.03, R-GP-UCB N = 15, ET-GP-UCB delta_B = 0.1 (``dynbo.benchmarks.registry.
known_kernel_options``). Both tables: 30-minute (50 sensors, T = 95) and 10-minute
(52 motes, T = 143). Prints, per table and policy, the mean and standard error over seeds
of the final average regret ``R_T / T`` (normalized units; ``celsius`` multiplies by the
training standard deviation), and whether TV-GP-UCB and ET-GP-UCB end below GP-UCB;
``--figure`` writes the running-average regret plot.

    python benchmarks/sensors_reproduction.py [--seeds 20] [--workers 2] [--store FILE]
        [--figure PNG]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

os.environ.setdefault("OMP_NUM_THREADS", "1")

from regret_summary import plot_curves, summarize  # noqa: E402

import dynbo.benchmarks as benchmarks  # noqa: E402
from dynbo.harness import Store, build_campaign, run_campaign  # noqa: E402

POLICIES = ("gp-ucb", "r-gp-ucb", "tv-gp-ucb", "et-gp-ucb")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--store", default=None, help="SQLite store (default: a temporary file)")
    parser.add_argument("--figure", default=None)
    args = parser.parse_args()
    config = {"name": "sensors-reproduction", "suites": ["sensors"], "seeds": args.seeds}
    campaign = build_campaign(config)
    path = args.store or os.path.join(tempfile.mkdtemp(), "sensors.sqlite")
    with Store(path) as store:
        run_campaign(campaign, store, workers=args.workers, progress=sys.stderr.isatty())
        frame = store.iterations_frame(campaign.campaign_id)
    results, curves = summarize(frame)
    suite = benchmarks.suite("sensors")
    checks = {}
    for label, per_policy in results.items():
        scale = suite.entry(label).build().celsius_scale
        for summary in per_policy.values():
            summary["final_average_regret_celsius"] = summary["final_average_regret_mean"] * scale
        mean = {p: s["final_average_regret_mean"] for p, s in per_policy.items()}
        checks[label] = {
            "tv_below_gp_ucb": mean["tv-gp-ucb"] < mean["gp-ucb"],
            "et_below_gp_ucb": mean["et-gp-ucb"] < mean["gp-ucb"],
        }
    print(
        json.dumps(
            {
                "benchmark": "temperature_sensors",
                "settings": {
                    "noise_variance": 0.01,
                    "beta": "0.8 log(0.4 t)",
                    "tv_gp_ucb_epsilon": 0.03,
                    "r_gp_ucb_reset_every": 15,
                    "delta_B": 0.1,
                    "seeds": args.seeds,
                },
                "results": results,
                "below_gp_ucb": checks,
            },
            indent=2,
        )
    )
    if args.figure:
        plot_curves(curves, POLICIES, args.figure)


if __name__ == "__main__":
    main()
