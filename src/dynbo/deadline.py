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
random stream advanced): ``Policy.suggest`` restores the state it had before the call.

A :class:`Budget` is the soft kind (``Policy.suggest(t, budget=seconds)``): when it is
spent, the check raises :class:`BudgetSpent`, which the loops that can stop early catch
and degrade gracefully (the fit keeps the previous hyperparameters, the acquisition
search returns the best point evaluated so far, a removal loop stops removing). A hard
:class:`Deadline` raises :class:`DeadlineExceeded`, which nothing catches on the way
up. Both kinds may be active at once (a budgeted suggest in the service, under its
time limit). Only the standard library is used, so that light imports stay light.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

__all__ = [
    "FIT",
    "Budget",
    "BudgetSpent",
    "Cancelled",
    "Deadline",
    "DeadlineExceeded",
    "Interrupted",
    "check",
    "soft_budget_active",
    "spent",
    "within",
]

#: the unit of work a fit checks before (a marginal-likelihood evaluation)
FIT = "hyperparameter fit"


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


class BudgetSpent(Interrupted):
    """A soft :class:`Budget` is spent: stop this loop early and keep what it has."""

    def __init__(self, where: str, elapsed: float, index: int) -> None:
        super().__init__(f"budget spent in the {where} after {elapsed:.3g} s", where, elapsed)
        self.index = index


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
    # a factory, so that the class has no function attribute named clock
    clock: object = field(default_factory=lambda: time.monotonic)
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


@dataclass
class Budget(Deadline):
    """A soft time budget for one ``suggest``: spent, its checks raise :class:`BudgetSpent`.

    The fit may use ``fit_share`` of the budget (the rest is left to the cleaning and the
    acquisition search); the other units of work, the whole of it. The checks of each
    kind of work (``where``: the fit, the removal loop, the acquisition search) are
    numbered 1, 2, ... in the order the call makes them, and :attr:`spent_at` lists the
    ``(where, ordinal)`` at which it raised: a call that makes the same checks of each
    kind in the same order stops at the same places with ``Budget.replay(spent_at)``,
    whatever the clock says. Numbering per kind keeps a replay exact where a live call
    skipped a whole kind of work: a suggestion that took a fit made ahead of time
    (``Policy.refit``) made no fit checks, and its replay, which fits, must not have its
    fit cut at the live call's acquisition checks.

    The rule is predictive: a check is due when the time elapsed *plus the expected cost
    of the unit about to start* would pass the limit, so that the unit that would cross
    it does not start. A unit of a kind lasts from its check to the next check of any
    kind (the work in between is charged to it); its expected cost is the last such
    duration of the same kind in this call, else ``priors[where]`` (the policy passes
    the costs measured in its previous budgeted calls), else 0 (the first unit of a kind
    never seen runs). A replay reads no clock and ignores all of this.

    Attributes:
        seconds: the budget (``None`` only for a replay).
        fit_share: the fraction of ``seconds`` the hyperparameter fit may use.
        script: for a replay: the ``(where, ordinal)`` pairs to raise at (no clock is read).
        priors: ``where -> seconds`` the expected cost of a unit before this call has
            measured one of that kind.
        spent_at: where it raised: ``{"where", "ordinal", "check", "elapsed",
            "expected"}`` each (``check``: the number among all checks of the call;
            ``expected``: the unit's expected seconds that made it due).
        unit_seconds: ``where -> seconds`` the last measured unit of each kind.
    """

    fit_share: float = 0.5
    script: frozenset[tuple[str, int]] | None = None
    priors: Mapping[str, float] = field(default_factory=dict)
    spent_at: list[dict[str, object]] = field(default_factory=list)
    ordinals: dict[str, int] = field(init=False, default_factory=dict)
    unit_seconds: dict[str, float] = field(init=False, default_factory=dict)
    _open: tuple[str, float] | None = field(init=False, default=None, repr=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.seconds is None and self.script is None:
            raise ValueError("a budget needs seconds (or, for a replay, a script)")
        if not 0.0 < self.fit_share <= 1.0:
            raise ValueError(f"fit_share must be in (0, 1], got {self.fit_share!r}")

    @classmethod
    def replay(cls, spent_at: Iterable[Mapping[str, object] | tuple[str, int]]) -> Budget:
        """A budget that raises where a recorded one did: its ``spent_at`` entries (or
        ``(where, ordinal)`` pairs)."""
        script = set()
        for entry in spent_at:
            where, ordinal = (
                (entry["where"], entry["ordinal"]) if isinstance(entry, Mapping) else entry
            )
            if not isinstance(where, str) or int(ordinal) < 1:  # type: ignore[call-overload]
                raise ValueError(f"a replayed cut needs a place and an ordinal >= 1, got {entry!r}")
            script.add((where, int(ordinal)))  # type: ignore[call-overload]
        return cls(seconds=None, script=frozenset(script))

    def check(self, where: str) -> None:
        self.checks += 1
        ordinal = self.ordinals[where] = self.ordinals.get(where, 0) + 1
        expected = 0.0
        if self.script is not None:
            due = (where, ordinal) in self.script
        else:
            assert self.seconds is not None
            now = self._close_unit()
            limit = self.seconds * (self.fit_share if where == FIT else 1.0)
            expected = self.unit_seconds.get(where, float(self.priors.get(where, 0.0)))
            due = now + expected > limit
        if due:
            elapsed = self.elapsed
            self.spent_at.append(
                {
                    "where": where,
                    "ordinal": ordinal,
                    "check": self.checks,
                    "elapsed": elapsed,
                    "expected": expected,
                }
            )
            raise BudgetSpent(where, elapsed, self.checks)
        if self.script is None:
            self._open = (where, self.elapsed)

    def _close_unit(self) -> float:
        """End the unit in progress (its kind's cost is measured); the seconds elapsed."""
        now = self.elapsed
        if self._open is not None:
            kind, start = self._open
            self.unit_seconds[kind] = now - start
            self._open = None
        return now

    def report(self) -> dict[str, object]:
        """What the budget cut, for a suggestion's diagnostics (JSON-ready)."""
        if self.script is None:
            self._close_unit()
        return {
            "seconds": self.seconds,
            "fit_share": self.fit_share,
            "checks": self.checks,
            "spent_at": [dict(s) for s in self.spent_at],
            "unit_seconds": dict(self.unit_seconds),
        }


_ACTIVE: contextvars.ContextVar[tuple[Deadline, ...]] = contextvars.ContextVar(
    "dynbo_deadline", default=()
)


@contextmanager
def within(deadline: Deadline | None) -> Iterator[Deadline | None]:
    """Add ``deadline`` to the active ones for the enclosed code; ``None``: run the enclosed
    code with no deadline at all (e.g. a replay from a log inside a timed request)."""
    token = _ACTIVE.set(() if deadline is None else (*_ACTIVE.get(), deadline))
    try:
        yield deadline
    finally:
        _ACTIVE.reset(token)


def check(where: str) -> None:
    """Check the active deadlines, outermost first (see :meth:`Deadline.check`)."""
    for deadline in _ACTIVE.get():
        deadline.check(where)


def soft_budget_active() -> bool:
    """Whether a :class:`Budget` is among the active deadlines (whose checks may raise
    :class:`BudgetSpent` for the caller to catch)."""
    return any(isinstance(d, Budget) for d in _ACTIVE.get())


def spent(where: str) -> bool:
    """:func:`check` for a loop that can stop early: ``True`` when a soft budget is
    spent (stop and keep what you have); a hard deadline still raises."""
    try:
        check(where)
    except BudgetSpent:
        return True
    return False
