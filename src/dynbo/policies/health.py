"""Health checks of a policy's model, run at every iteration (a monitor: it changes nothing).

An online GP can break down quietly: one degenerate fit of the temporal lengthscale and
W-DBO judges every old observation irrelevant, drops to its minimum dataset and stays
there, answering with confidence from two points. :class:`HealthMonitor` looks at the
model the acquisition is about to use and reports, in ``diagnostics.extra["health"]``,
a list of events (each ``{"kind", "message", ...}``):

* ``short_lengthscale``: the temporal lengthscale ``l_T`` is below the median gap
  between consecutive observation times of the dataset (in the GP's time coordinate):
  the model forgets faster than it samples, so each observation says almost nothing
  about the next query's time.
* ``dataset_at_minimum``: the dataset has been at its minimum size (``min_dataset_size``,
  1 for the policies without one) for ``streak`` iterations in a row (reported when the
  streak reaches it and again every ``streak`` iterations).
* ``collapse``: both at once: a state an independent W-DBO reproduction reported the
  policy never left by itself (a fit without ``lengthscale_time_floor``; the
  default floor keeps ``l_T`` at or above the sampling interval).
* ``jitter``: the GP's Cholesky factor needed diagonal jitter (a near-singular
  covariance: duplicated points, a lengthscale too long for the noise).
* ``change``: the newest observation lies outside the model's prediction by more than
  ET-GP-UCB's threshold (Brunzema, von Rohr, Solowjow & Trimpe 2025, eq. 10-11):
  ``|y - mu_{-n}(x)| > sqrt(rho_k) (sigma_{-n}(x) + sigma_noise)`` with
  ``rho_k = 2 log(2 pi^2 k^2 / (6 delta))``, ``k`` the observations tested so far, and
  ``mu_{-n}``, ``sigma_{-n}`` the leave-one-out prediction of the newest observation
  (the posterior before it was added, with the current hyperparameters; computed in
  closed form from the factor, O(n^2)). For any policy, as an alarm: nothing is reset.
  Not before the policy's first fit nor with fewer than ``min_points`` (5) observations
  (a model of a handful of points predicts little).

A fit that fails raises from ``suggest`` (the policy is restored); the service reports
it as a ``fit_failure`` event.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from dynbo.policies.base import Policy

__all__ = ["HealthMonitor"]


@dataclass
class HealthMonitor:
    """The monitor's settings and its state across iterations (saved with the policy).

    Attributes:
        streak: iterations at the minimum dataset size before ``dataset_at_minimum``.
        delta: the change test's confidence parameter (ET-GP-UCB's ``delta_B``).
        min_points: the fewest observations the change test runs with.
        at_minimum: the current streak of iterations at the minimum size.
        tested: observations tested for a change so far (``k``).
        newest_tested: the time of the newest observation already tested.
    """

    streak: int = 5
    delta: float = 0.1
    min_points: int = 5
    at_minimum: int = 0
    tested: int = 0
    newest_tested: float | None = None

    def state(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_state(cls, state: dict[str, Any] | None) -> HealthMonitor:
        """A monitor from :meth:`state` (``None``, from a state saved before it: a fresh one)."""
        return cls() if state is None else cls(**state)

    def before_fit(self, policy: Policy) -> list[dict[str, Any]]:
        """The change test of the newest observation, with the hyperparameters it was
        observed under (before this iteration's fit, as ET-GP-UCB tests it)."""
        change = self._change(policy)
        return [] if change is None else [change]

    def check(self, policy: Policy) -> list[dict[str, Any]]:
        """The other events, on the model the acquisition is about to use (see the module)."""
        events: list[dict[str, Any]] = []
        gp = policy.model
        n = policy.dataset_size
        short = self._short_lengthscale(policy)
        if short is not None:
            events.append(short)
        minimum = max(int(getattr(policy, "min_dataset_size", 1)), 1)
        self.at_minimum = self.at_minimum + 1 if 0 < n <= minimum else 0
        if self.at_minimum and self.at_minimum % self.streak == 0:
            events.append(
                {
                    "kind": "dataset_at_minimum",
                    "message": f"the dataset has held its minimum of {minimum} observation(s) "
                    f"for {self.at_minimum} iterations",
                    "iterations": self.at_minimum,
                }
            )
            if short is not None:
                events.append(
                    {
                        "kind": "collapse",
                        "message": "the dataset is stuck at its minimum with a temporal "
                        "lengthscale below the sampling interval; see docs/live.md "
                        "(Health and alarms) for the recovery",
                    }
                )
        if gp.jitter > 0:
            events.append(
                {
                    "kind": "jitter",
                    "message": f"the covariance needed a jitter of {gp.jitter:.3g} to factorize",
                    "jitter": gp.jitter,
                }
            )
        return events

    @staticmethod
    def _short_lengthscale(policy: Policy) -> dict[str, Any] | None:
        gp = policy.model
        lengthscale = gp.hyperparameters.lengthscale_time
        if lengthscale is None or gp.n < 2 or not gp.kernel.uses_time:
            return None
        times = torch.sort(gp.inputs[:, -1]).values
        gaps = torch.diff(times)
        gaps = gaps[gaps > 0]
        if gaps.numel() == 0:
            return None
        interval = float(torch.median(gaps))
        if lengthscale >= interval:
            return None
        return {
            "kind": "short_lengthscale",
            "message": f"the temporal lengthscale {lengthscale:.3g} is below the median "
            f"sampling interval {interval:.3g} (the GP's time unit)",
            "lengthscale_time": lengthscale,
            "sampling_interval": interval,
        }

    def _change(self, policy: Policy) -> dict[str, Any] | None:
        gp = policy.model
        # before the first fit the hyperparameters are initial guesses, and a fit on a
        # handful of points predicts little: no prediction to hold the data to
        if gp.n < self.min_points or (policy.learn_hyperparameters and not policy._fitted):
            return None
        newest = int(torch.argmax(policy._t))
        when = float(policy._t[newest])
        if self.newest_tested is not None and when <= self.newest_tested:
            return None
        self.newest_tested = when
        self.tested += 1
        mean, variance = gp.leave_one_out(newest)
        noise_sd = math.sqrt(gp.hyperparameters.noise) * gp.target_scale
        y = float(policy._y[newest])
        residual = abs(y - mean)
        rho = 2.0 * math.log(2.0 * math.pi**2 * self.tested**2 / (6.0 * self.delta))
        threshold = math.sqrt(rho) * (math.sqrt(max(variance, 0.0)) + noise_sd)
        if residual <= threshold:
            return None
        return {
            "kind": "change",
            "message": f"the newest observation (t = {when:g}) is {residual:.3g} from the "
            f"model's prediction, over the change threshold {threshold:.3g}",
            "time": when,
            "residual": residual,
            "threshold": threshold,
        }
