"""How the exact GP's operations scale with the dataset size n (prints JSON).

For n in 50..1000 (one CPU thread by default): one hyperparameter fit (L-BFGS-B,
capped iterations) and its seconds per likelihood evaluation, the posterior on 1000
points, adding one observation (O(n^2) Cholesky append) and removing one observation
(O(n^2) rank-one downdate), next to a fresh Cholesky of the same matrix. The
``exponents`` block gives least-squares log-log slopes over n >= 400: the adds and
removes should approach 2 and the fit (per evaluation) and the Cholesky 3. At moderate n
a likelihood evaluation is dominated by its O(n^2) elementwise passes (kernel matrix and
its derivatives), so its slope climbs towards 3 only as the O(n^3) factorization and
inverse take over.

    python benchmarks/gp_scaling.py [--sizes 50 100 200 400 700 1000 1500 2000] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import time

import torch

from dynbo.models import Hyperparameters, KernelSpec, SpatioTemporalGP, fit_hyperparameters


def best_of(fn, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def data(n, d, generator):
    x = torch.rand(n, d, generator=generator, dtype=torch.float64)
    t = torch.sort(torch.rand(n, generator=generator, dtype=torch.float64) * 600).values
    y = torch.sin(6 * x[:, 0]) * torch.cos(t / 60) + 0.1 * torch.randn(
        n, generator=generator, dtype=torch.float64
    )
    return torch.cat([x, t[:, None]], 1), y


def measure(n, d, device, repeats):
    g = torch.Generator().manual_seed(n)
    z, y = data(n + 1, d, g)
    z, y = z.to(device), y.to(device)
    spec = KernelSpec(dim=d)
    h = Hyperparameters(1.0, (0.3,), 60.0, 0.05)
    gp = SpatioTemporalGP(spec, h, device=device)
    gp.set_data(z[:n], y[:n])
    start = time.perf_counter()
    result = fit_hyperparameters(gp, max_iterations=30)
    fit_seconds = time.perf_counter() - start
    test = torch.cat(
        [torch.rand(1000, d, generator=g, dtype=torch.float64), torch.full((1000, 1), 600.0)], 1
    ).to(device)

    def posterior():
        gp.predict(test)
        if device.type == "cuda":
            torch.cuda.synchronize()

    def add_then_restore():
        gp.add(z[n], y[n])
        gp.remove(gp.n - 1)

    remove_index = n // 3

    def remove_only():
        gp.remove(remove_index)

    def restore():
        gp.set_data(z[:n], y[:n])

    posterior_seconds = best_of(posterior, repeats)
    # add: time add alone (the removal that restores the size is timed separately)
    adds, removes = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        gp.add(z[n], y[n])
        adds.append(time.perf_counter() - start)
        gp.remove(gp.n - 1)
    for _ in range(repeats):
        restore()
        start = time.perf_counter()
        remove_only()
        removes.append(time.perf_counter() - start)
    restore()
    delta = gp.covariance(gp.inputs, gp.inputs) + torch.diag(gp.noise_variances)
    cholesky_seconds = best_of(lambda: torch.linalg.cholesky(delta), repeats)
    return {
        "n": n,
        "fit_seconds": fit_seconds,
        "fit_evaluations": result.evaluations,
        "fit_seconds_per_evaluation": fit_seconds / max(result.evaluations, 1),
        "posterior_1000_seconds": posterior_seconds,
        "add_seconds": min(adds),
        "remove_seconds": min(removes),
        "cholesky_seconds": cholesky_seconds,
    }


def slope(rows, key):
    """Least-squares log-log slope over the sizes n >= 400 (all sizes if fewer than 2)."""
    big = [r for r in rows if r["n"] >= 400]
    big = big if len(big) >= 2 else rows
    x = [math.log(r["n"]) for r in big]
    y = [math.log(r[key]) for r in big]
    mx, my = sum(x) / len(x), sum(y) / len(y)
    return sum((a - mx) * (b - my) for a, b in zip(x, y)) / sum((a - mx) ** 2 for a in x)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes", type=int, nargs="+", default=[50, 100, 200, 400, 700, 1000, 1500, 2000]
    )
    parser.add_argument("--dim", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    rows = [measure(n, args.dim, device, args.repeats) for n in args.sizes]
    keys = [
        "fit_seconds_per_evaluation",
        "posterior_1000_seconds",
        "add_seconds",
        "remove_seconds",
        "cholesky_seconds",
    ]
    print(
        json.dumps(
            {
                "benchmark": "gp_scaling",
                "device": str(device),
                "threads": args.threads,
                "dim": args.dim,
                "machine": platform.processor() or platform.machine(),
                "torch": torch.__version__,
                "results": rows,
                "exponents": {k: slope(rows, k) for k in keys} if len(rows) > 1 else {},
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
