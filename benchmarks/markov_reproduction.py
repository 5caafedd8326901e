"""Within-model reproduction: Bogunovic et al. Sec. 5.1 / ET-GP-UCB Fig. 2 (JSON).

GP Markov-chain objectives on [0, 1]^2 (50 x 50 grid, SE kernel, l = 0.2), step clock,
T = 400, eps in {0.01, 0.03, 0.05}, noise variance 0.02 and beta_t = 0.4 log(4 t)
(Brunzema et al., Table 4); every policy knows the true prior, TV-GP-UCB the true eps,
R-GP-UCB's block is N = ceil(min(T, 12 eps^(-1/4))) = 38, 29, 26, ET-GP-UCB uses
delta_B = 0.1 (the markov suite's settings: ``dynbo.benchmarks.registry.
within_model_options``). Each seed draws a new function. Prints, per eps and policy,
the mean and standard error over seeds of the final average regret ``R_T / T``, and
the papers' orderings checked at eps = 0.03; ``--figure`` writes the regret-vs-step
plot (mean average regret ``R_t / t`` per step).

    python benchmarks/markov_reproduction.py [--seeds 20] [--workers 2] [--epsilons 0.01 0.03 0.05]
        [--store FILE (resumable)] [--figure PNG]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile

os.environ.setdefault("OMP_NUM_THREADS", "1")


from regret_summary import plot_curves, summarize  # noqa: E402

from dynbo.benchmarks.registry import within_model_options  # noqa: E402
from dynbo.harness import Store, build_campaign, run_campaign  # noqa: E402
from dynbo.harness.campaign import Campaign  # noqa: E402

POLICIES = ("gp-ucb", "r-gp-ucb", "tv-gp-ucb", "et-gp-ucb")
EPSILONS = (0.01, 0.03, 0.05)
NOISE, HORIZON, C1 = 0.02, 400, 0.4


def campaign_config(seeds: int, epsilons: tuple[float, ...] = EPSILONS) -> dict:
    benchmarks = []
    for eps in epsilons:
        benchmarks.append(
            {
                "name": "markov",
                "label": f"eps{eps:g}",
                "options": {
                    "kernel": "se",
                    "epsilon": eps,
                    "noise_variance": NOISE,
                    "horizon": HORIZON,
                },
            }
        )
    return {
        "name": "markov-within-model",
        "benchmarks": benchmarks,
        "seeds": seeds,
        "protocol": {"clock": "step", "warmup": 0, "horizon": HORIZON},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--store", default=None, help="SQLite store (default: a temporary file)")
    parser.add_argument("--figure", default=None)
    parser.add_argument("--epsilons", type=float, nargs="+", default=list(EPSILONS))
    args = parser.parse_args()
    config = campaign_config(args.seeds, tuple(args.epsilons))
    # the policies' settings depend on the entry's eps (the markov suite's rule)
    base = build_campaign({**config, "policies": list(POLICIES)})
    specs = []
    for spec in base.specs:
        eps = float(spec.benchmark_options["epsilon"])
        options = within_model_options("se", eps, NOISE, HORIZON, c1=C1)[spec.policy]
        specs.append(dataclasses.replace(spec, policy_options=options))
    campaign = Campaign(name=base.name, specs=tuple(specs), config=config)
    path = args.store or os.path.join(tempfile.mkdtemp(), "markov.sqlite")
    with Store(path) as store:
        run_campaign(campaign, store, workers=args.workers, progress=sys.stderr.isatty())
        frame = store.iterations_frame(campaign.campaign_id)
    results, curves = summarize(frame)
    at = results.get("eps0.03", {})

    def mean(p: str) -> float:
        return at[p]["final_average_regret_mean"]

    checks = (
        {
            "tv_below_gp_ucb": mean("tv-gp-ucb") < mean("gp-ucb"),
            "et_below_gp_ucb": mean("et-gp-ucb") < mean("gp-ucb"),
            "tv_below_r_gp_ucb": mean("tv-gp-ucb") < mean("r-gp-ucb"),
        }
        if at
        else {}
    )
    print(
        json.dumps(
            {
                "benchmark": "markov_within_model",
                "settings": {
                    "kernel": "se",
                    "lengthscale": 0.2,
                    "noise_variance": NOISE,
                    "horizon": HORIZON,
                    "beta": f"{C1} log(4 t)",
                    "seeds": args.seeds,
                },
                "results": results,
                "orderings_at_eps_0.03": checks,
            },
            indent=2,
        )
    )
    if args.figure:
        plot_curves(curves, POLICIES, args.figure, lambda label: label.replace("eps", "eps = "))


if __name__ == "__main__":
    main()
