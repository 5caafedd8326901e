"""Cooperative deadlines and cancellation for long computations (fits, acquisitions).

A caller that must bound the time of a policy call (the service's per-request budget,
a client that went away) runs it inside :func:`within`; the inner loops of the library
call :func:`check` once per unit of work (a marginal-likelihood evaluation, a batch of
acquisition evaluations, a removal), which raises :class:`Interrupted` once the
deadline has passed or the cancellation event is set. Nothing is interrupted between
two checks, so a call overruns its budget by at most one unit of work.

The active deadline is a :mod:`contextvars` variable: it applies to the thread (or task)
that set it and to nothing else, so concurrent calls in other threads are unaffected,
and code that never sets one pays one variable lookup per check.

An interrupted call leaves its object part-way (hyperparameters half-fitted, a
random stream advanced): the caller restores what it saved before (the service keeps
the policy's ``state_dict``). Only the dependency-free standard library is used, so
that :mod:`dynbo.validation`-style light imports stay light.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

__all__ = ["Cancelled", "Deadline", "DeadlineExceeded", "Interrupted", "check", "within"]


class Interrupted(RuntimeError):
    """A computation stopped at a :func:`check` (base of the two reasons below).

    Attributes:
        where: the unit of work that was about to start (e.g. ``"hyperparameter fit"``).
        elapsed: seconds since the deadline was set.
    """

    def __init__(self, message: str, where: str, elapsed: float) -> None:
        super().__init__(message)
        self.where = where
        self.elapsed = elapsed


class DeadlineExceeded(Interrupted):
    """The time budget ran out (``budget`` seconds)."""

    def __init__(self, where: str, elapsed: float, budget: float) -> None:
        super().__init__(
            f"stopped in the {where} after {elapsed:.3g} s: over the time budget of {budget:.3g} s",
            where,
            elapsed,
        )
        self.budget = budget


class Cancelled(Interrupted):
    """The cancellation event was set (e.g. the client that asked went away)."""

    def __init__(self, where: str, elapsed: float) -> None:
        super().__init__(f"cancelled in the {where} after {elapsed:.3g} s", where, elapsed)


@dataclass
class Deadline:
    """A time budget and/or a cancellation event.

    Attributes:
        seconds: the budget, from creation (``None``: no time limit).
        cancel: set it (from any thread) to stop the computation at its next check.
        clock: monotonic seconds (for tests).
    """

    seconds: float | None = None
    cancel: threading.Event = field(default_factory=threading.Event)
    clock: object = time.monotonic
    started: float = field(init=False)
    checks: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        if self.seconds is not None and not self.seconds > 0:
            raise ValueError(f"a deadline needs a positive number of seconds, got {self.seconds!r}")
        self.started = self.clock()  # type: ignore[operator]

    @property
    def elapsed(self) -> float:
        """Seconds since the deadline was set."""
        return self.clock() - self.started  # type: ignore[operator]

    def check(self, where: str) -> None:
        """Raise :class:`Cancelled` or :class:`DeadlineExceeded` if due, else return."""
        self.checks += 1
        if self.cancel.is_set():
            raise Cancelled(where, self.elapsed)
        if self.seconds is not None:
            elapsed = self.elapsed
            if elapsed > self.seconds:
                raise DeadlineExceeded(where, elapsed, self.seconds)


_ACTIVE: contextvars.ContextVar[Deadline | None] = contextvars.ContextVar(
    "dynbo_deadline", default=None
)


@contextmanager
def within(deadline: Deadline | None) -> Iterator[Deadline | None]:
    """Make ``deadline`` the active one for the enclosed code (``None``: no deadline)."""
    token = _ACTIVE.set(deadline)
    try:
        yield deadline
    finally:
        _ACTIVE.reset(token)


def check(where: str) -> None:
    """Check the active deadline, if any (see :meth:`Deadline.check`)."""
    deadline = _ACTIVE.get()
    if deadline is not None:
        deadline.check(where)
