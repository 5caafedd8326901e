"""Small benchmarks and policies for harness tests."""

from __future__ import annotations

import time

import numpy as np

from dynbo.benchmarks.base import Benchmark
from dynbo.policies import GPUCB, register


class MovingPeak(Benchmark):
    """f(x, t) = -(x - c(t))^2 on [0, 1], c(t) = 0.5 + 0.4 sin(t / 10); max 0 at c(t)."""

    def __init__(self, horizon: float = 20.0, cost: float = 0.5, fail_after: float | None = None):
        self.name = "moving-peak"
        self.dim = 1
        self.bounds = np.array([[0.0], [1.0]])
        self.horizon = horizon
        self.cost = cost
        self.noise_variance = 1e-4
        self.fail_after = fail_after

    def centre(self, t):
        return 0.5 + 0.4 * np.sin(np.asarray(t) / 10.0)

    def f(self, x, t):
        if self.fail_after is not None and np.any(np.asarray(t) > self.fail_after):
            raise RuntimeError("the instrument is offline")
        x = np.asarray(x, dtype=float).reshape(-1, 1)
        return -((x[:, 0] - self.centre(t)) ** 2)

    def optimum(self, t):
        return np.array([float(self.centre(t))]), 0.0


@register
class SlowGPUCB(GPUCB):
    """GP-UCB that wastes ``delay`` seconds per iteration (tests of the measured clock)."""

    name = "test-slow-gp-ucb"

    def __init__(self, bounds, *, delay: float = 0.2, **kwargs):
        super().__init__(bounds, **kwargs)
        self.delay = delay

    def _clean(self, t, diag):
        time.sleep(self.delay)
