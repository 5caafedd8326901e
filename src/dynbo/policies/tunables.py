"""The free settings of a policy that ``dynbo tune`` may choose, with their ranges.

Every policy class declares ``tunables: ClassVar[dict[str, Tunable]]``: option name ->
:class:`Tunable`. Each range contains the setting the policy's paper uses (its default),
and each end of it is a value the policy accepts. :func:`dynbo.harness.tune.tune`
searches these ranges on seeds apart from the evaluation seeds (``docs/tuning.md``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["EXPLORATION", "Tunable"]


@dataclass(frozen=True)
class Tunable:
    """A tunable option: the interval ``[low, high]`` it is searched over.

    Attributes:
        low, high: the ends of the interval (the option's own units), ``low < high``.
        log: search ``log(value)`` uniformly instead of ``value`` (``low > 0``); for a
            setting whose effect is multiplicative (a scale, a rate, a window length).
        integer: the option takes whole numbers (rounded to the nearest, within range).
        conflicts: options that make this one inapplicable when an entry sets them to a
            value other than their default (R-GP-UCB's ``epsilon`` fixes the block
            length ``reset_every``): the tuner then leaves this option as the entry has it.
    """

    low: float
    high: float
    log: bool = False
    integer: bool = False
    conflicts: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not (math.isfinite(self.low) and math.isfinite(self.high) and self.low < self.high):
            raise ValueError(f"a tunable needs finite low < high, got [{self.low}, {self.high}]")
        if self.log and self.low <= 0:
            raise ValueError(f"a log-scale tunable needs low > 0, got {self.low}")

    def value(self, u: float) -> float | int:
        """The setting at position ``u`` in ``[0, 1]`` of the (log-)interval.

        Floats are rounded to 4 significant digits (a readable campaign file and
        label; finer than any tuning budget resolves), integers to the nearest one;
        both stay inside ``[low, high]``.
        """
        if not 0.0 <= u <= 1.0:
            raise ValueError(f"a design point must be in [0, 1], got {u!r}")
        if self.log:
            raw = math.exp(math.log(self.low) + u * (math.log(self.high) - math.log(self.low)))
        else:
            raw = self.low + u * (self.high - self.low)
        if self.integer:
            return int(min(max(round(raw), math.ceil(self.low)), math.floor(self.high)))
        return min(max(float(f"{raw:.4g}"), self.low), self.high)

    def applies(self, options: Mapping[str, Any], defaults: Mapping[str, Any]) -> bool:
        """Whether the option may be tuned for an entry with ``options`` (none of its
        :attr:`conflicts` set to a value other than its default in ``defaults``)."""
        return all(
            options.get(name, defaults.get(name)) == defaults.get(name) for name in self.conflicts
        )


#: every policy's ``exploration_scale``: the multiplier of its schedule's ``kappa``
#: (the multiplier of ``sigma`` in UCB), from a tenth to ten times the paper's schedule
EXPLORATION = Tunable(0.1, 10.0, log=True, conflicts=("sigma_multiplier",))
