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
    "ACQUISITION",
    "ACQUISITION_SETUP",
    "FINISH",
    "FIT",
    "LIKELIHOOD_SETUP",
    "RAW_SAMPLE",
    "Budget",
    "BudgetSpent",
    "Cancelled",
    "Deadline",
    "DeadlineExceeded",
    "Interrupted",
    "begin",
    "check",
    "end",
    "soft_budget_active",
    "spent",
    "within",
]

#: the unit of work a fit checks before (a marginal-likelihood evaluation)
FIT = "hyperparameter fit"
#: the fit's work before its first evaluation (the pairwise distances of the data, O(n^2 d)):
#: a kind of its own, so that the fit's ordinals (and replays of recorded cuts) are unchanged
LIKELIHOOD_SETUP = "likelihood setup"
#: a batch of acquisition evaluations of the gradient search (and, without a budget, of the
#: raw sample past its first batch)
ACQUISITION = "acquisition search"
#: a batch of the raw sample evaluated under a soft budget (smaller batches than without
#: one, :data:`dynbo.acquisition.optimize.BUDGET_RAW_BATCH`): a kind of its own, for the
#: same reason; the first batch is not checked (a search always has a point to return)
RAW_SAMPLE = "raw sample"
#: the work between the cleaning and the raw sample's first batch (the health check, the
#: acquisition function, the quasi-random draw): never skipped, measured (``begin``)
ACQUISITION_SETUP = "acquisition setup"
#: the work after the last unit of a call (the end of the search, the query's
#: bookkeeping, the diagnostics), measured by :meth:`Budget.report`: the acquisition
#: search leaves its expected cost
FINISH = "finishing"
#: the factor a prior that stopped a unit of its kind is multiplied by for the next call
PRIOR_DECAY = 0.8
#: the kinds of work that share the fit's part of a budget (``Budget.fit_share``)
_FIT_KINDS = frozenset({FIT, LIKELIHOOD_SETUP})
#: the kinds of work of the acquisition search: the others leave it ``Budget.reserve``
_ACQUISITION_KINDS = frozenset({ACQUISITION, RAW_SAMPLE})


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
    it does not start. A unit of a kind lasts from its check (or :meth:`begin`, for work
    that runs whatever the budget) to :meth:`end` or the next check; its expected cost is
    the last such duration of the same kind in this call, else ``priors[where]`` (the
    policy passes the costs measured in its previous budgeted calls), else 0 (the first
    unit of a kind never seen runs); a check may add the expected cost of the kinds of
    work that follow the unit whatever happens (``after``: applying the removals made
    so far after a removal loop). The limit is ``fit_share * seconds`` for the fit's
    kinds; every kind but the acquisition search's leaves it :attr:`reserve` seconds
    (the expected cost of the work every suggestion does after its cleaning: the
    acquisition's setup and first raw batch, and the work after the search), and the
    search's kinds leave the work after the search its expected cost. A check with
    ``predictive=False`` is due only once the limit itself has passed. A replay reads
    no clock and ignores all of this.

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
        largest_unit_seconds: ``where -> seconds`` the longest unit of each kind.
    """

    fit_share: float = 0.5
    script: frozenset[tuple[str, int]] | None = None
    priors: Mapping[str, float] = field(default_factory=dict)
    spent_at: list[dict[str, object]] = field(default_factory=list)
    ordinals: dict[str, int] = field(init=False, default_factory=dict)
    unit_seconds: dict[str, float] = field(init=False, default_factory=dict)
    largest_unit_seconds: dict[str, float] = field(init=False, default_factory=dict)
    _open: tuple[str, float] | None = field(init=False, default=None, repr=False)
    _stale: set[str] = field(init=False, default_factory=set, repr=False)
    # seconds of the last check, begin or end (where the work after them started)
    _mark: float = field(init=False, default=0.0, repr=False)
    _reported: bool = field(init=False, default=False, repr=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.seconds is None and self.script is None:
            raise ValueError("a budget needs seconds (or, for a replay, a script)")
        if not 0.0 < self.fit_share <= 1.0:
            raise ValueError(f"fit_share must be in (0, 1], got {self.fit_share!r}")

    def expected(self, where: str) -> float:
        """The expected seconds of a unit of ``where``: the last one in this call, else
        the prior, else 0 (for a likelihood evaluation: what building the likelihood's
        distances cost, a lower bound: an evaluation factorizes on top)."""
        if where not in self.unit_seconds and where not in self.priors:
            return self.expected(LIKELIHOOD_SETUP) if where == FIT else 0.0
        return self.unit_seconds.get(where, float(self.priors.get(where, 0.0)))

    @property
    def reserve(self) -> float:
        """Seconds the work before the acquisition search leaves it: the cost of the
        acquisition's setup, of its first raw batch and of the work after the search in
        the previous calls (``priors``)."""
        kinds = (ACQUISITION_SETUP, RAW_SAMPLE, FINISH)
        return sum(float(self.priors.get(kind, 0.0)) for kind in kinds)

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

    def check(self, where: str, after: Iterable[str] = (), predictive: bool = True) -> None:
        self.checks += 1
        ordinal = self.ordinals[where] = self.ordinals.get(where, 0) + 1
        expected = 0.0
        if self.script is not None:
            due = (where, ordinal) in self.script
        else:
            assert self.seconds is not None
            now = self._close_unit()
            limit = self.seconds * (self.fit_share if where in _FIT_KINDS else 1.0)
            if where in _ACQUISITION_KINDS:
                limit = min(limit, self.seconds - float(self.priors.get(FINISH, 0.0)))
            else:
                limit = min(limit, self.seconds - self.reserve)
            kinds = (where, *after) if predictive else ()
            expected = sum(self.expected(kind) for kind in kinds)
            due = now + expected > limit
            if due:  # priors that stopped a unit are not measured again: they age
                self._stale.update(k for k in kinds if k not in self.unit_seconds)
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
            self._mark = self.elapsed
            self._open = (where, self._mark)

    def next_priors(self) -> dict[str, float]:
        """The priors of the caller's next budget: the last unit of each kind measured
        here, else the prior, shrunk by ``PRIOR_DECAY`` where it stopped a unit of its
        kind (so that a cost measured once too high, on a loaded machine or a larger
        dataset, is tried again after a few calls rather than never) unless it is more
        than the whole budget (a unit no budget of this size can afford: trying it
        again could only make an answer late)."""
        priors = {k: float(v) for k, v in self.priors.items()}
        for kind in self._stale:
            if kind in priors and (self.seconds is None or priors[kind] <= self.seconds):
                priors[kind] *= PRIOR_DECAY
        return {**priors, **self.unit_seconds}

    def begin(self, where: str) -> None:
        """Start timing a unit of ``where`` that runs whatever the budget (no check)."""
        if self.script is None:
            self._open = (where, self._close_unit())

    def end(self) -> None:
        """The unit in progress is over (what follows is not charged to it)."""
        if self.script is None:
            self._close_unit()

    def _close_unit(self) -> float:
        """End the unit in progress (its kind's cost is measured); the seconds elapsed."""
        now = self._mark = self.elapsed
        if self._open is not None:
            kind, start = self._open
            self._measured(kind, now - start)
            self._open = None
        return now

    def _measured(self, kind: str, seconds: float) -> None:
        self.unit_seconds[kind] = seconds
        self.largest_unit_seconds[kind] = max(seconds, self.largest_unit_seconds.get(kind, 0.0))

    def report(self) -> dict[str, object]:
        """What the budget cut, for a suggestion's diagnostics (JSON-ready); the first
        report ends the call: the work since the last unit is measured (``FINISH``)."""
        if self.script is None and not self._reported:
            last, was_open = self._mark, self._open is not None
            now = self._close_unit()
            if not was_open:
                self._measured(FINISH, now - last)
            self._reported = True
        return {
            "seconds": self.seconds,
            "fit_share": self.fit_share,
            "reserve": self.reserve,
            "checks": self.checks,
            "spent_at": [dict(s) for s in self.spent_at],
            "unit_seconds": dict(self.unit_seconds),
            "largest_unit_seconds": dict(self.largest_unit_seconds),
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


def check(where: str, after: Iterable[str] = (), predictive: bool = True) -> None:
    """Check the active deadlines, outermost first (see :meth:`Deadline.check`;
    ``after``: the kinds of work that follow this unit whatever happens, and
    ``predictive=False``: due only once the budget is spent, see :class:`Budget`)."""
    for deadline in _ACTIVE.get():
        if isinstance(deadline, Budget):
            deadline.check(where, after, predictive)
        else:
            deadline.check(where)


def begin(where: str) -> None:
    """Start timing a unit of work that runs whatever the budget (:meth:`Budget.begin`)."""
    for deadline in _ACTIVE.get():
        if isinstance(deadline, Budget):
            deadline.begin(where)


def end() -> None:
    """The unit of work in progress is over (:meth:`Budget.end`): a loop calls it after
    each unit, so that the work after the loop is not charged to its last unit."""
    for deadline in _ACTIVE.get():
        if isinstance(deadline, Budget):
            deadline.end()


def soft_budget_active() -> bool:
    """Whether a :class:`Budget` is among the active deadlines (whose checks may raise
    :class:`BudgetSpent` for the caller to catch)."""
    return any(isinstance(d, Budget) for d in _ACTIVE.get())


def spent(where: str, after: Iterable[str] = (), predictive: bool = True) -> bool:
    """:func:`check` for a loop that can stop early: ``True`` when a soft budget is
    spent (stop and keep what you have); a hard deadline still raises."""
    try:
        check(where, after, predictive)
    except BudgetSpent:
        return True
    return False
