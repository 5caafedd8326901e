"""A seeded WLAN power-control simulator: transmit powers against moving users.

BOLT (Bardou & Thiran) and W-DBO (Bardou, Thiran & Ranieri) tune the transmit powers of
the access points (APs) of a wireless LAN serving moving users, to maximize the summed
Shannon rate. The papers give the sizes (BOLT: 6 APs, 27 users; W-DBO: 4 APs, 18 users),
the domain (powers in ``[10^0.1, 10^2.5]`` mW per AP), the objective's form
``sum_users W log2(1 + SINR)``, the temporal kernel (Matern-1/2), BOLT's noise variance
(1.5) and cost (0.1 s), but not the propagation model, the bandwidth or the mobility.
This module fills those gaps with a textbook model; every constant is in
:class:`WLANConstants`, with the reason for its value (and ``docs/wlan.md``).

The model, at time ``t`` (s), with powers ``P in R^A`` (mW):

* **Floor and APs.** A ``floor_width x floor_depth`` rectangle (m). The APs sit at the
  centres of the cells of a regular ``rows x cols`` grid over the floor (deterministic,
  not seeded; :func:`ap_grid`): 6 APs make a 3 x 2 grid of 20 m cells on the 60 m x 40 m
  floor, 4 APs a 2 x 2 grid of 30 m x 20 m cells.
* **Mobility.** Random waypoint in continuous time: each user starts at a uniform point
  of the floor, seated for a uniform time in ``[0, pause_max]``, then repeatedly picks a
  uniform waypoint on the floor and a uniform speed in ``[speed_min, speed_max]``, walks
  there in a straight line and pauses a uniform time in ``[0, pause_max]``. The legs are
  drawn once, at construction, from ``numpy.random.default_rng`` streams spawned from
  ``seed`` (one independent stream per user, so a user's path depends on neither the
  number of users nor the horizon), over ``[0, horizon + margin]``; positions are exact
  linear interpolation along the legs. Before 0 and after the last knot, users stand still.
* **Channel.** Log-distance path loss ``L(d) = L0 + 10 n log10(max(d, d_min) / 1 m)`` dB,
  gain ``g = 10^(-L/10)``; no shadowing or fading (the objective must be deterministic).
* **Association.** Each user is served by the AP it receives most strongly,
  ``a(u) = argmax_a P_a g_{a,u}``: it depends on the powers.
* **Rate.** ``SINR_u = P_{a(u)} g_{a(u),u} / (N0 + sum_{b != a(u)} P_b g_{b,u})`` (every
  other AP interferes: one shared channel; ``N0`` thermal noise over the band plus a
  receiver noise figure) and ``f(P, t) = sum_u W log2(1 + SINR_u)`` in Mbit/s (each
  user's link capacity over the band, the papers' formula; no time sharing between the
  users of an AP).

Strongest received power is also largest SINR (``SINR_a = R_a / (N0 + R - R_a)`` grows
with ``R_a``, ``R`` the total received power), so ``f`` is a sum over users of maxima of
smooth functions, i.e. the maximum over association patterns of smooth functions: it is
continuous, with kinks where an association switches, and these kinks only bend upwards.
A local maximum of a maximum of smooth functions is a local maximum of every piece active
there, so gradient ascent on the active piece (analytic gradient, exact inside each
association region) converges to the maxima; kinks can only cut a line search short,
which restarts and the final single-start polishes absorb. The search runs on powers in
dBm, where the box is ``[1, 25]`` dBm and the objective far better conditioned than in
mW; ``x`` is in mW everywhere outside. Sum-rate power control is often solved at or near
a corner (each AP at its minimum or maximum power: Gjendemsjo, Gesbert, Oien & Kiani 2008,
"Binary Power Control for Sum Rate Maximization over Multiple Interfering Links"), so the
best corners of the box also start the search.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, fields

import numpy as np

from dynbo.benchmarks.base import Benchmark, check_array_size
from dynbo.benchmarks.search import BoxSearchSettings, OptimumCache, maximize_box

try:  # a dependency of botorch; only used to keep BLAS to one thread during a search
    import threadpoolctl
except ImportError:  # pragma: no cover
    threadpoolctl = None

__all__ = ["POWER_MAX_MW", "POWER_MIN_MW", "WLAN", "WLANConstants", "ap_grid"]

#: The papers' power domain, per AP (mW): ``[10^0.1, 10^2.5]``, i.e. 1 dBm to 25 dBm.
POWER_MIN_MW = 10.0**0.1
POWER_MAX_MW = 10.0**2.5

_OPTIMUM_CACHE_SIZE = 65_536
_WARM_STARTS = 4
_CORNER_STARTS = 4
_MAX_CORNER_DIM = 12
#: the most random-waypoint legs (all users) a benchmark draws when it is made: about
#: ten seconds of the drawing loop; the papers' setting needs about a hundred
MAX_EXPECTED_LEGS = 500_000
_CHUNK = 4096  # points per block in f: bounds the (m, U, A) temporaries
_BLAS_CONTROLLER: list = []  # the threadpoolctl controller, built on first use


def _one_blas_thread() -> contextlib.AbstractContextManager:
    """A context keeping BLAS libraries to one thread (a no-op without threadpoolctl).

    The search's linear algebra (L-BFGS-B on a few dozen variables) is far too small to
    gain from threads, and on a 2-core machine whose other core is busy, BLAS threads
    waiting on each other made a warm :meth:`WLAN.optimum` call 4 to 9 times slower.
    """
    if threadpoolctl is None:
        return contextlib.nullcontext()
    if not _BLAS_CONTROLLER:
        _BLAS_CONTROLLER.append(threadpoolctl.ThreadpoolController())
    return _BLAS_CONTROLLER[0].limit(limits=1, user_api="blas")


_LN2 = math.log(2.0)
_DB_TO_LN = math.log(10.0) / 10.0  # d(mW) / d(dBm) = mW * ln(10) / 10


@dataclass(frozen=True)
class WLANConstants:
    """Every physical constant of the simulator (the papers give none of them).

    Attributes:
        floor_width: floor extent along x (m), 60. With ``floor_depth`` a 60 m x 40 m
            office floor: six APs on 20 m cells (a usual enterprise AP spacing), and
            every AP heard by every user, the interference-limited regime in which
            power control matters. (Scaling the floor only shifts all gains by one factor,
            i.e. changes the weight of ``N0``.)
        floor_depth: floor extent along y (m), 40.
        carrier_mhz: carrier frequency (MHz), 2400 (the 2.4 GHz WLAN band). It only sets
            the 1 m reference loss ``L0 = 20 log10(4 pi f / c) = 40.0`` dB (free space).
        path_loss_exponent: ``n``, 4.0: obstructed indoor propagation (walls, furniture,
            people; 4 is the low end of the 4-6 range Rappaport 2002, "Wireless
            Communications: Principles and Practice", gives for obstructed in-building
            links). With 3.3 (an unobstructed office) 75 % of the optimal powers sat at a
            bound of the box (6 x 27, seed 0, 25 times; 100 % for 4 x 18), with 4 62 %
            (91 %): a larger exponent confines each AP's reach and favours interior powers.
        min_distance: ``d_min`` (m), 1: distances are clamped to the reference distance so
            that a user under an AP does not get an unbounded gain.
        bandwidth_mhz: ``W`` (MHz), 1 (a narrow channel, e.g. an IEEE 802.11ah channel or a
            few 802.11ax resource units). It sets the scale of ``f`` (rates are proportional
            to ``W`` apart from ``N0``, which grows with it): with 1 MHz the variance of
            ``f`` over ``S x [0, 600 s]`` is 240-320 (Mbit/s)^2 for the 6 x 27 network and
            150-210 for 4 x 18 (seeds 0-2), so BOLT's noise variance 1.5 is 0.5-1 % of it,
            the ratio BOLT gives for its benchmarks (about 1 %).
        noise_figure_db: receiver noise figure (dB), 7 (a typical WLAN receiver); the noise
            floor is ``N0 = -174 dBm/Hz + 10 log10(W / Hz) + NF = -107`` dBm.
        speed_min: slowest walking speed (m/s), 0.5, and
        speed_max: fastest walking speed (m/s), 1.5: pedestrian speeds, the range usually
            given to random-waypoint pedestrians; ``speed_min > 0`` keeps the model from
            decaying towards standing still.
        pause_max: longest pause at a waypoint (s), 300: office users sit for minutes
            between walks, so about 4 of the 27 users walk at any time (seeds 0-2) and
            ``f`` changes in bursts; the optimal powers still switch tens of times in
            600 s (see ``docs/wlan.md``).
        margin: seconds of trajectory drawn beyond the horizon (60), for queries made
            slightly after ``T``.
    """

    floor_width: float = 60.0
    floor_depth: float = 40.0
    carrier_mhz: float = 2400.0
    path_loss_exponent: float = 4.0
    min_distance: float = 1.0
    bandwidth_mhz: float = 1.0
    noise_figure_db: float = 7.0
    speed_min: float = 0.5
    speed_max: float = 1.5
    pause_max: float = 300.0
    margin: float = 60.0

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"wlan: {item.name} must be a number, got {value!r}")
            if not math.isfinite(value):
                raise ValueError(f"wlan: {item.name} must be finite, got {value!r}")
        for name in (
            "floor_width",
            "floor_depth",
            "carrier_mhz",
            "path_loss_exponent",
            "min_distance",
            "bandwidth_mhz",
            "speed_min",
        ):
            if not getattr(self, name) > 0:
                raise ValueError(f"wlan: {name} must be positive, got {getattr(self, name)!r}")
        for name in ("pause_max", "margin"):
            if getattr(self, name) < 0:
                raise ValueError(f"wlan: {name} must be >= 0, got {getattr(self, name)!r}")
        if self.speed_max < self.speed_min:
            raise ValueError(
                f"wlan: speed_max must be >= speed_min, got {self.speed_max!r} < {self.speed_min!r}"
            )

    @property
    def reference_loss_db(self) -> float:
        """Free-space path loss at 1 m (dB), ``20 log10(4 pi f / c)``."""
        wavelength = 299.792458 / self.carrier_mhz  # m
        return 20.0 * math.log10(4.0 * math.pi / wavelength)

    @property
    def noise_mw(self) -> float:
        """Noise floor ``N0`` (mW): thermal noise over ``W`` plus the noise figure."""
        noise_dbm = -174.0 + 10.0 * math.log10(self.bandwidth_mhz * 1e6) + self.noise_figure_db
        return 10.0 ** (noise_dbm / 10.0)


def ap_grid(count: int, width: float, depth: float) -> np.ndarray:
    """``(count, 2)`` AP positions (m): centres of a near-square grid of cells on the floor.

    ``rows`` minimizes ``|log(cell width / cell depth)|`` (ties: fewer rows), ``cols =
    ceil(count / rows)``; APs fill the rows in order and a partly filled last row is centred.
    """
    best_rows = min(
        range(1, count + 1),
        key=lambda rows: (abs(math.log((width / math.ceil(count / rows)) / (depth / rows))), rows),
    )
    cols = math.ceil(count / best_rows)
    cell_w, cell_d = width / cols, depth / best_rows
    positions = []
    for row in range(best_rows):
        in_row = min(cols, count - row * cols)
        offset = (cols - in_row) * cell_w / 2.0
        for col in range(in_row):
            positions.append((offset + (col + 0.5) * cell_w, (row + 0.5) * cell_d))
    return np.array(positions, dtype=float)


def expected_legs(constants: WLANConstants, users: int, horizon: float) -> float:
    """About how many random-waypoint legs ``users`` draw over ``[0, horizon + margin]``.

    A leg is a walk and a pause: ``pause_max / 2`` s of pause on average, and a walk of
    about a third of the floor's diagonal (the mean distance between two uniform points
    of a rectangle is 0.33-0.52 of it) at the mean speed.
    """
    c = constants
    walk = (math.hypot(c.floor_width, c.floor_depth) / 3.0) / (0.5 * (c.speed_min + c.speed_max))
    return users * (horizon + c.margin) / (0.5 * c.pause_max + walk)


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"wlan: {name} must be a positive integer, got {value!r}")
    return int(value)


def _number(name: str, value: object, *, positive: bool) -> float:
    ok = isinstance(value, (int, float, np.floating, np.integer)) and not isinstance(value, bool)
    if ok:
        ok = math.isfinite(value) and (value > 0 if positive else value >= 0)
    if not ok:
        what = "positive" if positive else ">= 0"
        raise ValueError(f"wlan: {name} must be a finite number {what}, got {value!r}")
    return float(value)


class WLAN(Benchmark):
    """Summed Shannon rate of a WLAN with moving users, as a function of the AP powers.

    Args:
        access_points: number ``A`` of APs, the dimension ``d`` (BOLT 6, W-DBO 4).
        users: number of moving users (BOLT 27, W-DBO 18).
        seed: seeds the users' trajectories (same seed, same trajectories).
        noise_variance: ``sigma_0^2`` of the observations, (Mbit/s)^2 (BOLT: 1.5).
        cost: ``c``, seconds one evaluation takes (BOLT: 0.1).
        horizon: ``T`` in seconds (600 in both papers).
        constants: the physical constants (:class:`WLANConstants`; ``None`` for defaults).

    Attributes:
        ap_positions: ``(A, 2)`` AP positions (m).
        leg_times: per user, ``(k_u,)`` increasing knot times (s) of the trajectory.
        leg_points: per user, ``(k_u, 2)`` positions (m) at those knots.
    """

    name = "wlan"
    time_unit = "s"
    temporal_kernel = "matern12"
    reference = (
        "Bardou & Thiran, Optimizing Through Change: Bounds and Recommendations for "
        "Time-Varying Bayesian Optimization Algorithms (BOLT), WLAN benchmark; Bardou, "
        "Thiran & Ranieri, This Too Shall Pass: Removing Stale Observations in Dynamic "
        "Bayesian Optimization (W-DBO), WLAN benchmark (propagation, bandwidth and "
        "mobility: dynbo's choices, see dynbo.benchmarks.wlan)"
    )
    #: Sizes (access points, users) of the papers' experiments.
    BOLT_SIZE = (6, 27)
    WDBO_SIZE = (4, 18)
    #: Search settings: a cold call (nothing cached nearby) and a warm-started one.
    cold_settings = BoxSearchSettings(raw_samples=2**14, restarts=48, final_polishes=4)
    warm_settings = BoxSearchSettings(raw_samples=2**10, restarts=6, final_polishes=2)
    #: A search is warm when a cached time lies within this many seconds.
    warm_window = 10.0

    def __init__(
        self,
        *,
        access_points: int = 6,
        users: int = 27,
        seed: int = 0,
        noise_variance: float = 1.5,
        cost: float = 0.1,
        horizon: float = 600.0,
        constants: WLANConstants | None = None,
    ) -> None:
        self.access_points = _positive_int("access_points", access_points)
        self.users = _positive_int("users", users)
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ValueError(f"wlan: seed must be a non-negative integer, got {seed!r}")
        self.seed = int(seed)
        self.noise_variance = _number("noise_variance", noise_variance, positive=False)
        self.cost = _number("cost", cost, positive=False)
        self.horizon = _number("horizon", horizon, positive=True)
        if constants is None:
            constants = WLANConstants()
        if not isinstance(constants, WLANConstants):
            raise ValueError(f"wlan: constants must be a WLANConstants, got {constants!r}")
        self.constants = constants
        check_array_size(
            "wlan",
            f"access_points = {access_points}",
            (2 ** min(self.access_points, _MAX_CORNER_DIM), self.access_points),
        )
        legs = expected_legs(constants, self.users, self.horizon)
        if legs > MAX_EXPECTED_LEGS:
            raise ValueError(
                f"wlan: users = {users} over horizon = {horizon} s need about {legs:.3g} "
                f"random-waypoint legs; at most {MAX_EXPECTED_LEGS:g}"
            )
        self.dim = self.access_points
        self.bounds = np.array([[POWER_MIN_MW] * self.dim, [POWER_MAX_MW] * self.dim], dtype=float)
        self.power_bounds_dbm = 10.0 * np.log10(self.bounds)
        self.ap_positions = ap_grid(self.dim, constants.floor_width, constants.floor_depth)
        # Linear gain at 1 m; gains are g0 * max(d, d_min)^-n.
        self._reference_gain = 10.0 ** (-constants.reference_loss_db / 10.0)
        self._noise = constants.noise_mw
        self._bandwidth = constants.bandwidth_mhz  # W in MHz gives rates in Mbit/s
        self.leg_times, self.leg_points = self._draw_trajectories()
        # 0/1 patterns of the corners of the power box: all 2^A of them, or a fixed random
        # subset when there are too many to evaluate at every search.
        if self.dim <= _MAX_CORNER_DIM:
            self._corner_signs = (np.arange(2**self.dim)[:, None] >> np.arange(self.dim)) & 1
        else:
            corner_rng = np.random.default_rng(0)
            self._corner_signs = corner_rng.integers(0, 2, (2**_MAX_CORNER_DIM, self.dim))
        self._optima = OptimumCache(_OPTIMUM_CACHE_SIZE)

    # ------------------------------------------------------------------ mobility
    def _draw_trajectories(self) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Random-waypoint knots of every user over ``[0, horizon + margin]``."""
        c = self.constants
        size = np.array([c.floor_width, c.floor_depth])
        end = self.horizon + c.margin
        times_all: list[np.ndarray] = []
        points_all: list[np.ndarray] = []
        for stream in np.random.SeedSequence(self.seed).spawn(self.users):
            rng = np.random.default_rng(stream)
            point = rng.uniform(0.0, 1.0, 2) * size
            # Every user starts seated (a pause of uniform length), as most users are at
            # any time of a run with long pauses; starting all users walking at t = 0
            # would make the first minute unlike the rest.
            now = float(rng.uniform(0.0, c.pause_max))
            times = [0.0, now] if now > 0 else [0.0]
            points = [point, point] if now > 0 else [point]
            while now <= end:
                waypoint = rng.uniform(0.0, 1.0, 2) * size
                speed = rng.uniform(c.speed_min, c.speed_max)
                pause = rng.uniform(0.0, c.pause_max)
                length = float(np.linalg.norm(waypoint - point))
                if length == 0.0:  # probability zero, but knot times must increase
                    continue
                now += length / speed
                times.append(now)
                points.append(waypoint)
                if pause > 0:
                    # A pause is a knot pair at the same place.
                    now += pause
                    times.append(now)
                    points.append(waypoint)
                point = waypoint
            times_all.append(np.array(times))
            points_all.append(np.array(points))
        return times_all, points_all

    def positions(self, t: float | np.ndarray) -> np.ndarray:
        """User positions (m): ``(U, 2)`` for a scalar ``t``, ``(m, U, 2)`` for ``(m,)`` times.

        Exact linear interpolation along each user's legs; a user stands at its first
        knot before ``t = 0`` and at its last knot after the drawn trajectory ends.
        """
        times = np.asarray(t, dtype=float)
        flat = times.reshape(-1)
        out = np.empty((flat.size, self.users, 2))
        for user, (knots, points) in enumerate(zip(self.leg_times, self.leg_points)):
            out[:, user, 0] = np.interp(flat, knots, points[:, 0])
            out[:, user, 1] = np.interp(flat, knots, points[:, 1])
        return out[0] if times.ndim == 0 else out.reshape(*times.shape, self.users, 2)

    def speeds(self) -> list[np.ndarray]:
        """Per user, ``(k_u - 1,)`` speeds (m/s) along its knot intervals (0 when pausing)."""
        return [
            np.linalg.norm(np.diff(points, axis=0), axis=1) / np.diff(knots)
            for knots, points in zip(self.leg_times, self.leg_points)
        ]

    # ------------------------------------------------------------------ physics
    def gains(self, user_positions: np.ndarray) -> np.ndarray:
        """Linear channel gains ``g_{a,u}`` (dimensionless) of users at the given places.

        Args:
            user_positions: ``(..., U, 2)`` user positions (m).

        Returns:
            ``(..., U, A)`` gains ``10^(-L0/10) max(d, d_min)^-n``.
        """
        where = np.asarray(user_positions, dtype=float)
        dx = where[..., 0, None] - self.ap_positions[:, 0]
        dy = where[..., 1, None] - self.ap_positions[:, 1]
        # max(d, d_min)^-n as a power of the squared distance (no square root needed);
        # products for an even integer n (the default 4) are several times faster than pow.
        squared = np.maximum(dx * dx + dy * dy, self.constants.min_distance**2)
        half = 0.5 * self.constants.path_loss_exponent
        if half == int(half) and 1 <= half <= 4:
            inverse = 1.0 / squared
            decay = inverse
            for _ in range(int(half) - 1):
                decay = decay * inverse
        else:
            decay = np.exp(-half * np.log(squared))
        return self._reference_gain * decay

    def _user_rates_from_gains(self, gains: np.ndarray, powers: np.ndarray) -> np.ndarray:
        """``(m, U)`` rates (Mbit/s) from ``(U, A)`` or ``(m, U, A)`` gains, ``(m, A)`` mW."""
        received = powers[:, None, :] * gains  # (m, U, A) mW
        total = received.sum(axis=-1)
        serving = received.max(axis=-1)  # strongest received power = association
        interference = total - serving
        return self._bandwidth * np.log2(1.0 + serving / (self._noise + interference))

    def user_rates(self, user_positions: np.ndarray, powers: np.ndarray) -> np.ndarray:
        """Per-user Shannon rates ``W log2(1 + SINR_u)`` (Mbit/s).

        Args:
            user_positions: ``(U, 2)`` positions (m), or ``(m, U, 2)`` (one set per row
                of ``powers``); ``U`` may differ from :attr:`users`.
            powers: ``(m, A)`` transmit powers (mW), or one ``(A,)`` vector.

        Returns:
            ``(m, U)`` rates.
        """
        powers = np.asarray(powers, dtype=float).reshape(-1, self.dim)
        return self._user_rates_from_gains(self.gains(user_positions), powers)

    def rate_at(self, user_positions: np.ndarray, powers: np.ndarray) -> np.ndarray:
        """``sum_u W log2(1 + SINR_u)`` (Mbit/s), ``(m,)``, for positions given (m).

        Same arguments as :meth:`user_rates`.
        """
        return self.user_rates(user_positions, powers).sum(axis=-1)

    def association_at(self, user_positions: np.ndarray, powers: np.ndarray) -> np.ndarray:
        """``(m, U)`` index of each user's serving AP: its strongest received power.

        Same arguments as :meth:`user_rates`.
        """
        powers = np.asarray(powers, dtype=float).reshape(-1, self.dim)
        return np.argmax(powers[:, None, :] * self.gains(user_positions), axis=-1)

    def association(self, x: np.ndarray, t: float | np.ndarray) -> np.ndarray:
        """``(m, U)`` serving AP of each user for powers ``x`` (``(m, A)`` mW) at ``t`` (s)."""
        return self.association_at(self.positions(t), x)

    def f(self, x: np.ndarray, t: float | np.ndarray) -> np.ndarray:
        """Summed rate ``f(x, t)`` (Mbit/s).

        Args:
            x: ``(m, A)`` transmit powers (or one ``(A,)`` vector), mW.
            t: a time or ``(m,)`` times, s.

        Returns:
            ``(m,)`` values (0-d for a ``(A,)`` point).
        """
        x, t = self.checked_input(x, t)
        points = np.asarray(x, dtype=float)
        single = points.ndim == 1
        points = points.reshape(-1, self.dim)
        times = np.asarray(t, dtype=float)
        if times.size == 1:
            times = times.reshape(())
        elif times.shape != (points.shape[0],):
            raise ValueError(f"wlan: t must be a scalar or ({points.shape[0]},), got {times.shape}")
        values = np.empty(points.shape[0])
        fixed_gains = self.gains(self.positions(times)) if times.ndim == 0 else None
        for start in range(0, points.shape[0], _CHUNK):
            block = slice(start, start + _CHUNK)
            if fixed_gains is None:
                gains = self.gains(self.positions(times[block]))
            else:
                gains = fixed_gains
            values[block] = self._user_rates_from_gains(gains, points[block]).sum(axis=-1)
        return values.reshape(()) if single else values

    # ------------------------------------------------------------------ optimum
    def _slice_dbm(self, gains: np.ndarray):
        """Value and value-with-gradient of ``f(., t)`` in dBm, for the gains at ``t``."""
        noise, scale = self._noise, self._bandwidth / _LN2
        columns = np.arange(self.dim)

        def values(y: np.ndarray) -> np.ndarray:
            return self._user_rates_from_gains(gains, 10.0 ** (y / 10.0)).sum(axis=-1)

        def value_and_gradient(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            powers = 10.0 ** (y / 10.0)
            received = powers[:, None, :] * gains  # (k, U, A)
            serving_mask = received.argmax(axis=-1)[..., None] == columns  # (k, U, A)
            total = noise + received.sum(axis=-1)
            rest = noise + np.where(serving_mask, 0.0, received).sum(axis=-1)
            # W log2(1 + SINR) = W/ln2 (ln(N0 + sum_b R_b) - ln(N0 + sum_{b != a} R_b)), so
            # d/dP_b = W/ln2 g_b (1/total - [b != a]/rest), exact inside an association region.
            value = scale * np.log(total / rest).sum(axis=-1)
            inv_total, inv_rest = 1.0 / total, 1.0 / rest
            weights = inv_total[..., None] - np.where(serving_mask, 0.0, inv_rest[..., None])
            grad_p = np.einsum("kua,ua->ka", weights, gains)
            return value, scale * grad_p * powers * _DB_TO_LN

        return values, value_and_gradient

    def optimum(self, t: float) -> tuple[np.ndarray, float]:
        """``(x*, f*)`` at time ``t`` (s): the best powers ``(A,)`` (mW) and the best rate.

        Multi-start L-BFGS-B over the powers in dBm (:func:`maximize_box`): the best
        distinct points of a scrambled Sobol sample, the four best corners of the box and
        the maximizers already found at the (up to four) nearest cached times are
        polished together, the best few polished again alone. A call with no cached time
        within ``warm_window`` seconds (cold) uses a larger sample and more starts
        (:attr:`cold_settings`) than a warm one (:attr:`warm_settings`). Results are
        cached per time stamp (bounded), so the harness may call this once per query.
        """
        t = self.checked_time(t)
        key = float(t)
        hit = self._optima.get(key)
        if hit is None:
            with _one_blas_thread():
                y, value = self._search(key, self._warm_starts(key))
            x = np.clip(10.0 ** (y / 10.0), self.bounds[0], self.bounds[1])
            hit = (x, float(self.f(x, key)))
            self._optima.put(key, *hit)
        return hit[0].copy(), hit[1]

    def clear_cache(self) -> None:
        """Forget every cached optimum (for timing a cold call)."""
        self._optima.clear()

    def _warm_starts(self, t: float) -> np.ndarray | None:
        """Maximizers ``(k, A)`` in dBm already found at the cached times nearest to ``t``."""
        neighbours = self._optima.nearest(t, _WARM_STARTS)
        # Far from every cached time the old maximizers say little: search cold.
        if not neighbours or abs(neighbours[0][0] - t) > self.warm_window:
            return None
        return 10.0 * np.log10(np.array([x for _, x in neighbours]))

    def _search(self, t: float, warm_starts: np.ndarray | None) -> tuple[np.ndarray, float]:
        """``(y*, f*)``: best powers in dBm ``(A,)`` at time ``t`` and the best rate."""
        values, value_and_gradient = self._slice_dbm(self.gains(self.positions(t)))
        lower, upper = self.power_bounds_dbm
        settings = self.cold_settings if warm_starts is None else self.warm_settings
        # Sum-rate power control is often solved by a corner (each AP at its minimum or
        # maximum power): the best corners are cheap to find and good starts.
        corners = lower + self._corner_signs * (upper - lower)
        best_corners = corners[np.argsort(-values(corners))[:_CORNER_STARTS]]
        starts = best_corners if warm_starts is None else np.vstack([warm_starts, best_corners])
        y, value = maximize_box(
            value_and_gradient,
            lower,
            upper,
            settings=settings,
            extra_starts=starts,
            values=values,
        )
        return y, value
