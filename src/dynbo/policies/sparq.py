"""SparQ-GP-UCB and W-SparQ-GP-UCB: GP-UCB on fresh re-evaluations of a k-DPP subset.

Mauduit, Berthier & Simonetto (2025), No-Regret Gaussian Process Optimization of Time-Varying
Functions (Algorithms 1 and 2). Besides its main query, the policy asks for *additional*
queries: fresh values ``f_t(x_s)`` at past inputs, taken at the current time
(``Query.additional``, answered through ``Policy.observe_additional``).

* :class:`SparQGPUCB` (``"sparq-gp-ucb"``, Alg. 1): every step, after choosing ``x_t``,
  it draws ``Q_t`` distinct inputs from ``{x_1, ..., x_t}`` by approximate k-DPP
  sampling under the GP kernel (:mod:`dynbo.kdpp`; all of them while there are at most
  ``Q_t``) and asks for their values now. When the first answer arrives, the regression
  set becomes the answers alone (older outputs are discarded); ``x_{t+1}`` maximizes
  ``mu + beta sigma`` with the radius ``beta`` of eq. 12 (:class:`SparQBeta`).
* :class:`WSparQGPUCB` (``"w-sparq-gp-ucb"``, Alg. 2): the same re-query, only at window
  starts ``t_1 = 1``, ``t_{j+1} = t_j + floor(t_j^(a~/a)) + 1`` (eq. 32); inside a
  window, the new observations are appended to the regression set ("standard GP-UCB").

The uncertainty injection: an observation taken at ``tau`` is used at ``t`` with noise
variance ``sigma^2 (1 + (t - tau)^alpha)`` (eqs. 9-10), through the GP's per-observation
noise multipliers, refreshed before each fit (``t``: the latest observation time, the
time of the data the posterior ``mu_t, sigma_t`` describes; a fresh observation has
variance ``sigma^2``). Time ``t`` of the windows and of ``Q_t`` is the iteration index
(``suggest`` calls), as in the paper's discrete time. ``Q_t`` is ``ceil(ln(t + 1))`` by
default, or (``queries_rule="approximation"``) the smallest size whose k-DPP meets the
paper's approximation condition ``E[tr(K - U)] / sigma^2 <= eta`` (Prop. 3.2; computed in
closed form, :func:`dynbo.kdpp.approximation_size`). The open points of the paper are
options (``docs/policies/sparq.md``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from dynbo.acquisition.constraints import admissible
from dynbo.acquisition.ucb import BetaSchedule, make_beta_schedule
from dynbo.kdpp import approximation_size, nystrom_residual_trace, sample_kdpp, unique_rows
from dynbo.policies.base import Diagnostics, Policy, register
from dynbo.policies.tunables import Tunable
from dynbo.validation import (
    boolean,
    count,
    finite_number,
    optional_number,
    positive_int,
    positive_number,
)

__all__ = ["NOISE_MODELS", "QUERY_RULES", "SparQGPUCB", "WSparQGPUCB", "window_starts"]

#: the noise models of the regression set: ``sigma^2 (1 + (t - tau)^alpha)`` or ``sigma^2``
NOISE_MODELS = ("heteroscedastic", "homoscedastic")

#: the rules for ``Q_t``: ``ceil(c_Q (ln(t + 1))^d)``, or the smallest k-DPP size that meets
#: the approximation condition ``E[tr(K - U)] / sigma^2 <= eta``
QUERY_RULES = ("log", "approximation")

#: ``eta`` of the approximation rule when none is given: Prop. 3.4 (Burt et al.'s
#: Proposition 1) turns ``2 KL <= eta' <= 1/5`` into bounds on the posterior mean and
#: variance, and ``E[KL] <= eta``, so ``eta = 0.1`` is the largest that keeps ``2 eta <= 1/5``
DEFAULT_ETA = 0.1


#: the longest window (steps): beyond any run, so no later window starts
MAX_WINDOW_LENGTH = 2**53

#: the largest ``Q_t`` the rule returns (the k-DPP picks at most the distinct past inputs)
MAX_QUERY_COUNT = 2**31


def window_starts(alpha: float, alpha_tilde: float, horizon: int) -> list[int]:
    """W-SparQ's window starts up to ``horizon``: ``t_1 = 1``, ``t_{j+1} = t_j + L_j``.

    ``L_j = floor(t_j^(a~/a)) + 1`` (eq. 32: ``t_{j+1} - t_j`` in
    ``(t_j^(a~/a), t_j^(a~/a) + 1]``).
    """
    starts, t = [], 1
    while t <= horizon:
        starts.append(t)
        t = t + window_length(t, alpha, alpha_tilde)
    return starts


def window_length(start: int, alpha: float, alpha_tilde: float) -> int:
    """``floor(start^(a~/a)) + 1``; the power is nudged up by 1e-9 so exact integers floor right.

    At most :data:`MAX_WINDOW_LENGTH` steps (a window longer than any run; a tiny
    ``alpha`` would otherwise overflow the power).
    """
    exponent = alpha_tilde / alpha
    if start > 1 and exponent * math.log(start) >= math.log(MAX_WINDOW_LENGTH):
        return MAX_WINDOW_LENGTH
    return min(int(math.floor(start**exponent + 1e-9)) + 1, MAX_WINDOW_LENGTH)


#: the largest noise multiplier of an aged observation (W-SparQ's ``1 + age^alpha``)
MAX_NOISE_MULTIPLIER = 1e12


@register
class SparQGPUCB(Policy):
    """SparQ-GP-UCB (Alg. 1): re-query a k-DPP subset of the past inputs at every step.

    Args:
        alpha: the uncertainty-injection exponent ``alpha >= 0`` of
            ``sigma^2 (1 + (t - tau)^alpha)`` (only used with the heteroscedastic noise
            model or ``include_window_start_obs``; default 1, the paper's "moderate"
            range ``[1/3, 1]``).
        queries: a fixed ``Q_t`` (>= 1) instead of the rule below.
        queries_scale, queries_min: ``Q_t = max(queries_min, ceil(queries_scale
            (ln(t + 1))^d))`` (the paper gives only ``Q_t = O(log^d t)``; defaults 1, 1).
            ``queries_min`` is a floor under the approximation rule too.
        queries_rule: ``"log"`` (default: the rule above) or ``"approximation"``: the
            smallest ``Q >= queries_min`` whose M-DPP over the distinct past inputs ``X``
            (``x_t`` included) meets the condition of Prop. 3.2, ``E[tr(K - U)] / sigma^2
            <= eta`` (``K`` the GP's prior covariance over ``X``, ``U = K_XZ K_ZZ^+ K_ZX``
            the Nystrom approximation from the sample ``Z``, the expectation over the M-DPP,
            ``sigma^2`` the noise variance; at most the number of distinct past inputs,
            which always meets it: ``U = K``). Not with ``queries`` or a ``queries_scale``
            other than 1.
        eta: the approximation rule's tolerance, finite ``> 0`` (default 0.1: Prop. 3.4's
            ``2 eta <= 1/5``); only with ``queries_rule="approximation"``.
        noise_model: ``"homoscedastic"`` (default here: the regression set is fresh,
            ``Sigma = sigma^2 I``) or ``"heteroscedastic"`` (the injection above).
        include_window_start_obs: keep the main observation of a re-query step in the
            regression set next to the fresh answers (default ``False``: the paper's
            ``X^r = X^s``).
        dpp_c_mix, dpp_max_steps: the k-DPP chain's step count
            ``min(max_steps, ceil(c_mix N M (ln ln(N+2) + ln M + 2 ln N)))``.
        beta: default ``{"kind": "sparq", "B": 5, "delta": 0.1}`` (eq. 12, a radius:
            ``kappa = beta``).
        **kwargs: the shared :class:`~dynbo.policies.base.Policy` arguments.
    """

    name = "sparq-gp-ucb"
    reference = (
        "Mauduit, Berthier & Simonetto (2025), No-Regret Gaussian Process Optimization of "
        "Time-Varying Functions, Algorithm 1"
    )
    models_time = False
    beta_is_radius = True
    #: the noise model when the option is not given
    default_noise_model = "homoscedastic"
    #: ``alpha`` (the paper's moderate range [1/3, 1] inside) and the constant of the
    #: logarithmic ``Q_t`` (not with a fixed ``queries`` or the approximation rule)
    tunables = {
        **Policy.tunables,
        "alpha": Tunable(0.1, 3.0, log=True),
        "queries_scale": Tunable(0.25, 4.0, log=True, conflicts=("queries", "queries_rule")),
    }

    def __init__(
        self,
        bounds: Any,
        *,
        alpha: float = 1.0,
        queries: int | None = None,
        queries_scale: float = 1.0,
        queries_min: int = 1,
        queries_rule: str = "log",
        eta: float | None = None,
        noise_model: str | None = None,
        include_window_start_obs: bool = False,
        dpp_c_mix: float = 1.0,
        dpp_max_steps: int = 10_000,
        beta: BetaSchedule | dict[str, Any] | str | float | None = None,
        **kwargs: Any,
    ) -> None:
        if beta is None:
            beta = {"kind": "sparq"}
        super().__init__(bounds, beta=make_beta_schedule(beta), **kwargs)
        self.alpha = finite_number("alpha", alpha)
        if self.alpha < 0:
            raise ValueError(f"alpha must be >= 0, got {alpha!r}")
        self.queries = None if queries is None else positive_int("queries", queries)
        self.queries_scale = finite_number("queries_scale", queries_scale)
        if self.queries_scale <= 0:
            raise ValueError(f"queries_scale must be positive, got {queries_scale!r}")
        self.queries_min = positive_int("queries_min", queries_min)
        if not isinstance(queries_rule, str) or queries_rule not in QUERY_RULES:
            raise ValueError(f"queries_rule must be one of {QUERY_RULES}, got {queries_rule!r}")
        self.queries_rule = queries_rule
        if queries_rule == "log":
            if eta is not None:
                raise ValueError(
                    "eta is the tolerance of queries_rule='approximation'; the log rule "
                    f"does not use it, got eta={eta!r}"
                )
            self.eta: float | None = None
        else:
            # two rules for one Q_t: refuse rather than silently ignore one of them
            if self.queries is not None:
                raise ValueError(
                    "queries fixes Q_t and queries_rule='approximation' chooses it: give one"
                )
            if self.queries_scale != 1.0:
                raise ValueError(
                    "queries_scale scales the log rule; queries_rule='approximation' does "
                    f"not use it, got queries_scale={queries_scale!r}"
                )
            self.eta = positive_number("eta", DEFAULT_ETA if eta is None else eta)
        noise_model = type(self).default_noise_model if noise_model is None else noise_model
        if noise_model not in NOISE_MODELS:
            raise ValueError(f"noise_model must be one of {NOISE_MODELS}, got {noise_model!r}")
        self.noise_model = noise_model
        self.include_window_start_obs = boolean(
            "include_window_start_obs", include_window_start_obs
        )
        self.dpp_c_mix = finite_number("dpp_c_mix", dpp_c_mix)
        if self.dpp_c_mix <= 0:
            raise ValueError(f"dpp_c_mix must be positive, got {dpp_c_mix!r}")
        self.dpp_max_steps = positive_int("dpp_max_steps", dpp_max_steps)
        # the distinct past inputs (original units) the k-DPP chooses from
        self._past_inputs = torch.empty((0, self.dim), dtype=torch.float64)
        # the time of the re-query step's main query; None when no answer is awaited
        self._round_time: float | None = None
        self._additional_total = 0

    # ------------------------------------------------------------------ the schedule
    def query_count(self, step: int) -> int:
        """``Q_t`` at step ``t`` (1-based): ``queries`` or the logarithmic rule.

        Under ``queries_rule="approximation"`` the size depends on the past inputs and the
        kernel, not on ``t`` alone: see :meth:`approximation_count`.
        """
        if self.queries is not None:
            return self.queries
        raw = self.queries_scale * math.log(step + 1) ** self.dim - 1e-12
        # more queries than this is more than any dataset holds; an overflow is no error
        rule = MAX_QUERY_COUNT if not raw < MAX_QUERY_COUNT else math.ceil(raw)
        return max(self.queries_min, rule)

    def approximation_count(self, inputs: torch.Tensor) -> tuple[int, float | None]:
        """``Q`` of the approximation rule over the GP inputs ``(N, D)`` of the candidates.

        Returns:
            ``(Q, E[tr(K - U)] / sigma^2)`` over the distinct rows (the ratio ``None`` when
            ``sigma^2 = 0`` and the residual is not 0), O(N^3) for the eigenvalues of ``K``.
        """
        points = self._distinct_float64(inputs)
        with torch.no_grad():
            kernel = self._gp.covariance(points, points).cpu().numpy()
        noise = float(self._gp.hyperparameters.noise)
        assert self.eta is not None  # only called under the approximation rule
        size, residual = approximation_size(kernel, self.eta * noise, self.queries_min)
        return size, _ratio(residual, noise)

    def sample_trace_ratio(self, inputs: torch.Tensor, chosen: torch.Tensor) -> float | None:
        """``tr(K - U_Z) / sigma^2`` of one subset: the drawn sample's condition, O(N Q^2).

        Args:
            inputs: ``(N, D)`` GP inputs of the candidates (duplicates allowed).
            chosen: ``(Q, D)`` GP inputs of the subset ``Z``.
        """
        points = self._distinct_float64(inputs)
        subset = chosen.to(torch.float64)
        with torch.no_grad():
            diagonal = self._gp.prior_variance(points).cpu().numpy()
            cross = self._gp.covariance(points, subset).cpu().numpy()
            core = self._gp.covariance(subset, subset).cpu().numpy()
        residual = nystrom_residual_trace(diagonal, cross, core)
        return _ratio(residual, float(self._gp.hyperparameters.noise))

    @staticmethod
    def _distinct_float64(inputs: torch.Tensor) -> torch.Tensor:
        # the k-DPP's candidates (first occurrences), in float64 so that the eigenvalues'
        # round-off is float64's whatever the model's dtype
        distinct = unique_rows(inputs.detach().cpu().numpy())
        return inputs[torch.as_tensor(distinct, device=inputs.device)].to(torch.float64)

    def requeries_at(self, step: int) -> bool:
        """Whether step ``t`` re-queries (SparQ: every step)."""
        return True

    @property
    def additional_total(self) -> int:
        """``N_T``: additional observations received so far."""
        return self._additional_total

    # ------------------------------------------------------------------ hooks
    def _prepare(self, t: float, diag: Diagnostics) -> None:
        diag.extra["additional_total"] = self._additional_total
        if self.dataset_size:
            # a fit follows and refactorizes when it sets its values: one O(n^3), not two
            fit_follows = self.learn_hyperparameters and self.dataset_size >= self.min_fit_size
            self._gp.set_noise_scale(
                self.noise_multipliers().to(self.device), refactorize=not fit_follows
            )

    def noise_multipliers(self) -> torch.Tensor:
        """``(n,)`` multipliers ``1 + (t - tau_i)^alpha`` of ``sigma^2`` (ones if homoscedastic).

        ``t`` is the latest observation time; an observation taken then has multiplier 1.
        """
        n = self.dataset_size
        if self.noise_model == "homoscedastic" or n == 0:
            return torch.ones(n, dtype=self.dtype)
        reference = self._last_observe_time if self._last_observe_time is not None else 0.0
        age = (reference - self._t).clamp_min(0.0)
        # held at MAX_NOISE_MULTIPLIER: an observation that old is ignored either way,
        # and age ** alpha overflows (to inf, a NaN in the covariance) for long runs
        grown = (1.0 + age.pow(self.alpha)).clamp_max(MAX_NOISE_MULTIPLIER)
        return torch.where(age > 0, grown, torch.ones_like(age))

    def _observe(self, x: torch.Tensor, t: float, y: float) -> None:
        # appended with multiplier 1 (fresh); every multiplier is refreshed before the fit
        self._remember_input(x)
        self._append(x, t, y)

    def _remember_input(self, x: torch.Tensor) -> None:
        row = x.reshape(1, self.dim).to(torch.float64)
        if not bool((self._past_inputs == row).all(dim=1).any()):
            self._past_inputs = torch.cat([self._past_inputs, row])

    def _additional_queries(self, t: float, unit: torch.Tensor, diag: Diagnostics) -> np.ndarray:
        step = self._iteration + 1
        if not self.requeries_at(step):
            diag.extra["requery"] = False
            return np.empty((0, self.dim))
        chosen = torch.as_tensor(self._domain.point_from_unit(unit), dtype=torch.float64)
        pool = self._past_inputs
        if not bool((pool == chosen.reshape(1, -1)).all(dim=1).any()):
            pool = torch.cat([pool, chosen.reshape(1, -1)])

        def gp_inputs(points: torch.Tensor) -> torch.Tensor:
            times = torch.zeros(len(points), dtype=self.dtype)
            return self._gp_inputs(self._to_unit(points.to(self.dtype)), times).to(self.device)

        # re-queries go only where the main query may: within its step limit and, in
        # safe mode, where every constraint's lower bound is >= 0 now
        allowed = admissible(
            pool, chosen, self._safety, lambda p: self._constraints.predict(gp_inputs(p))
        ).cpu()
        diag.extra["requeries_excluded"] = int((~allowed).sum())
        pool = pool[allowed | (pool == chosen.reshape(1, -1)).all(dim=1)]
        inputs = gp_inputs(pool)
        if self.queries_rule == "approximation":
            size, expected_ratio = self.approximation_count(inputs)
            diag.extra["trace_ratio"] = expected_ratio
        else:
            size = self.query_count(step)
        sample = sample_kdpp(
            inputs,
            size,
            self._gp.covariance,
            self._generator,
            c_mix=self.dpp_c_mix,
            max_steps=self.dpp_max_steps,
        )
        self._round_time = t
        picked = torch.as_tensor(sample.indices, device=inputs.device)
        diag.extra.update(
            requery=True,
            queries=size,
            sample_trace_ratio=self.sample_trace_ratio(inputs, inputs[picked]),
            dpp_candidates=len(pool),
            dpp_steps=sample.steps,
            dpp_accepted=sample.accepted,
        )
        # the pool holds inputs as the model's dtype kept them (float32 rounds them)
        return self._domain.snap(pool[torch.as_tensor(sample.indices)].numpy())

    def _observe_additional(self, x: torch.Tensor, t: torch.Tensor, y: torch.Tensor) -> None:
        if self._round_time is not None:
            # the first answer of a re-query step: the regression set becomes the fresh
            # answers (with the step's main observation, if asked to keep it)
            keep = torch.zeros(self.dataset_size, dtype=torch.bool)
            if self.include_window_start_obs:
                keep = self._t >= self._round_time
            self._keep_only(keep)
            self._round_time = None
        for row in range(x.shape[0]):
            self._append(x[row], float(t[row]), float(y[row]))
        self._additional_total += int(x.shape[0])

    # ------------------------------------------------------------------ persistence
    def _extra_state(self) -> dict[str, Any]:
        return {
            "past_inputs": self._past_inputs.clone(),
            "round_time": self._round_time,
            "additional_total": self._additional_total,
        }

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        past = torch.as_tensor(state["past_inputs"], dtype=torch.float64)
        if past.ndim != 2 or past.shape[1] != self.dim:
            raise ValueError(f"past_inputs must have shape (P, {self.dim})")
        self._past_inputs = past.clone()
        self._round_time = optional_number("round_time", state["round_time"])
        self._additional_total = count("additional_total", state["additional_total"])


def _ratio(residual: float, noise: float) -> float | None:
    """``residual / sigma^2``; with ``sigma^2 = 0``: 0 if the residual is 0, else ``None``.

    ``None`` rather than ``inf``: diagnostics are stored as strict JSON.
    """
    if noise > 0:
        return residual / noise
    return 0.0 if residual == 0 else None


@register
class WSparQGPUCB(SparQGPUCB):
    """W-SparQ-GP-UCB (Alg. 2): re-query only at window starts, append inside windows.

    Args:
        alpha: the uncertainty-injection exponent, ``> 0`` here (the windows grow as
            ``t^(a~/alpha)``); default 1.
        alpha_tilde: the window parameter ``a~`` in ``(0, 1/3)`` (default 1/4).
        noise_model: default ``"heteroscedastic"`` (inside a window the regression set
            mixes the window start's answers with later observations; the analysis'
            virtual dataset has variance ``sigma^2 (1 + (t - tau)^alpha)``).
        **kwargs: the :class:`SparQGPUCB` arguments.
    """

    name = "w-sparq-gp-ucb"
    reference = (
        "Mauduit, Berthier & Simonetto (2025), No-Regret Gaussian Process Optimization of "
        "Time-Varying Functions, Algorithm 2 and eq. 32"
    )
    default_noise_model = "heteroscedastic"
    #: SparQ's and the window parameter ``a~`` inside ``(0, 1/3)`` (default 1/4)
    tunables = {**SparQGPUCB.tunables, "alpha_tilde": Tunable(0.05, 0.33)}

    def __init__(self, bounds: Any, *, alpha_tilde: float = 0.25, **kwargs: Any) -> None:
        super().__init__(bounds, **kwargs)
        if self.alpha <= 0:
            raise ValueError(
                f"alpha must be > 0 for {self.name} (its windows grow as t^(alpha_tilde / "
                f"alpha)), got {self.alpha!r}"
            )
        self.alpha_tilde = finite_number("alpha_tilde", alpha_tilde)
        if not 0.0 < self.alpha_tilde < 1.0 / 3.0:
            raise ValueError(f"alpha_tilde must be in (0, 1/3), got {alpha_tilde!r}")
        self._next_window = 1

    def requeries_at(self, step: int) -> bool:
        """Whether step ``t`` starts a window (eq. 32)."""
        return step == self._next_window

    def _additional_queries(self, t: float, unit: torch.Tensor, diag: Diagnostics) -> np.ndarray:
        step = self._iteration + 1
        starts = self.requeries_at(step)
        out = super()._additional_queries(t, unit, diag)
        if starts:
            self._next_window = step + window_length(step, self.alpha, self.alpha_tilde)
        diag.extra["next_window"] = self._next_window
        return out

    def _extra_state(self) -> dict[str, Any]:
        return {**super()._extra_state(), "next_window": self._next_window}

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        super()._load_extra_state(state)
        self._next_window = count("next_window", state["next_window"])
