"""How a policy refits its hyperparameters at each iteration: the strategy and its restart rule.

A TVBO policy refits ``(lambda, l_S, l_T, sigma^2)`` at every iteration, and under the
papers' real-time protocol the time it takes is regret. Two strategies (the
``fit_strategy`` option):

- ``"two-start"``: L-BFGS-B (gradient only) from the previous values (the warm start) and
  from the fresh values (the priors' medians) at every fit, the better optimum kept. Up to
  ``fit_iterations`` iterations each: about 50 likelihood evaluations per fit. The
  behaviour of dynbo before the ``fit_strategy`` option; reproductions made then rerun
  exactly with it.
- ``"warm-newton"`` (the default): projected Newton with the analytic Hessian from the warm
  start (2-4 evaluations when little changed) and from the runner-up, and from the fresh
  values only when :class:`RestartRule` says the warm optimum is in doubt.

Online fits on little data often have two basins of nearly equal value (a smooth model with
long lengthscales and a large noise, a rough one with short lengthscales and a small noise;
a static one with a long ``l_T`` and a drifting one with a short ``l_T``), and which is better
changes from one observation to the next. A warm start alone stays in the basin it is in;
the two-start fit finds the other one again from the fresh values at every fit. The cheap
strategy keeps it instead: the runner-up is the best optimum of the last fit that lies in
another basin (a log-hyperparameter differs by more than :data:`DISTINCT_LOG_CHANGE`)
and is not more than :data:`RUNNER_UP_MARGIN` worse, and each fit also runs Newton from it
(2-4 evaluations more). :class:`RestartRule` covers the basins neither start is in. What
the rule remembers between fits, :class:`FitHistory`, is part of the policy's state.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dynbo.models.fit import FitResult, StartOutcome, fit_hyperparameters
from dynbo.models.gp import SpatioTemporalGP
from dynbo.models.kernel import HyperparameterBounds, Hyperparameters

__all__ = [
    "DISTINCT_LOG_CHANGE",
    "FIT_STRATEGIES",
    "RESTART_RULE",
    "RUNNER_UP_MARGIN",
    "FitHistory",
    "RestartRule",
    "fit_warm",
]

#: values of the ``fit_strategy`` option (the first is the default)
FIT_STRATEGIES = ("warm-newton", "two-start")
#: two optima lie in different basins when a log-hyperparameter differs by more than this
#: (two searches that meet in one optimum end within ~1e-4 of each other)
DISTINCT_LOG_CHANGE = 0.1
#: the runner-up is kept while its objective is at most this much (nats) above the best:
#: a likelihood ratio of e^3 = 20, which a few new observations can overturn
RUNNER_UP_MARGIN = 3.0


def _log_distance(a: Hyperparameters, b: Hyperparameters) -> float:
    """The largest difference of a log-hyperparameter between ``a`` and ``b``."""
    pairs = [(a.outputscale, b.outputscale), (a.noise, b.noise)]
    pairs += list(zip(a.lengthscale_space, b.lengthscale_space, strict=True))
    if a.lengthscale_time is not None and b.lengthscale_time is not None:
        pairs.append((a.lengthscale_time, b.lengthscale_time))
    # a noise of 0 (fixed) is 0 in both
    return max(abs(math.log(u / v)) if u > 0 and v > 0 else 0.0 for u, v in pairs)


@dataclass(frozen=True)
class FitHistory:
    """What the restart rule remembers of the fits so far (part of the policy's state).

    Attributes:
        fits_since_fresh: fits since the last one that also ran the fresh start (0: the
            last one did).
        size: the number of observations of the last fit.
        runner_up: the best optimum of the last fit in another basin than the one kept,
            if within :data:`RUNNER_UP_MARGIN` of it (the next fit's second start).
    """

    fits_since_fresh: int
    size: int
    runner_up: Hyperparameters | None = None

    @classmethod
    def after(cls, result: FitResult, size: int, previous: FitHistory | None) -> FitHistory:
        """The history once ``result`` (a fit of ``size`` observations) is done."""
        ran_fresh = result.restart_reason is not None or previous is None
        best = result.negative_log_likelihood
        others = [
            (value, h)
            for value, h in result.optima
            if value <= best + RUNNER_UP_MARGIN
            and _log_distance(h, result.hyperparameters) > DISTINCT_LOG_CHANGE
        ]
        return cls(
            fits_since_fresh=0 if ran_fresh else previous.fits_since_fresh + 1,
            size=size,
            runner_up=min(others, key=lambda o: o[0])[1] if others else None,
        )

    def state(self) -> dict[str, Any]:
        """Plain values for ``Policy.state_dict``."""
        return {
            "fits_since_fresh": self.fits_since_fresh,
            "size": self.size,
            "runner_up": None if self.runner_up is None else self.runner_up.as_dict(),
        }

    @classmethod
    def from_state(cls, state: Mapping[str, Any] | None) -> FitHistory | None:
        """The history saved by :meth:`state` (``None`` stays ``None``).

        Raises:
            ValueError: naming the entry that is missing or out of range.
        """
        if state is None:
            return None
        if not isinstance(state, Mapping):
            raise ValueError(f"fit_history must be a mapping or None, got {state!r}")
        values = {}
        for key in ("fits_since_fresh", "size"):
            value = state.get(key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"fit_history.{key} must be an integer >= 0, got {value!r}")
            values[key] = value
        runner_up = state.get("runner_up")
        if runner_up is not None:
            try:
                runner_up = Hyperparameters.from_dict(dict(runner_up))
            except (KeyError, TypeError, ValueError) as err:
                raise ValueError(
                    f"fit_history.runner_up is not a set of hyperparameters: {err}"
                ) from None
        return cls(values["fits_since_fresh"], values["size"], runner_up)


@dataclass(frozen=True)
class RestartRule:
    """When a ``"warm-newton"`` fit also runs the fresh start (the warm optimum is in doubt).

    Before the fit (:meth:`before_fit`):

    - there is no history: the first fit, or a state saved before the rule existed;
    - the dataset has at most ``every_fit_size`` observations: the basins of small
      datasets come and go from one observation to the next, and there the fresh search
      costs least: on a CPU its evaluations run in NumPy
      (``dynbo.models.fit._NUMPY_LARGEST``, also 96), and the fit costs about what the
      two-start fit does (a W-DBO iteration at n = 96 then takes longer than one at
      n = 200 without a fresh start: docs/design.md); on a GPU the rule is the same;
    - :meth:`period` fits have passed since the last fresh start: ``period_fraction`` of
      the dataset size, at least ``shortest_period`` and at most ``longest_period`` (a new
      basin appears as the data change, and one observation changes a large dataset less);
    - the dataset size changed by more than ``size_change`` (relative) since the last fit
      (a reset, a window drop, a large removal).

    After the warm start's local search (:meth:`after_warm_start`):

    - it did not converge (iteration cap, a failed line search);
    - it ended on a bound it did not start on (a lengthscale or the noise running off to
      the edge of its box is how a basin change shows);
    - a log-hyperparameter moved by more than ``log_change`` (a factor ``e`` by default);
    - the search lowered the objective by more than ``gain`` nats from its start (the
      previous optimum on the new data): the new data moved the optimum by more than the
      gap between two basins that :data:`RUNNER_UP_MARGIN` tracks. (A change of the
      objective per observation would not do: the priors' constant depends on the unit of
      time, so the same data in seconds or minutes would restart differently.)

    Attributes:
        method: the local search from the fresh values (:data:`~dynbo.models.fit.FIT_METHODS`):
            L-BFGS-B, the two-start fit's own, so that a restart finds the basin the
            two-start fit would find (Newton from the same start may end in another).
        every_fit_size: up to this many observations the fresh start runs at every fit.
        shortest_period, period_fraction, longest_period: the fits between two fresh
            starts (:meth:`period`).
        size_change: relative change of the dataset size that forces a fresh start.
        log_change: largest change of a log-hyperparameter that is trusted.
        gain: largest decrease of the objective by the warm start's search (nats) that is
            trusted.
    """

    method: str = "l-bfgs-b"
    every_fit_size: int = 96
    shortest_period: int = 3
    period_fraction: float = 0.1
    longest_period: int = 20
    size_change: float = 0.25
    log_change: float = 1.0
    gain: float = RUNNER_UP_MARGIN

    def period(self, size: int) -> int:
        """Fits between two fresh starts with ``size`` observations."""
        by_size = math.ceil(self.period_fraction * size)
        return min(self.longest_period, max(self.shortest_period, by_size))

    def before_fit(self, history: FitHistory | None, size: int) -> str | None:
        """Why the fresh start must run whatever the warm start finds (``None``: it need not)."""
        if history is None:
            return "no fit history"
        if size <= self.every_fit_size:
            return f"at most {self.every_fit_size} observations"
        period = self.period(size)
        if history.fits_since_fresh + 1 >= period:
            return f"{period} fits since the last fresh start"
        if abs(size - history.size) > self.size_change * max(size, history.size):
            return f"dataset size changed from {history.size} to {size}"
        return None

    def after_warm_start(self, history: FitHistory, outcome: StartOutcome) -> str | None:
        """Why the warm start's optimum is in doubt (``None``: it is kept alone)."""
        if not outcome.converged:
            return f"warm start did not converge ({outcome.message})"
        if outcome.reached_bounds:
            return f"warm start reached a bound ({', '.join(outcome.reached_bounds)})"
        if outcome.largest_log_change > self.log_change:
            return f"a log-hyperparameter moved by {outcome.largest_log_change:.3g}"
        if outcome.gain > self.gain:
            return f"the warm start's search gained {outcome.gain:.3g} nats"
        return None


#: the rule the policies use
RESTART_RULE = RestartRule()


def fit_warm(
    gp: SpatioTemporalGP,
    *,
    strategy: str,
    bounds: HyperparameterBounds,
    priors: Mapping[str, tuple] | None,
    fresh: Hyperparameters,
    fitted: bool,
    history: FitHistory | None,
    max_iterations: int,
) -> tuple[FitResult, FitHistory | None]:
    """One iteration's refit of ``gp`` (in place) by ``strategy``, warm-started.

    The objective's GP and every constraint GP of a policy are fitted by this one
    function, each with its own history.

    Args:
        gp: the GP (with at least one observation).
        strategy: ``"two-start"`` (L-BFGS-B from the current and the ``fresh`` values,
            the better optimum kept) or ``"warm-newton"`` (Newton from the current values
            and the history's runner-up, L-BFGS-B from ``fresh`` when
            :data:`RESTART_RULE` asks).
        bounds, priors: of the fit.
        fresh: the starting values without history (the priors' medians); set on the GP
            first when it was never ``fitted``.
        fitted: whether ``gp``'s values come from an earlier fit (the warm start).
        history: what the restart rule remembers (ignored when not ``fitted``).
        max_iterations: iteration cap per start.

    Returns:
        ``(result, history)``: the history after this fit (``"two-start"`` keeps the
        given one).
    """
    if not fitted:
        gp.set_hyperparameters(fresh)
    if strategy == "two-start":
        result = fit_hyperparameters(
            gp, bounds=bounds, max_iterations=max_iterations, initial=[fresh], priors=priors
        )
        return result, history
    history = history if fitted else None
    forced = RESTART_RULE.before_fit(history, gp.n)

    def restart_if(outcome: StartOutcome) -> str | None:
        if forced is not None or history is None:
            return forced
        return RESTART_RULE.after_warm_start(history, outcome)

    runner_up = [] if history is None or history.runner_up is None else [history.runner_up]
    result = fit_hyperparameters(
        gp,
        bounds=bounds,
        max_iterations=max_iterations,
        initial=runner_up,
        priors=priors,
        method="newton",
        restarts=[fresh],
        restart_if=restart_if,
        restart_method=RESTART_RULE.method,
    )
    return result, FitHistory.after(result, gp.n, history)
