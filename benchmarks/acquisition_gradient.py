"""Milliseconds per acquisition call with its gradient: closed form against autograd (JSON).

The box search evaluates the UCB and its gradient at the unconverged starts once per
L-BFGS-B step, tens to hundreds of times per iteration. This script times one such
call on a fitted GP (Matern-5/2 x Matern-3/2, ``d = 2``, data from the drifting test
function of ``wdbo_iteration.py``) at dataset sizes ``n`` and batch sizes ``m``: the
closed form (``UpperConfidenceBound.value_and_gradient``) and autograd through the call,
for the GP and for W-GP-UCB's sandwich width. It reports the median of ``--repeats``
timed blocks of ``--calls`` calls after a warm-up block, and the largest differences
between the two (they must agree to rounding).

    python benchmarks/acquisition_gradient.py [--sizes 50 200 800] [--batch 1 10] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from functools import partial

# importing it pins the thread pools (from --threads) before NumPy and torch load
from wdbo_iteration import machine_record, objective  # isort: skip

import numpy as np  # noqa: E402
import torch  # noqa: E402

from dynbo.acquisition import UpperConfidenceBound  # noqa: E402
from dynbo.models import (  # noqa: E402
    Hyperparameters,
    KernelSpec,
    SpatioTemporalGP,
    WeightedRidgeView,
)


def model(n: int, seed: int, sandwich: bool) -> tuple[object, float | None]:
    """A GP on ``n`` noisy observations (or its weighted ridge view) and the query time."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 1, (n, 2))
    t = np.sort(rng.uniform(0, 600, n))
    y = np.array([objective(xi, ti) for xi, ti in zip(x, t)]) + 0.05 * rng.standard_normal(n)
    temporal = None if sandwich else "matern32"
    inputs = torch.as_tensor(x if sandwich else np.column_stack([x, t]))
    hyper = Hyperparameters(
        outputscale=1.0,
        lengthscale_space=(0.2,),
        lengthscale_time=None if sandwich else 60.0,
        noise=0.01,
    )
    gp = SpatioTemporalGP(KernelSpec(dim=2, temporal=temporal), hyper)
    gp.set_data(inputs, torch.as_tensor(y))
    if not sandwich:
        return gp, 601.0
    ages = torch.arange(n - 1, -1, -1, dtype=torch.float64)
    gp.set_noise_scale(torch.pow(0.99, ages).reciprocal())  # W-GP-UCB's 1 / w_s
    return WeightedRidgeView(gp, "sandwich"), None


def closed_form_call(acq: UpperConfidenceBound, points: torch.Tensor) -> tuple:
    """The UCB's values and gradients in closed form."""
    with torch.no_grad():
        return acq.value_and_gradient(points)


def autograd_call(acq: UpperConfidenceBound, points: torch.Tensor) -> tuple:
    """The UCB's values and gradients by autograd through the call."""
    x = points.clone().requires_grad_(True)
    values = acq(x)
    (grad,) = torch.autograd.grad(values.sum(), x)
    return values.detach(), grad


def milliseconds(call, calls: int, repeats: int) -> float:
    """Median milliseconds per call over ``repeats`` blocks after one warm-up block."""
    blocks = []
    for _ in range(repeats + 1):
        start = time.perf_counter()
        for _ in range(calls):
            call()
        blocks.append(1e3 * (time.perf_counter() - start) / calls)
    return statistics.median(blocks[1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[50, 200, 800])
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 10])
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    load_before = os.getloadavg()
    rows = []
    for n in args.sizes:
        for sandwich in (False, True):
            gp, at = model(n, args.seed, sandwich)
            acq = UpperConfidenceBound(gp, 1.5, at)
            for m in args.batch:
                generator = torch.Generator().manual_seed(m)
                points = torch.rand(m, 2, generator=generator, dtype=torch.float64)
                closed_form = partial(closed_form_call, acq, points)
                autograd = partial(autograd_call, acq, points)
                (v1, g1), (v2, g2) = closed_form(), autograd()
                fast = milliseconds(closed_form, args.calls, args.repeats)
                slow = milliseconds(autograd, args.calls, args.repeats)
                rows.append(
                    {
                        "model": "ridge_sandwich" if sandwich else "gp",
                        "n": n,
                        "m": m,
                        "closed_form_ms": round(fast, 4),
                        "autograd_ms": round(slow, 4),
                        "speedup": round(slow / fast, 2),
                        "max_value_difference": float((v1 - v2).abs().max()),
                        "max_gradient_difference": float((g1 - g2).abs().max()),
                    }
                )
    print(
        json.dumps(
            {
                "benchmark": "acquisition_gradient",
                **machine_record(args.threads, load_before),
                "results": rows,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
