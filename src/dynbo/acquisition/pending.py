"""Queries that are out but not answered: GP-BUCB's hallucinated observations.

When several devices evaluate at once, the next query must account for the ones still
out. Desautels, Krause & Burdick (2014, "Parallelizing Exploration-Exploitation
Tradeoffs in Gaussian Process Bandit Optimization") condition the posterior variance on
the pending points as if they had been observed, without moving the mean: the
acquisition then looks elsewhere, where it is still uncertain. Observing a point at its
own posterior mean does exactly that (the mean's update is proportional to the residual,
which is zero, and the variance's does not depend on the value), so
:func:`hallucinate` adds the pending points to a copy of the GP with the posterior mean
as their value, by the GP's O(n^2) rank-one appends and with its standardization kept.
The policy's own GP is not touched.
"""

from __future__ import annotations

import copy
from typing import Any

import torch

__all__ = ["hallucinate", "with_pending"]


def hallucinate(gp: Any, inputs: torch.Tensor) -> Any:
    """A copy of ``gp`` that has observed ``(k, input_dim)`` ``inputs`` at its posterior mean.

    ``gp`` is a :class:`~dynbo.models.SpatioTemporalGP` (anything with ``predict`` and
    ``add``, whose ``add`` replaces its tensors rather than editing them: a shallow copy
    then leaves the original as it was). Returns ``gp`` itself when ``inputs`` is empty.
    """
    if inputs.numel() == 0:
        return gp
    mean, _ = gp.predict(inputs)
    fantasy = copy.copy(gp)
    fantasy.add(inputs, mean.detach())
    return fantasy


def with_pending(acquisition: Any, inputs: torch.Tensor) -> bool:
    """Make ``acquisition`` (a UCB with a ``gp``) read the GP hallucinated at ``inputs``.

    Returns:
        whether it could: ``False`` (nothing changed) for a model that cannot be
        conditioned on a point without its value (the weighted kernel-ridge view of
        W-GP-UCB), or when nothing is pending.
    """
    model = getattr(acquisition, "gp", None)
    if inputs.numel() == 0 or model is None or not hasattr(model, "add"):
        return False
    acquisition.gp = hallucinate(model, inputs)
    return True
