"""Cart-pole policy search: tuning the four gains of a linear state feedback.

A pole on a cart whose velocity is commanded through a first-order lag (UI-TVBO's and
ET-GP-UCB's policy-search benchmark), with state ``s = [x, x_dot, phi, phi_dot]`` (cart
position in m, its velocity in m/s, pole angle from upright in rad, its rate in rad/s)
and input ``u`` (commanded velocity, m/s):

    x_ddot   = (K_u u - x_dot) / T_1,
    phi_ddot = m_p g l / (2 J_d) sin(phi) - m_p l / (2 J_d) cos(phi) (K_u u - x_dot) / T_1
               - mu_p / J_d phi_dot,
    J_d      = m_p (l / 2)^2 + m_p l^2 / 12 + m_p (d_b / 2)^2 / 4,

linearized at the upright equilibrium (``s' = A s + B u``, :func:`continuous_model`) and
discretized with a zero-order hold at ``T_s = 0.02 s`` (:func:`discretize`). The policy
``u_k = -theta . s_k`` closes the loop ``s_{k+1} = (A_d - B_d theta) s_k + w_k``,
``w_k ~ N(0, (6e-4)^2 I_4)``, from ``s_0 = [4, 0, 0.1, -0.01]``, and its cost is the
average quadratic cost of 20 s (``N = 1000`` samples ``k = 0 .. N-1``, ``s_0`` included)

    J_t(theta) = (1/N) sum_k (s_k' Q s_k + R u_k^2),     Q = 10 I_4,  R = 1.

The benchmark maximizes ``f(theta, t) = -J_t(theta)``, so a regret is
``J_t(theta) - min J_t``. The decision variable ``x = theta`` is in its own units, in
ET-GP-UCB's box (Table 6) ``[-3, -2] x [-6, -4] x [-50, -25] x [-4, -2]``.

Time counts BO steps (``step`` clock, ``T = 300``); ``t`` selects step ``floor(t)``. The
pole friction drifts with the step (:func:`friction`): ``"sudden"`` (ET-GP-UCB) multiplies
it by 2.5 from step 100 on; ``"smooth"`` (UI-TVBO) raises it smoothly between steps 50 and
100 and lets it oscillate afterwards. The process noise of step ``k`` is drawn from
``SeedSequence(seed, spawn_key=(k,))``: common random numbers per step, so ``J_t`` is a
deterministic smooth function of ``theta`` at each step, and every step has its own noise.

The optimum: the discrete-time LQR gain of ``(A_d, B_d, Q, R)`` (:meth:`CartPole.lqr_gain`)
is optimal for the infinite-horizon expected cost, not for this finite average over one
noise realization from one initial state; :meth:`CartPole.optimum` polishes the simulated
``J_t`` from the LQR gain (Newton's method on exact adjoint gradients, bounded L-BFGS-B as
the fallback) and keeps the better of the two, so regrets are never negative. See
``docs/cartpole.md`` for the measured gaps.

Closed loops are simulated in one of two equivalent ways: a batch of up to
:data:`BANDED_BATCH` gains at once as one banded triangular solve (the stacked equations
``s_k - M s_{k-1} = w_{k-1}``; LAPACK ``dtbtrs``, fastest for few gains, and also giving
the adjoint gradient), or, for more gains, a time loop vectorized over the gains.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import scipy.linalg
from scipy.linalg import lapack

from dynbo.benchmarks.base import Benchmark
from dynbo.benchmarks.search import polish

__all__ = [
    "BANDED_BATCH",
    "COST_CAP",
    "DRIFTS",
    "CartPole",
    "closed_loop_costs",
    "closed_loop_costs_and_gradients",
    "continuous_model",
    "discretize",
    "friction",
    "lqr_gain",
]

# Physical constants (SI units) of the pendulum of the UI-TVBO code and thesis.
MASS_POLE = 0.0804  # kg
LENGTH_POLE = 0.147  # m
FRICTION_NOMINAL = 2.2e-3  # N m s, mu_p0
INPUT_GAIN = 1.0  # K_u
LAG_TIME = 1.0  # s, T_1
BEARING_DIAMETER = 0.005  # m, d_b
GRAVITY = 9.81  # m / s^2
INERTIA = (
    MASS_POLE * (LENGTH_POLE / 2) ** 2
    + MASS_POLE * LENGTH_POLE**2 / 12
    + 0.25 * MASS_POLE * (BEARING_DIAMETER / 2) ** 2
)  # kg m^2, J_d

SAMPLE_TIME = 0.02  # s, T_s
STEPS = 1000  # samples of one 20 s episode
INITIAL_STATE = np.array([4.0, 0.0, 0.1, -0.01])  # the UI-TVBO code's s_0
PROCESS_NOISE_STD = 6e-4  # per state and sample
STATE_WEIGHT = 10.0  # Q = 10 I_4
INPUT_WEIGHT = 1.0  # R = 1

#: The friction drifts: ET-GP-UCB's jump and UI-TVBO's smooth profile.
DRIFTS = ("sudden", "smooth")
#: Step at which the ``"sudden"`` friction jumps, and the factor.
CHANGE_STEP = 100
CHANGE_FACTOR = 2.5

#: Ceiling of ``J``: the cost of an unstable closed loop (whose states overflow) or of a
#: barely stable one. Inside the Table 6 box every gain is stable at all frictions of
#: both drifts and ``J < 45``, so the cap only guards queries outside the box; it keeps
#: the values finite (a GP never sees ``inf`` or ``NaN``) and continuous (``min``).
COST_CAP = 1e3

#: Largest batch of gains simulated by one banded solve; larger batches use the time loop
#: (the banded solve costs ~0.1 ms per gain, the loop ~15 ms plus ~0.04 ms per gain).
BANDED_BATCH = 128

# Newton polish of the optimum (unit-cube units of the box): forward-difference step of
# the Hessian, iteration cap, and the step length at which the iterate has settled.
_HESSIAN_STEP = 1e-6
_NEWTON_ITERATIONS = 20
_NEWTON_TOLERANCE = 1e-11

# Non-zero entries of the block-bidiagonal band: (band row d, column c in a block, row r).
_BAND = np.array([(d, c, d - 4 + c) for d in range(1, 8) for c in range(4) if 0 <= d - 4 + c < 4])


# ---------------------------------------------------------------------- model
def friction(step: int | np.ndarray, drift: str) -> np.ndarray:
    """Pole friction ``mu_p`` (N m s) at integer step(s) ``step``.

    ``"sudden"`` (ET-GP-UCB, Sec. 5): ``mu_p0`` before step 100, ``2.5 mu_p0`` from it on.
    ``"smooth"`` (UI-TVBO code, ``get_params``): ``mu_p0`` up to step 50,
    ``mu_p0 (2.5 - 1.5 cos(pi (k - 50) / 50))`` for ``50 < k < 100``, and
    ``mu_p0 (4 - 0.5 sin(pi k / 100))`` from 100 on: continuous (``4 mu_p0`` at 100, with a
    kink there), in ``[3.5, 4.5] mu_p0`` after 100.

    Args:
        step: step index (scalar or array of any shape).
        drift: ``"sudden"`` or ``"smooth"``.

    Returns:
        Friction values, shaped like ``step``.
    """
    k = np.asarray(step, dtype=float)
    if drift == "sudden":
        factor = np.where(k < CHANGE_STEP, 1.0, CHANGE_FACTOR)
    elif drift == "smooth":
        rising = 2.5 - 1.5 * np.cos(math.pi * (k - 50.0) / 50.0)
        oscillating = 4.0 - 0.5 * np.sin(math.pi * k / 100.0)
        factor = np.where(k <= 50, 1.0, np.where(k < 100, rising, oscillating))
    else:
        raise ValueError(f"cartpole: drift must be one of {DRIFTS}, got {drift!r}")
    return FRICTION_NOMINAL * factor


def continuous_model(mu: float) -> tuple[np.ndarray, np.ndarray]:
    """``(A (4, 4), B (4, 1))`` of the pendulum linearized upright, friction ``mu`` (N m s).

    Units: states ``[m, m/s, rad, rad/s]``, input m/s, time s.
    """
    half = 0.5 * MASS_POLE * LENGTH_POLE / INERTIA
    a = np.array(
        [
            [0.0, 1.0, 0.0, 0.0],
            [0.0, -1.0 / LAG_TIME, 0.0, 0.0],
            [0.0, 0.0, 0.0, 1.0],
            [0.0, half / LAG_TIME, half * GRAVITY, -mu / INERTIA],
        ]
    )
    b = np.array([[0.0], [INPUT_GAIN / LAG_TIME], [0.0], [-half * INPUT_GAIN / LAG_TIME]])
    return a, b


@functools.lru_cache(maxsize=1024)
def discretize(mu: float, sample_time: float = SAMPLE_TIME) -> tuple[np.ndarray, np.ndarray]:
    """Zero-order-hold ``(A_d (4, 4), B_d (4, 1))`` at friction ``mu`` (cached, read-only).

    ``expm([[A, B], [0, 0]] T_s) = [[A_d, B_d], [0, I]]``: the input is held constant over
    each sample of ``sample_time`` seconds.
    """
    a, b = continuous_model(mu)
    augmented = np.zeros((5, 5))
    augmented[:4, :4] = a
    augmented[:4, 4:] = b
    exponential = scipy.linalg.expm(augmented * sample_time)
    a_d = exponential[:4, :4].copy()
    b_d = exponential[:4, 4:].copy()
    a_d.setflags(write=False)
    b_d.setflags(write=False)
    return a_d, b_d


def lqr_gain(a_d: np.ndarray, b_d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Infinite-horizon discrete LQR gain for ``Q = 10 I``, ``R = 1``, convention ``u = -theta s``.

    Args:
        a_d: ``(4, 4)`` state matrix.
        b_d: ``(4, 1)`` input matrix.

    Returns:
        ``(theta (4,), P (4, 4))``: ``theta = (R + B'PB)^-1 B'PA`` and the stabilizing
        solution ``P`` of the discrete algebraic Riccati equation.
    """
    q = STATE_WEIGHT * np.eye(4)
    r = np.array([[INPUT_WEIGHT]])
    p = scipy.linalg.solve_discrete_are(a_d, b_d, q, r)
    theta = np.linalg.solve(r + b_d.T @ p @ b_d, b_d.T @ p @ a_d)
    return theta[0], p


# ---------------------------------------------------------------------- simulation
def _episode_cost(states: np.ndarray, inputs: np.ndarray, steps: int) -> np.ndarray:
    """``(m,)`` average cost from ``(m, N, 4)`` states and ``(m, N)`` inputs."""
    with np.errstate(over="ignore", invalid="ignore"):
        total = STATE_WEIGHT * np.einsum("mki,mki->m", states, states) + INPUT_WEIGHT * (
            np.einsum("mk,mk->m", inputs, inputs)
        )
    return total / steps


def _cap(costs: np.ndarray) -> np.ndarray:
    """Costs with ``inf``/``NaN`` (overflowed unstable loops) and values above the cap
    replaced by :data:`COST_CAP`."""
    return np.where(np.isfinite(costs), np.minimum(costs, COST_CAP), COST_CAP)


def _band(theta: np.ndarray, a_d: np.ndarray, b_d: np.ndarray, steps: int) -> np.ndarray:
    """Banded lower-triangular matrix (LAPACK ``tb`` storage, ``(8, 4 m N)``, Fortran order)
    of the stacked closed-loop equations ``s_0 = e_0``, ``s_k - M s_{k-1} = e_k`` of ``m``
    gains one after the other (no coupling between gains)."""
    m = theta.shape[0]
    closed = a_d[None] - b_d[None, :, :1] * theta[:, None, :]  # (m, 4, 4) = A_d - B_d theta
    pattern = np.zeros((m, 4, 8))
    pattern[:, :, 0] = 1.0
    # Column 4 (k-1) + c of the matrix holds -M[r, c] in row 4 k + r, band row d = 4 + r - c.
    pattern[:, _BAND[:, 1], _BAND[:, 0]] = -closed[:, _BAND[:, 2], _BAND[:, 1]]
    band = np.empty((m, steps, 4, 8))
    band[:] = pattern[:, None]
    band[:, steps - 1, :, 1:] = 0.0  # the last block of a gain must not reach the next gain
    return band.reshape(-1, 8).T


def _forcing(m: int, noise: np.ndarray, initial_state: np.ndarray) -> np.ndarray:
    """``(4 m N, 1)`` right-hand side: ``s_0`` then ``w_0 .. w_{N-2}``, for each gain."""
    steps = noise.shape[0] + 1
    forcing = np.empty((m, steps, 4))
    forcing[:, 0] = initial_state
    forcing[:, 1:] = noise
    return forcing.reshape(-1, 1)


def _costs_banded(
    theta: np.ndarray,
    a_d: np.ndarray,
    b_d: np.ndarray,
    noise: np.ndarray,
    initial_state: np.ndarray,
    gradient: bool,
) -> tuple[np.ndarray, np.ndarray | None]:
    """Costs (and adjoint gradients) of a small batch of gains by banded solves.

    The gains share one triangular solve, whose substitution multiplies the (zero)
    coupling between consecutive gains by the previous gain's states: an overflowed
    (``inf``) unstable loop would turn its neighbours' states into ``NaN``. A batch with a
    non-finite result is therefore solved again one gain at a time.
    """
    m = theta.shape[0]
    costs, gradients = _costs_banded_batch(theta, a_d, b_d, noise, initial_state, gradient)
    finite = np.all(np.isfinite(costs)) and (gradients is None or np.all(np.isfinite(gradients)))
    if m == 1 or finite:
        return costs, gradients
    parts = [
        _costs_banded_batch(theta[i : i + 1], a_d, b_d, noise, initial_state, gradient)
        for i in range(m)
    ]
    costs = np.concatenate([part[0] for part in parts])
    if not gradient:
        return costs, None
    return costs, np.concatenate([part[1] for part in parts])


def _costs_banded_batch(
    theta: np.ndarray,
    a_d: np.ndarray,
    b_d: np.ndarray,
    noise: np.ndarray,
    initial_state: np.ndarray,
    gradient: bool,
) -> tuple[np.ndarray, np.ndarray | None]:
    """:func:`_costs_banded` for one batch, without the isolation of unstable loops."""
    m, steps = theta.shape[0], noise.shape[0] + 1
    band = _band(theta, a_d, b_d, steps)
    with np.errstate(over="ignore", invalid="ignore"):
        solution, _ = lapack.dtbtrs(
            band, _forcing(m, noise, initial_state), uplo="L", trans="N", diag="U", overwrite_b=1
        )
        states = solution.reshape(m, steps, 4)
        inputs = -np.einsum("mki,mi->mk", states, theta)
    costs = _episode_cost(states, inputs, steps)
    if not gradient:
        return costs, None
    with np.errstate(over="ignore", invalid="ignore"):
        # Adjoint equations lambda_k - M' lambda_{k+1} = dJ/ds_k: band' lambda = dJ/ds.
        ds = (2.0 / steps) * (
            STATE_WEIGHT * states - INPUT_WEIGHT * inputs[:, :, None] * theta[:, None, :]
        )
        adjoint, _ = lapack.dtbtrs(
            band, ds.reshape(-1, 1), uplo="L", trans="T", diag="U", overwrite_b=1
        )
        adjoint = adjoint.reshape(m, steps, 4)
        # dJ/dtheta = (direct through u_k = -theta . s_k) - sum_k (lambda_k . b) s_{k-1},
        # the second term from d(s_k - (A_d - b theta') s_{k-1})/dtheta = b s_{k-1}'.
        direct = -(2.0 * INPUT_WEIGHT / steps) * np.einsum("mk,mki->mi", inputs, states)
        through = np.einsum("mk,mki->mi", adjoint[:, 1:] @ b_d[:, 0], states[:, :-1])
        gradients = direct - through
    return costs, gradients


def _costs_loop(
    theta: np.ndarray,
    a_d: np.ndarray,
    b_d: np.ndarray,
    noise: np.ndarray,
    initial_state: np.ndarray,
) -> np.ndarray:
    """Costs of a large batch of gains by a time loop over ``(4, m)`` state columns."""
    m, steps = theta.shape[0], noise.shape[0] + 1
    gains = np.ascontiguousarray(theta.T)  # (4, m)
    b = b_d[:, :1]
    states = np.empty((steps, 4, m))
    states[0] = initial_state[:, None]
    inputs = np.empty((steps, m))
    correction = np.empty((4, m))
    with np.errstate(over="ignore", invalid="ignore"):
        for k in range(steps - 1):
            current, following = states[k], states[k + 1]
            np.einsum("im,im->m", gains, current, out=inputs[k])
            np.matmul(a_d, current, out=following)
            np.multiply(b, inputs[k], out=correction)  # u_k = -inputs[k]
            following -= correction
            following += noise[k][:, None]
        np.einsum("im,im->m", gains, states[steps - 1], out=inputs[steps - 1])
    # The sign of u does not matter to the quadratic cost.
    return _episode_cost(states.transpose(2, 0, 1), inputs.T, steps)


def _as_gains(theta: np.ndarray) -> np.ndarray:
    gains = np.asarray(theta, dtype=float)
    if gains.ndim == 1:
        gains = gains[None, :]
    if gains.ndim != 2 or gains.shape[1] != 4:
        raise ValueError(f"cartpole: gains must have shape (m, 4), got {np.shape(theta)}")
    return gains


def closed_loop_costs(
    theta: np.ndarray,
    a_d: np.ndarray,
    b_d: np.ndarray,
    noise: np.ndarray,
    initial_state: np.ndarray = INITIAL_STATE,
) -> np.ndarray:
    """Average quadratic costs ``J`` of closed loops ``u = -theta s``, capped at ``COST_CAP``.

    Args:
        theta: ``(m, 4)`` gains (or one ``(4,)`` gain).
        a_d, b_d: ``(4, 4)``, ``(4, 1)`` discrete model.
        noise: ``(N - 1, 4)`` process noise ``w_0 .. w_{N-2}`` (the same for every gain);
            the episode has ``N`` samples ``s_0 .. s_{N-1}``.
        initial_state: ``(4,)`` ``s_0``.

    Returns:
        ``(m,)`` costs (dimensionless).
    """
    gains = _as_gains(theta)
    noise = np.asarray(noise, dtype=float)
    start = np.asarray(initial_state, dtype=float)
    if gains.shape[0] > BANDED_BATCH:
        return _cap(_costs_loop(gains, a_d, b_d, noise, start))
    costs, _ = _costs_banded(gains, a_d, b_d, noise, start, gradient=False)
    return _cap(costs)


def closed_loop_costs_and_gradients(
    theta: np.ndarray,
    a_d: np.ndarray,
    b_d: np.ndarray,
    noise: np.ndarray,
    initial_state: np.ndarray = INITIAL_STATE,
) -> tuple[np.ndarray, np.ndarray]:
    """Costs as :func:`closed_loop_costs` and their exact gradients ``dJ/dtheta``.

    Gradients come from one adjoint (transposed) banded solve per batch; a capped cost
    has gradient 0.

    Returns:
        ``(costs (m,), gradients (m, 4))``.
    """
    gains = _as_gains(theta)
    noise = np.asarray(noise, dtype=float)
    start = np.asarray(initial_state, dtype=float)
    costs, gradients = [], []
    for first in range(0, gains.shape[0], BANDED_BATCH):
        chunk = gains[first : first + BANDED_BATCH]
        value, gradient = _costs_banded(chunk, a_d, b_d, noise, start, gradient=True)
        costs.append(value)
        gradients.append(gradient)
    raw = np.concatenate(costs)
    capped = _cap(raw)
    gradient = np.concatenate(gradients)
    keep = (capped == raw)[:, None] & np.isfinite(gradient)
    return capped, np.where(keep, gradient, 0.0)


@functools.lru_cache(maxsize=1024)
def _cached_lqr_gain(mu: float) -> np.ndarray:
    """LQR gain ``(4,)`` at friction ``mu`` (cached, read-only)."""
    theta = lqr_gain(*discretize(mu))[0]
    theta.setflags(write=False)
    return theta


@functools.lru_cache(maxsize=1024)
def _process_noise(seed: int, step: int, steps: int) -> np.ndarray:
    """``(steps - 1, 4)`` noise of BO step ``step`` (read-only): common random numbers."""
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(step,)))
    noise = PROCESS_NOISE_STD * rng.standard_normal((steps - 1, 4))
    noise.setflags(write=False)
    return noise


# ---------------------------------------------------------------------- benchmark
class CartPole(Benchmark):
    """Tune the LQR-parametrized policy ``u = -theta s`` of a cart-pole with drifting friction.

    ``f(theta, t) = -J_t(theta)`` (see the module docstring); ``x = theta`` in its own
    units, box of ET-GP-UCB's Table 6.

    Args:
        drift: ``"sudden"`` (ET-GP-UCB: friction x2.5 from step 100) or ``"smooth"``
            (UI-TVBO's profile, see :func:`friction`).
        noise_variance: ``sigma_n^2`` of the observation noise added by :meth:`observe`
            (0.02 in Table 6), in units of ``J^2``.
        horizon: ``T`` in steps.
        seed: the process-noise realization; step ``k`` draws from
            ``SeedSequence(seed, spawn_key=(k,))``.
        steps: samples ``N`` of one episode (1000 = 20 s; fewer make cheaper tests).

    Attributes:
        search_scaling: ``(4,)`` Table 6's scaling factors: ET-GP-UCB optimizes
            ``z = theta / scale``, which makes every side of the box about 8 units wide
            (``8.33`` for ``theta_3``) except ``theta_4`` (16; with UI-TVBO's ``1/4`` it is
            8 too), so that one Gamma lengthscale prior fits all axes. dynbo's policies map
            the box to the unit cube instead, which equalizes the sides exactly; the
            scaling only tells how a lengthscale prior in ``z`` units translates
            (divide by the side in ``z``). It does not change ``x``.
    """

    name = "cartpole"
    time_unit = "step"
    cost = 0.0
    dim = 4
    search_scaling = np.array([1 / 8, 1 / 4, 3.0, 1 / 8])
    #: ``(2, 4)`` Table 6's box of the gains (lower and upper corners), every instance's
    #: ``bounds``
    search_box = np.array([[-3.0, -6.0, -50.0, -4.0], [-2.0, -4.0, -25.0, -2.0]])
    reference = (
        "Brunzema, von Rohr, Solowjow & Trimpe, Event-Triggered Time-Varying Bayesian "
        "Optimization, Sec. 5 and App. G Table 6; Brunzema, von Rohr & Trimpe (2022), On "
        "Controller Tuning with Time-Varying Bayesian Optimization"
    )

    def __init__(
        self,
        *,
        drift: str = "sudden",
        noise_variance: float = 0.02,
        horizon: float = 300,
        seed: int = 0,
        steps: int = STEPS,
    ) -> None:
        if drift not in DRIFTS:
            raise ValueError(f"cartpole: drift must be one of {DRIFTS}, got {drift!r}")
        if not noise_variance >= 0:
            raise ValueError(f"cartpole: noise_variance must be >= 0, got {noise_variance!r}")
        if not horizon > 0:
            raise ValueError(f"cartpole: horizon must be positive, got {horizon!r}")
        if isinstance(seed, bool) or int(seed) != seed or seed < 0:
            raise ValueError(f"cartpole: seed must be an integer >= 0, got {seed!r}")
        if isinstance(steps, bool) or int(steps) != steps or steps < 2:
            raise ValueError(f"cartpole: steps must be an integer >= 2, got {steps!r}")
        self.drift = drift
        self.noise_variance = float(noise_variance)
        self.horizon = float(horizon)
        self.seed = int(seed)
        self.steps = int(steps)
        self.bounds = self.search_box.copy()
        # The jump, and the fresh noise realization of every step, make J_t rough in t:
        # Matern-1/2, also TV-GP-UCB's Markov factor that ET-GP-UCB compares with. The
        # smooth profile is continuous with one kink (step 100): Matern-3/2.
        self.temporal_kernel = "matern12" if drift == "sudden" else "matern32"
        self._optima: dict[int, tuple[np.ndarray, float]] = {}

    # ------------------------------------------------------------------ time
    def step_index(self, t: float | np.ndarray) -> np.ndarray:
        """Integer step ``floor(t)`` of time(s) ``t`` (steps); ``t < 0`` is an error."""
        steps = np.floor(np.asarray(t, dtype=float)).astype(np.int64)
        if np.any(steps < 0):
            raise ValueError("cartpole: times must be >= 0")
        return steps

    def friction(self, t: float | np.ndarray) -> np.ndarray:
        """Pole friction ``mu_p`` (N m s) at time(s) ``t``."""
        return friction(self.step_index(t), self.drift)

    def system(self, t: float) -> tuple[np.ndarray, np.ndarray]:
        """``(A_d (4, 4), B_d (4, 1))`` at time ``t`` (read-only)."""
        return discretize(float(self.friction(t)))

    def process_noise(self, t: float) -> np.ndarray:
        """``(steps - 1, 4)`` process noise of the episode at time ``t`` (read-only)."""
        return _process_noise(self.seed, int(self.step_index(t)), self.steps)

    # ------------------------------------------------------------------ costs
    def episode_cost(self, theta: np.ndarray, t: float | np.ndarray) -> np.ndarray:
        """``J_t(theta) = -f(theta, t)``: ``(m,)`` costs of ``(m, 4)`` gains (0-d for ``(4,)``)."""
        return -self.f(theta, t)

    def episode_cost_and_gradient(
        self, theta: np.ndarray, t: float
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(J (m,), dJ/dtheta (m, 4))`` of ``(m, 4)`` gains at one time ``t``."""
        a_d, b_d = self.system(t)
        return closed_loop_costs_and_gradients(theta, a_d, b_d, self.process_noise(t))

    def f(self, x: np.ndarray, t: float | np.ndarray) -> np.ndarray:
        """``-J_t(theta)``, the closed loops of one time simulated together.

        Args:
            x: ``(m, 4)`` gains (or one ``(4,)`` gain), in their own units.
            t: a time or ``(m,)`` times in steps (step ``floor(t)``); gains are grouped
                by step, each group sharing that step's model and noise.

        Returns:
            ``(m,)`` values (0-d for a ``(4,)`` gain), in ``[-COST_CAP, 0)``.
        """
        x, t = self.checked_input(x, t)
        single = np.asarray(x).ndim == 1
        gains = _as_gains(x)
        steps = np.broadcast_to(self.step_index(t), (gains.shape[0],))
        values = np.empty(gains.shape[0])
        for step in np.unique(steps):
            rows = steps == step
            a_d, b_d = self.system(float(step))
            noise = _process_noise(self.seed, int(step), self.steps)
            values[rows] = -closed_loop_costs(gains[rows], a_d, b_d, noise)
        return values.reshape(()) if single else values

    # ------------------------------------------------------------------ optimum
    def lqr_gain(self, t: float) -> np.ndarray:
        """``(4,)`` discrete LQR gain at time ``t`` (the spec's ``theta*_t``; not clipped
        to the box, not the exact maximizer of ``f``: see :meth:`optimum`)."""
        return _cached_lqr_gain(float(self.friction(t))).copy()

    def optimum(self, t: float) -> tuple[np.ndarray, float]:
        """``(theta*, -J*)``: the minimizer of the simulated ``J_t`` over the box and its value.

        Candidates: the LQR gain clipped to the box, and the minimum of ``J_t`` found
        from it by Newton's method (:meth:`_newton`), or by bounded L-BFGS-B
        (:func:`~dynbo.benchmarks.search.polish`) where Newton fails; the better one
        wins. ``J_t`` has a single minimum in the box (checked against brute force in the
        tests and ``docs/cartpole.md``), less than 0.01 % below ``J_t(LQR gain)``.
        Cached per step.
        """
        t = self.checked_time(t)
        step = int(self.step_index(t))
        if step not in self._optima:
            self._optima[step] = self._search_optimum(step)
        x, value = self._optima[step]
        return x.copy(), value

    def _search_optimum(self, step: int) -> tuple[np.ndarray, float]:
        lower, upper = self.bounds
        start = np.clip(self.lqr_gain(step), lower, upper)
        start_value = float(self.f(start, step))
        found = self._newton(step, start)
        if found is None:
            # Newton left the box or met a non-convex patch: bounded L-BFGS-B instead.
            def value_and_gradient(points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
                costs, gradients = self.episode_cost_and_gradient(points, step)
                return -costs, -gradients

            points, values = polish(value_and_gradient, start[None, :], lower, upper, tight=True)
            found = points[0], float(values[0])
        if start_value >= found[1]:
            return start.copy(), start_value
        return found[0].copy(), found[1]

    def _newton(self, step: int, start: np.ndarray) -> tuple[np.ndarray, float] | None:
        """Newton's method on ``J_t`` in the unit cube of the box, from ``start``.

        ``J_t`` is smooth and, near the LQR gain, convex, so Newton converges in a few
        iterations (a cheaper and tighter polish than L-BFGS-B). The Hessian is a forward
        difference of the exact gradients (all five gradients in one batched solve).

        Returns:
            ``(theta (4,), -J)`` at a point where the gradient vanishes to round-off, or
            ``None`` when an iterate leaves the box, the Hessian is not positive definite,
            or the iteration does not settle.
        """
        lower, upper = self.bounds
        width = upper - lower
        unit = (start - lower) / width
        probes = _HESSIAN_STEP * np.eye(4)
        for _ in range(_NEWTON_ITERATIONS):
            points = lower + width * np.vstack([unit, unit + probes])
            costs, gradients = self.episode_cost_and_gradient(points, step)
            gradients = gradients * width  # d/du = width * d/dtheta
            hessian = (gradients[1:] - gradients[0]) / _HESSIAN_STEP
            hessian = 0.5 * (hessian + hessian.T)
            if not np.all(np.isfinite(hessian)) or np.any(costs >= COST_CAP):
                return None
            try:
                factor = scipy.linalg.cho_factor(hessian)
            except np.linalg.LinAlgError:
                return None
            move = -scipy.linalg.cho_solve(factor, gradients[0])
            unit = unit + move
            if np.any(unit < 0.0) or np.any(unit > 1.0):
                return None
            if np.max(np.abs(move)) < _NEWTON_TOLERANCE:
                theta = lower + width * unit
                return theta, float(self.f(theta, step))
        return None

    def __repr__(self) -> str:
        return f"CartPole(drift={self.drift!r}, seed={self.seed}, T={self.horizon})"
