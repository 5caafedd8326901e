"""How time passes during a run (the protocol's four clock modes).

A run alternates: the policy computes its next query (its *response time* ``D_k``),
the query lands at ``t_k = s_k + D_k`` and is evaluated there, and the answer
arrives ``c`` seconds later, at ``s_{k+1} = t_k + c``. The clock decides what ``D_k`` is:

* ``wall``: real time; the objective really sleeps ``c`` seconds (a deployment).
* ``measured``: ``D_k`` is the measured wall time of the policy's work in this process
  (its ``observe`` of the previous answer and its ``suggest``); ``c`` is added without
  sleeping. The default for campaigns.
* ``modeled``: ``D_k = R(n_k)``, a response-time model of the dataset size ``n_k``; a run
  replays exactly on any machine.
* ``step``: discrete time, ``t_k = k``; response times are ignored (the bandit setting).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

from dynbo.theory import ResponseTimeModel, fit_cubic

__all__ = [
    "CLOCK_MODES",
    "Clock",
    "ResponseTimeModel",
    "calibration_path",
    "fit_cubic",
    "load_calibration",
]

CLOCK_MODES = ("wall", "measured", "modeled", "step")


def calibration_path() -> Path:
    """Where ``dynbo calibrate`` stores this machine's model (``DYNBO_CALIBRATION`` overrides)."""
    override = os.environ.get("DYNBO_CALIBRATION")
    if override:
        return Path(override)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "dynbo" / "response_time.json"


def load_calibration(path: str | os.PathLike[str] | None = None) -> ResponseTimeModel | None:
    """The calibrated model of this machine, or ``None`` if there is none."""
    p = Path(path) if path is not None else calibration_path()
    if not p.exists():
        return None
    try:
        data = json.loads(p.read_text())
        return ResponseTimeModel(tuple(data["coefficients"]))
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ValueError(f"unreadable calibration file {p}: {err}") from None


class Clock:
    """The time of a run, advanced by response times and evaluation costs.

    Args:
        mode: one of :data:`CLOCK_MODES`.
        response_time: for ``modeled``: a :class:`ResponseTimeModel` or any callable
            ``n -> seconds``.
        start: clock time of the first loop iteration.
    """

    def __init__(
        self,
        mode: str,
        *,
        response_time: ResponseTimeModel | Callable[[int], float] | None = None,
        start: float = 0.0,
    ) -> None:
        if mode not in CLOCK_MODES:
            raise ValueError(f"unknown clock mode {mode!r}; expected one of {CLOCK_MODES}")
        if mode == "modeled" and response_time is None:
            raise ValueError("the modeled clock needs a response-time model")
        self.mode = mode
        self.response_time = response_time
        self.now = float(start)
        self._wall_origin = time.monotonic() - float(start)

    @property
    def is_discrete(self) -> bool:
        return self.mode == "step"

    def current(self) -> float:
        """The clock's present time (for ``wall``, read from the real clock)."""
        if self.mode == "wall":
            self.now = time.monotonic() - self._wall_origin
        return self.now

    def respond(self, measured_seconds: float, dataset_size: int) -> float:
        """The response time ``D_k`` this clock charges for one policy iteration."""
        if self.mode == "measured":
            return float(measured_seconds)
        if self.mode == "modeled":
            assert self.response_time is not None
            return float(self.response_time(dataset_size))
        if self.mode == "wall":
            return float(measured_seconds)
        return 0.0

    def advance(self, seconds: float) -> None:
        """Let ``seconds`` pass (virtual clocks add; the wall clock really waits)."""
        if seconds < 0:
            raise ValueError(f"time cannot advance by a negative amount ({seconds})")
        if self.mode == "wall":
            time.sleep(seconds)
            self.current()
        else:
            self.now += seconds

    def wait_until(self, t: float) -> None:
        """Advance to time ``t`` if it is in the future (a look-ahead query)."""
        now = self.current()
        if t > now:
            self.advance(t - now)
