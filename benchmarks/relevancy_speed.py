"""Speed of the exact Wasserstein relevancy criterion against one Cholesky (prints JSON).

For each n (one CPU thread by default), on a GP with the papers' default kernel
(Matern-5/2 in space, Matern-3/2 in time) and fixed hyperparameters:

* ``cholesky_s``: one Cholesky factorization of the GP's ``Delta`` (same n, same run);
* ``criteria_s``: all n criteria from the GP's factor, everything included
  (``cholesky_inverse``, the convolution matrix ``C``, ``Q = C P``, the diagonal and
  the normalizer), i.e. ``WassersteinRelevancy.from_gp(gp, t0).relevancies()``;
* ``removals_s``: W-DBO's removal loop for ``--removals`` observations on a
  :class:`WassersteinRelevancy`: remove the least relevant one (rank-one updates) and
  recompute all criteria, repeated (the GP's own downdate is reported apart, as
  ``gp_removals_s``);
* the ratios ``criteria_s / cholesky_s`` and ``removals_s / criteria_s`` and a check
  that the criteria after the removals equal a fresh computation.

Timings are the best of ``--repeats`` runs (``criteria_s_median``: the median of the
criteria's), after one untimed warm-up at n = 50; on CUDA (``--device cuda``) each timed
region is bracketed by ``torch.cuda.synchronize()`` and ``device_name`` names the GPU.
If the authors' package ``wdbo-criterion`` is installed (it is not a dependency of
dynbo; ``pip install wdbo-criterion``), it is timed on identical inputs for
``n <= --wdbo-max-n`` (it is O(n^4): ~30 s at n = 400) and its values are compared
with ``paper_compat=True``: relative differences, its invalid (``-1``) outputs,
whether both pick the same observation to remove, and, where NumPy's ``longdouble`` is
80-bit, the error of both against the same formula evaluated in extended precision.
Without the package that block says why it was skipped.

    python benchmarks/relevancy_speed.py [--sizes 100 200 400 800 1200 2000] [--threads 1]
        [--device cpu] [--dim 2] [--removals 10] [--repeats 3] [--wdbo-max-n 400]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time

# importing it pins the BLAS/OpenMP pools (from --threads) before NumPy and torch load
from wdbo_iteration import device_name  # isort: skip

import numpy as np  # noqa: E402
import torch  # noqa: E402

from dynbo.models import Hyperparameters, KernelSpec, SpatioTemporalGP  # noqa: E402
from dynbo.relevancy import PAPER_NOISE_FLOOR, WassersteinRelevancy  # noqa: E402
from dynbo.relevancy.reference import _spd_inverse  # noqa: E402

SPATIAL, TEMPORAL = "matern52", "matern32"
NU = {"matern12": 0.5, "matern32": 1.5, "matern52": 2.5}


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def timings(fn, repeats, device):
    """Seconds of each of ``repeats`` calls of ``fn``, synchronized on a GPU."""
    times = []
    for _ in range(repeats):
        sync(device)
        start = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - start)
    return times


def best_of(fn, repeats, device):
    return min(timings(fn, repeats, device))


def make_gp(n, d, device, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, d, generator=g, dtype=torch.float64)
    t = torch.sort(torch.rand(n, generator=g, dtype=torch.float64) * 600.0).values
    y = torch.sin(6 * x[:, 0]) * torch.cos(t / 60) + 0.1 * torch.randn(
        n, generator=g, dtype=torch.float64
    )
    spec = KernelSpec(dim=d, spatial=SPATIAL, temporal=TEMPORAL)
    hyper = Hyperparameters(
        outputscale=1.0, lengthscale_space=(0.2,), lengthscale_time=60.0, noise=0.01
    )
    gp = SpatioTemporalGP(spec, hyper, device=device)
    gp.set_data(torch.cat([x, t[:, None]], 1).to(device), y.to(device))
    return gp, 600.0


def removal_loop(rel: WassersteinRelevancy, count: int) -> list[int]:
    removed = []
    r = rel.relevancies()
    for _ in range(count):
        i = int(torch.argmin(r))
        rel.remove(i)
        removed.append(i)
        r = rel.relevancies()
    return removed


def measure(n, d, device, repeats, removals):
    gp, t0 = make_gp(n, d, device, seed=n)
    inputs = gp.inputs
    delta = gp.covariance(inputs, inputs) + torch.diag(gp.noise_variances)
    cholesky_s = best_of(lambda: torch.linalg.cholesky(delta), max(repeats, 5), device)
    criteria_times = timings(
        lambda: WassersteinRelevancy.from_gp(gp, t0).relevancies(), repeats, device
    )
    criteria_s = min(criteria_times)

    times = []
    for _ in range(repeats):
        rel = WassersteinRelevancy.from_gp(gp, t0)
        rel.relevancies()
        sync(device)
        start = time.perf_counter()
        removed = removal_loop(rel, removals)
        sync(device)
        times.append(time.perf_counter() - start)
    removals_s = min(times)

    start = time.perf_counter()
    for i in removed:
        gp.remove(i)
    sync(device)
    gp_removals_s = time.perf_counter() - start
    fresh = WassersteinRelevancy.from_gp(gp, t0).relevancies()
    updated = rel.relevancies()
    check = float(((updated - fresh).abs() / fresh.abs().clamp_min(1e-300)).max())
    return {
        "n": n,
        "cholesky_s": cholesky_s,
        "criteria_s": criteria_s,
        "criteria_s_median": statistics.median(criteria_times),
        "criteria_over_cholesky": criteria_s / cholesky_s,
        "removals": removals,
        "removals_s": removals_s,
        "removals_over_criteria": removals_s / criteria_s,
        "gp_removals_s": gp_removals_s,
        "removal_check_max_rel_diff": check,
    }


def extended_precision_truth(gp, t0, conv):
    """The criterion's formula evaluated in NumPy ``longdouble`` (80-bit on x86), O(n^3)."""
    dtype = np.longdouble
    inputs = gp.inputs
    noise = gp.noise_variances.clamp_min(PAPER_NOISE_FLOOR)
    delta = (gp.covariance(inputs, inputs) + torch.diag(noise)).numpy().astype(dtype)
    p = _spd_inverse(delta)
    c = conv.astype(dtype)
    alpha = p @ gp.standardized_targets.numpy().astype(dtype)
    pii = np.diag(p)
    squared = (alpha * alpha + pii) / pii**2 * np.sum(p * (c @ p), axis=0)
    return np.sqrt(squared / (alpha @ c @ alpha + np.sum(p * c)))


def compare_wdbo(sizes, d, max_n):
    try:
        import wdbo_criterion  # noqa: PLC0415 (optional, imported lazily on purpose)
    except ImportError:
        return {"skipped": "wdbo-criterion is not installed (pip install wdbo-criterion)"}
    extended = np.finfo(np.longdouble).eps < 1e-18
    rows = []
    for n in [s for s in sizes if s <= max_n]:
        gp, t0 = make_gp(n, d, torch.device("cpu"), seed=n)
        h = gp.hyperparameters
        z = gp.inputs.numpy()
        x = np.ascontiguousarray(z[:, :d])
        t = np.ascontiguousarray(z[:, d:])
        y = np.ascontiguousarray(gp.standardized_targets.numpy().reshape(-1, 1))
        ks = wdbo_criterion.MaternKernel(h.lengthscale_space[0], NU[SPATIAL])
        kt = wdbo_criterion.MaternKernel(h.lengthscale_time, NU[TEMPORAL])
        start = time.perf_counter()
        theirs = wdbo_criterion.wasserstein_criterion(
            x, y, t, n, d, h.outputscale, h.noise, ks, kt, t0, 0, 1
        ).reshape(-1)
        theirs_s = time.perf_counter() - start
        start = time.perf_counter()
        rel = WassersteinRelevancy.from_gp(gp, t0, paper_compat=True)
        ours = rel.relevancies().numpy()
        ours_s = time.perf_counter() - start
        correct = WassersteinRelevancy.from_gp(gp, t0).relevancies().numpy()
        # The package returns -1 where its own evaluation fails (it does, on some of
        # the least relevant observations); compare on its valid values.
        valid = np.isfinite(theirs) & (theirs >= 0)
        diff = np.abs(theirs[valid] / ours[valid] - 1.0)
        row = {
            "n": n,
            "wdbo_criterion_s": theirs_s,
            "dynbo_paper_compat_s": ours_s,
            "speedup": theirs_s / ours_s,
            "wdbo_invalid_values": int((~valid).sum()),
            "max_rel_diff_paper_compat": float(diff.max()),
            "median_rel_diff_paper_compat": float(np.median(diff)),
            "max_rel_diff_where_R_above_1e-3": float(diff[ours[valid] > 1e-3].max()),
            "max_rel_diff_vs_erratum_fixed": float(
                np.abs(theirs[valid] / correct[valid] - 1.0).max()
            ),
            "same_argmin": bool(np.argmin(np.where(valid, theirs, np.inf)) == np.argmin(ours)),
        }
        if extended:
            truth = extended_precision_truth(gp, t0, rel.convolutions.numpy())
            row["dynbo_max_rel_err_vs_longdouble"] = float(np.max(np.abs(ours / truth - 1)))
            row["wdbo_max_rel_err_vs_longdouble_valid"] = float(
                np.max(np.abs(theirs[valid] / truth[valid] - 1))
            )
        rows.append(row)
    return {"version": getattr(wdbo_criterion, "__version__", "?"), "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 200, 400, 800, 1200, 2000])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dim", type=int, default=2)
    parser.add_argument("--removals", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--wdbo-max-n", type=int, default=400)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    WassersteinRelevancy.from_gp(make_gp(50, args.dim, device, 0)[0], 600.0).relevancies()
    rows = [measure(n, args.dim, device, args.repeats, args.removals) for n in args.sizes]
    big = [r for r in rows if r["n"] >= 400]
    out = {
        "benchmark": "relevancy_speed",
        "kernel": {"spatial": SPATIAL, "temporal": TEMPORAL, "dim": args.dim},
        "device": str(device),
        "device_name": device_name(device),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "machine": platform.machine(),
        "processor": platform.processor(),
        "rows": rows,
        "targets": {
            "criteria_within_10x_cholesky_at_n_ge_400": all(
                r["criteria_over_cholesky"] <= 10.0 for r in big
            ),
            "removals_cheaper_than_fresh": {
                str(r["n"]): r["removals_s"] < r["criteria_s"] for r in rows
            },
            "median_criteria_over_cholesky_n_ge_400": (
                statistics.median(r["criteria_over_cholesky"] for r in big) if big else None
            ),
        },
        "wdbo_criterion": compare_wdbo(args.sizes, args.dim, args.wdbo_max_n),
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
