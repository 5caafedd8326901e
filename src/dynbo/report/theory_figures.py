"""BOLT's theory figures (Bardou & Thiran 2025, Fig. 1 and Fig. 2), drawn from :mod:`dynbo.theory`.

Nothing here reads a store: both figures are closed-form quantities of the kernels and of
a response-time model. ``dynbo theory --out DIR`` writes both.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dynbo.theory import (
    ResponseTimeModel,
    dataset_utility,
    log_lower_bound_slope,
    max_dataset_size,
)

__all__ = ["DPI", "FIGSIZE", "TEMPORAL_FAMILIES", "lower_bound_figure", "utility_figure"]

#: size of both figures in inches; at :data:`DPI` a figure is ``FIGSIZE * DPI`` pixels
FIGSIZE = (10.0, 4.0)
DPI = 110
#: temporal kernels drawn in both figures, with their legend labels
TEMPORAL_FAMILIES = {
    "se": "SE (RBF)",
    "matern52": "Matern-5/2",
    "matern32": "Matern-3/2",
    "matern12": "Matern-1/2",
}
_LN10 = float(np.log(10.0))
#: top of Fig. 1's right panel: ``eps_c = 10^-1e30``
_RIGHT_TOP = 1e30


def _pyplot():  # noqa: ANN202 - the matplotlib.pyplot module
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: str | Path) -> Path:  # noqa: ANN001 - a matplotlib Figure
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=DPI)
    _pyplot().close(fig)
    return out


def _power_of_ten(value: float, _position: int) -> str:
    return f"$10^{{{value:g}}}$"


def lower_bound_figure(
    path: str | Path,
    *,
    frequencies: np.ndarray | None = None,
    dim: int = 4,
    spatial: str = "matern52",
    floor_decades: float = 200.0,
) -> Path:
    """BOLT Fig. 1: the lower-bound regret slope ``eps_c`` against the sampling frequency ``1/c``.

    Settings of the paper: ``d = 4``, ``L = l_S = l_T = lambda = 1``, one curve per
    temporal kernel (SE, Matern-5/2, 3/2, 1/2). The paper does not say which spatial kernel
    it used; this figure uses **Matern-5/2** (the papers' default ``k_S``), whose
    correlation at the diameter ``sqrt(4) = 2`` of ``[0, 1]^4`` is ``k_S(2) = 0.139``.

    ``eps_c`` falls below the smallest double at a few Hz for the smooth kernels, so the
    figure plots ``log10(eps_c)`` (:func:`dynbo.theory.log_lower_bound_slope`), never
    ``eps_c`` itself:

    * left panel: the paper's log-log view, ``eps_c`` (ticks ``10^k``) against ``1/c`` on a
      log axis, cut at ``10^-floor_decades``;
    * right panel: far below the range of doubles, ``-log10(eps_c)`` on a log axis
      against ``1/c``, up to ``eps_c = 10^-1e30`` (SE leaves it at about 4 Hz; the
      Matern curves stay in it up to 100 Hz).

    Args:
        path: where to write the figure (PNG, SVG or PDF by extension).
        frequencies: sampling frequencies ``1/c`` in Hz (default 400 points log-spaced
            over ``[1e-2, 1e2]``).
        dim: spatial dimension ``d``.
        spatial: family of ``k_S``.
        floor_decades: lower limit of the left panel, in decades below 1.

    Returns:
        The written path (a ``FIGSIZE * DPI`` pixel image for raster formats).
    """
    f = np.logspace(-2.0, 2.0, 400) if frequencies is None else np.asarray(frequencies, float)
    if f.ndim != 1 or f.size < 2 or not (np.isfinite(f).all() and (f > 0).all()):
        raise ValueError("frequencies must be a 1-D array of at least 2 positive numbers")
    plt = _pyplot()
    from matplotlib.ticker import FuncFormatter

    fig, (left, right) = plt.subplots(1, 2, figsize=FIGSIZE)
    for i, (family, label) in enumerate(TEMPORAL_FAMILIES.items()):
        log10_eps = (
            np.asarray(
                log_lower_bound_slope(
                    1.0 / f,
                    temporal=family,
                    lengthscale_time=1.0,
                    spatial=spatial,
                    lengthscale_space=1.0,
                    outputscale=1.0,
                    lipschitz=1.0,
                    dim=dim,
                )
            )
            / _LN10
        )
        # below the floor the curve runs off the bottom edge of the left panel
        clipped = np.maximum(log10_eps, -2.0 * floor_decades)
        left.plot(f, clipped, color=f"C{i}", lw=2, label=label)
        shown = np.isfinite(log10_eps) & (-log10_eps <= 10.0 * _RIGHT_TOP)
        right.plot(f[shown], -log10_eps[shown], color=f"C{i}", lw=2, label=label)
    left.set_xscale("log")
    left.set_ylim(-floor_decades, 1.0)
    left.yaxis.set_major_formatter(FuncFormatter(_power_of_ten))
    left.set_xlabel("sampling frequency 1/c (Hz)")
    left.set_ylabel(r"regret slope $\epsilon_c$")
    left.set_title(rf"$\epsilon_c$ (d = {dim}, L = $l_S$ = $l_T$ = $\lambda$ = 1)", fontsize=10)
    right.set_xscale("log")
    right.set_yscale("log")
    right.set_ylim(1.0, _RIGHT_TOP)
    right.set_xlabel("sampling frequency 1/c (Hz)")
    right.set_ylabel(r"$-\log_{10} \epsilon_c$")
    right.set_title(r"below the range of doubles: $\epsilon_c = 10^{-y}$", fontsize=10)
    for ax in (left, right):
        ax.grid(True, which="major", alpha=0.3)
    left.legend(fontsize=8, loc="lower left")
    fig.tight_layout()
    return _save(fig, path)


#: Fig. 2 (left): BOLT's worked example, ``R(n) = 0.05 + 2e-7 n^3`` seconds
CUBIC_RESPONSE = ResponseTimeModel((0.05, 0.0, 0.0, 2e-7))
#: Fig. 2 (right): response times of several orders, all 0.25 s at ``n = 100``
RESPONSE_MODELS = {
    "R(n) = 0.25 s (O(1))": ResponseTimeModel((0.25, 0.0, 0.0, 0.0)),
    "R(n) = 0.05 + 2e-3 n (O(n))": ResponseTimeModel((0.05, 2e-3, 0.0, 0.0)),
    "R(n) = 0.05 + 2e-5 n^2 (O(n^2))": ResponseTimeModel((0.05, 0.0, 2e-5, 0.0)),
    "R(n) = 0.05 + 2e-7 n^3 (O(n^3))": CUBIC_RESPONSE,
}


def _utility_curve(ax, sizes, model, family, lengthscale, color, label, n_max):  # noqa: ANN001
    values = np.array([dataset_utility(int(n), model, family, lengthscale) for n in sizes])
    best = max_dataset_size(model, family, lengthscale, n_max=n_max)
    if best < n_max:
        label = f"{label}: n* = {best}"
        star = dataset_utility(best, model, family, lengthscale)
        ax.plot([best], [star], marker="o", color=color, ms=6)
        ax.axvline(best, color=color, ls=":", lw=1)
    else:
        label = f"{label}: n* beyond {n_max}"
    ax.plot(sizes, values, color=color, lw=2, label=label)


def utility_figure(
    path: str | Path,
    *,
    lengthscale_time: float = 60.0,
    max_size: int = 400,
) -> Path:
    """BOLT Fig. 2: ``||u_n||^2 = sum_{i<=n} k_T(i R(n))^2`` against ``n``, with ``n*`` (eq. 8-9).

    * left panel: one curve per temporal kernel (SE, Matern-5/2, 3/2, 1/2) for the cubic
      response time ``R(n) = 0.05 + 2e-7 n^3`` s (the paper's ``R(n) in O(n^3)``);
    * right panel: the SE kernel with response times of order 1, n, n^2 and n^3, all
      equal to 0.25 s at ``n = 100`` (:data:`RESPONSE_MODELS`).

    ``l_T = lengthscale_time`` seconds. ``n*`` is :func:`dynbo.theory.max_dataset_size`
    (a dot on the curve and a dotted vertical line); a constant response time makes
    ``||u_n||^2`` increase with ``n``, so its ``n*`` is beyond the plotted range (the
    legend says so).

    Args:
        path: where to write the figure (PNG, SVG or PDF by extension).
        lengthscale_time: ``l_T`` in seconds.
        max_size: largest ``n`` drawn.

    Returns:
        The written path (a ``FIGSIZE * DPI`` pixel image for raster formats).
    """
    if not lengthscale_time > 0:
        raise ValueError(f"lengthscale_time must be positive, got {lengthscale_time!r}")
    if max_size < 2:
        raise ValueError(f"max_size must be >= 2, got {max_size!r}")
    plt = _pyplot()
    sizes = np.arange(1, max_size + 1)
    fig, (left, right) = plt.subplots(1, 2, figsize=FIGSIZE, sharey=False)
    for i, (family, label) in enumerate(TEMPORAL_FAMILIES.items()):
        _utility_curve(
            left, sizes, CUBIC_RESPONSE, family, lengthscale_time, f"C{i}", label, max_size
        )
    for i, (label, model) in enumerate(RESPONSE_MODELS.items()):
        _utility_curve(right, sizes, model, "se", lengthscale_time, f"C{i + 4}", label, max_size)
    left.set_title(rf"several $k_T$, R(n) = 0.05 + 2e-7 $n^3$ s, $l_T$ = {lengthscale_time:g} s")
    right.set_title(rf"SE $k_T$, several R(n), $l_T$ = {lengthscale_time:g} s")
    for ax in (left, right):
        ax.title.set_fontsize(10)
        ax.set_xlabel("dataset size n")
        ax.set_ylabel(r"$\|u_n\|_2^2$")
        ax.grid(True, alpha=0.3)
    left.legend(fontsize=7, loc="upper right")
    right.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    return _save(fig, path)
