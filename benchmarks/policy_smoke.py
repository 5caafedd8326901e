"""Every policy x every clock, 200 iterations of the quick suite's Eggholder (JSON).

The smoke check behind issue 9's acceptance: each policy of ``dynbo list`` runs
``--iterations`` loop iterations of the ``quick`` suite's first benchmark under the
step, modeled, measured and wall clocks (``Protocol.max_iterations`` stops a run there;
the horizon is long enough not to stop it first), and its state is saved and restored
mid-run: a policy rebuilt from ``state_dict`` after half the iterations must propose
exactly the same next query as the original. Prints one row per (policy, clock) with the
status, the number of iterations, the final dataset size, the events the policy
reported (resets, removals) and whether the round trip matched; the exit status is 1 if
any run failed or any round trip differed.

    python benchmarks/policy_smoke.py [--iterations 200] [--policies ...] [--clocks ...]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from dynbo.benchmarks.registry import get as make_benchmark  # noqa: E402
from dynbo.benchmarks.registry import suite  # noqa: E402
from dynbo.harness import Protocol, RunSpec, execute  # noqa: E402
from dynbo.policies import Policy, available, policy_class  # noqa: E402
from dynbo.policies import make as make_policy  # noqa: E402

CLOCKS = ("step", "modeled", "measured", "wall")
#: the modeled clock charges R(n) = 0.1 s per iteration; every clock adds c = 0.1 s
RESPONSE_TIME, COST = (0.1, 0.0, 0.0, 0.0), 0.1


def round_trip_matches(policy: Policy, t: float) -> bool:
    """Whether a copy rebuilt from ``state_dict`` proposes the same query at ``t``."""
    clone = type(policy).from_state_dict(policy.state_dict())
    a, b = policy.suggest(t), clone.suggest(t)
    return bool(np.array_equal(a.x, b.x) and a.t == b.t)


def smoke(name: str, clock: str, iterations: int) -> dict:
    entry = suite("quick").entries[0]
    # long enough that max_iterations, not the horizon, ends the run
    horizon = 10.0 * iterations if clock == "step" else 1e6
    spec = RunSpec(
        benchmark=entry.benchmark,
        benchmark_options={**entry.options, "horizon": horizon, "cost": COST},
        policy=name,
        seed=0,
        # ABO asks to wait l_T / 3 (under the step clock too, skipping steps); with the
        # long horizon used here its l_T prior is long too: cap the look-ahead at 1 unit
        policy_options={"max_lookahead": 1.0} if name == "abo" else {},
        protocol=Protocol(
            clock=clock,
            warmup=5,
            warmup_fraction=0.0 if clock != "step" else 1.0 / 40.0,
            response_time=RESPONSE_TIME if clock == "modeled" else None,
            max_iterations=iterations,
        ),
    )
    started = time.perf_counter()
    result = execute(spec)
    loop = [r for r in result.iterations if not r["warmup"]]
    row = {
        "policy": name,
        "clock": clock,
        "status": result.status,
        "iterations": len(loop),
        "final_dataset_size": loop[-1]["dataset_size"] if loop else None,
        "resets": int(sum(r["reset"] for r in loop)),
        "removed": int(sum(r["removed"] for r in loop)),
        "seconds": round(time.perf_counter() - started, 2),
    }
    if result.status != "done":
        row["error"] = result.error
    return row


def round_trip(name: str, iterations: int) -> bool:
    """Drive the policy ``iterations // 2`` steps on the objective, then compare a clone."""
    entry = suite("quick").entries[0]
    bench = make_benchmark(entry.benchmark, **{**entry.options, "horizon": float(iterations)})
    known = {"noise_variance": bench.noise_variance} if policy_class(name).known_noise else {}
    policy = make_policy(name, bounds=bench.bounds, seed=0, **known)
    rng = np.random.default_rng(0)
    for k in range(1, iterations // 2 + 1):
        query = policy.suggest(float(k))
        policy.observe(query.x, float(k), bench.observe(query.x, float(k), rng))
    return round_trip_matches(policy, float(iterations // 2 + 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--policies", nargs="+", default=None)
    parser.add_argument(
        "--clocks", nargs="*", default=list(CLOCKS), help="clocks to run (none: round trips only)"
    )
    args = parser.parse_args()
    rows = []
    ok = True
    for name in args.policies or available():
        for clock in args.clocks:
            row = smoke(name, clock, args.iterations)
            ok &= row["status"] == "done" and row["iterations"] == args.iterations
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
        matched = round_trip(name, args.iterations)
        ok &= matched
        rows.append({"policy": name, "state_dict_round_trip_matches": matched})
    print(json.dumps({"benchmark": "policy_smoke", "ok": ok, "rows": rows}, indent=2))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
