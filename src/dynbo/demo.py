"""A short GP-UCB demo on a moving-peak function (prints its regret).

python -m dynbo.demo [--iterations 40] [--seed 0]
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from dynbo.policies import make


def moving_peak(x: np.ndarray, t: float) -> float:
    """A Gaussian bump on [0, 1]^2 whose centre circles around (0.5, 0.5) every 60 s."""
    centre = 0.5 + 0.3 * np.array([np.cos(2 * np.pi * t / 60), np.sin(2 * np.pi * t / 60)])
    return float(np.exp(-np.sum((x - centre) ** 2) / 0.05))


def run(policy_name: str, iterations: int, seed: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    policy = make(
        policy_name, bounds=[[0.0, 0.0], [1.0, 1.0]], seed=seed, raw_samples=256, restarts=5
    )
    for t in np.sort(rng.uniform(0, 1.5, 15)):
        x = rng.uniform(0, 1, 2)
        policy.observe(x, t, moving_peak(x, t) + 0.05 * rng.standard_normal())
    regrets = []
    t = 1.5
    for _ in range(iterations):
        query = policy.suggest(t)
        y = moving_peak(query.x, query.t)
        regrets.append(1.0 - y)  # the peak value is 1 at every time
        policy.observe(query.x, query.t, y + 0.05 * rng.standard_normal())
        t += 1.5
    return {
        "policy": policy_name,
        "iterations": iterations,
        "average_regret": float(np.mean(regrets)),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="GP-UCB demo on a moving peak")
    parser.add_argument("--iterations", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    for name in ("gp-ucb", "st-gp-ucb"):
        print(json.dumps(run(name, args.iterations, args.seed)))


if __name__ == "__main__":
    main()
