"""A hyperparameter fit run ahead of the next ``suggest`` (``Policy.refit``).

A live deployment (``dynbo serve``) has idle time between an ``observe`` and the next
request. ``Policy.refit`` spends it on the fit: it runs the fit on the policy, keeps what
the fit changed aside, and restores the policy, so that its state (and ``state_dict``)
is as before. The next ``suggest`` takes the kept outcome only when its own fit would
start from exactly the same inputs; otherwise it fits as usual. Either way the
suggestion and the state after it are those without the early fit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from dynbo.models.fit import FitResult

if TYPE_CHECKING:
    from dynbo.policies.base import Policy

__all__ = ["EarlyFit", "same_inputs"]


def same_inputs(a: Any, b: Any) -> bool:
    """Whether two fit inputs are the same: tensors by identity, other values by equality.

    The GP and the policy replace their tensors rather than edit them in place, so an
    unchanged tensor is the same object.
    """
    if a is b:
        return True
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor) or type(a) is not type(b):
        return False
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(same_inputs(u, v) for u, v in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_inputs(a[k], b[k]) for k in a)
    try:
        return bool(a == b)
    except (TypeError, ValueError, RuntimeError):  # e.g. an array's elementwise ==
        return False


@dataclass
class EarlyFit:
    """The outcome of a fit run ahead, and what it started from.

    Attributes:
        inputs: the fit's inputs when it ran (``Policy._fit_inputs``).
        result: its :class:`FitResult`.
        changed: the policy attributes the fit replaced (new values).
        gp_attributes: the GP's attributes after the fit.
        generator: the policy's random-stream state after the fit.
    """

    inputs: tuple[Any, ...]
    result: FitResult
    changed: dict[str, Any]
    gp_attributes: dict[str, Any]
    generator: torch.Tensor

    @classmethod
    def run(cls, policy: Policy, fit: Callable[[], FitResult]) -> EarlyFit:
        """Run ``fit`` on ``policy``, keep its outcome, and restore the policy as it was."""
        inputs = policy._fit_inputs()
        snapshot = policy._snapshot()
        try:
            result = fit()
            before = snapshot[0]
            changed = {
                k: v for k, v in policy.__dict__.items() if k not in before or before[k] is not v
            }
            gp_attributes = dict(policy._gp.__dict__)
            generator = policy._generator.get_state()
        finally:
            policy._restore(snapshot)
        return cls(inputs, result, changed, gp_attributes, generator)

    def matches(self, policy: Policy) -> bool:
        """Whether ``policy``'s next fit would start from this fit's inputs."""
        return same_inputs(self.inputs, policy._fit_inputs())

    def apply(self, policy: Policy) -> FitResult:
        """Put the fit's outcome into ``policy`` (as if it had just fitted)."""
        policy.__dict__.update(self.changed)
        policy._gp.__dict__.clear()
        policy._gp.__dict__.update(self.gp_attributes)
        policy._generator.set_state(self.generator)
        return self.result
