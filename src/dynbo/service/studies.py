"""The study manager: one policy per study, its event log, checkpoints and rebuilds.

Every method is synchronous and thread-safe: calls on one study are serialized by the
study's lock (the algorithms are sequential), calls on different studies may run at
once in different threads. The HTTP layer (:mod:`dynbo.service.app`) runs them in a
thread pool.

Crash safety. An accepted ``suggest`` or ``observe`` is applied to the policy (which
validates it and changes nothing if it is rejected), then committed to the store as one
event, and only then answered. A study is rebuilt, after a restart or any failure between
the policy call and the commit (the policy would be ahead of the log), as
``Policy.from_state_dict(checkpoint)`` followed by every event after the checkpoint in
order: each ``suggest`` again at the time it was asked (the acquisition draws from the
policy's random stream, so the suggestions are replayed too) and each ``observe``. The
rebuilt policy is the one an uninterrupted server holds: same data, hyperparameters and
random stream, so its next suggestion is the same.
"""

from __future__ import annotations

import logging
import math
import re
import sqlite3
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dynbo.deadline import Budget, Deadline, DeadlineExceeded, Interrupted, within
from dynbo.policies import Policy, available, make, option_defaults, policy_class
from dynbo.policies.pending import MAX_BATCH
from dynbo.service.storage import DamagedLog, Event, ServiceStore, StudyRecord, plain

__all__ = [
    "CLOCKS",
    "Conflict",
    "Invalid",
    "NotFound",
    "ServiceError",
    "StudyManager",
    "Unavailable",
]

log = logging.getLogger("dynbo.service")

#: ``wall``: ``t`` is the server's clock, seconds since the study was created;
#: ``client``: the client gives every time.
CLOCKS = ("wall", "client")
#: a study name (matched whole: ``fullmatch``, so that no trailing newline slips through)
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
MAX_DIM = 64
MAX_KEY_LENGTH = 200
MAX_REASON_LENGTH = 1000
#: service alarms kept in memory (all studies)
ALARMS_KEPT = 1000
#: the largest per-study dataset cap a study may ask for (its kernel matrix alone is
#: ``8 n^2`` bytes: 800 MB at this size)
MAX_DATASET_SIZE = 10_000
#: ceilings on the options that size a policy's work, so that a request cannot ask a
#: server for unbounded memory or time.
OPTION_LIMITS = {
    "raw_samples": 65_536,
    "restarts": 256,
    "acquisition_iterations": 10_000,
    "fit_iterations": 10_000,
    "dpp_max_steps": 100_000,
}
#: how deeply an option value may nest lists and objects (``candidates`` is 2 levels): the
#: policies and the store walk option values recursively.
MAX_OPTION_DEPTH = 8
#: the most queries a study may have out at once (``max_pending``): a policy's batch limit
MAX_PENDING = MAX_BATCH
#: the devices a request may put a policy on.
DEVICE_PATTERN = re.compile(r"cpu|mps|cuda(:[0-9]{1,3})?")
#: options a study takes as fields of its own, not as policy options.
RESERVED_OPTIONS = ("bounds", "seed")


class ServiceError(Exception):
    """A request the service refuses; ``status`` is its HTTP status."""

    status = 400


class NotFound(ServiceError):
    status = 404


class Conflict(ServiceError):
    status = 409


class Invalid(ServiceError):
    status = 422


class Unavailable(ServiceError):
    status = 503


@dataclass
class QueryRecord:
    """A query the service returned: ``x`` ``(d,)``, ``t``, ``additional`` ``(m, d)``."""

    query_id: int
    x: list[float]
    t: float
    asked_t: float
    additional: list[list[float]]
    answered: bool = False

    def response(self, study: str, *, repeated: bool) -> dict[str, Any]:
        return {
            "study": study,
            "query_id": self.query_id,
            "x": self.x,
            "t": self.t,
            "additional": self.additional,
            "repeated": repeated,
        }


@dataclass
class _Study:
    record: StudyRecord
    lock: threading.Lock = field(default_factory=threading.Lock)
    policy: Policy | None = None
    deleted: bool = False
    seq: int = 0
    checkpoint_seq: int = 0
    suggestions: int = 0
    observations: int = 0
    observations_at_checkpoint: int = 0
    queries: dict[int, QueryRecord] = field(default_factory=dict)
    #: the queries out (returned, not answered, neither expired nor replaced), oldest first
    pending: list[int] = field(default_factory=list)
    last_time: float | None = None
    replay_mismatches: int = 0
    last_suggest_seconds: float | None = None
    last_refit_seconds: float | None = None
    #: observations retracted by ``forget``
    forgotten: int = 0
    #: observations whose measured constraint values were not all >= 0
    violations: int = 0
    #: suggests and refits stopped by their deadline or a client that went away
    abandoned: int = 0
    last_abandoned: str | None = None


def _logged_budget(event: Event) -> Budget | None:
    """The budget a logged suggestion ran under, as a replay (``None`` without one)."""
    report = ((event.diagnostics or {}).get("extra") or {}).get("time_budget")
    if not report:
        return None
    return Budget.replay(report["spent_at"])


def _unexpired(study: _Study, asked: float) -> list[int]:
    """The queries out that have not expired at study time ``asked``, oldest first."""
    expiry = study.record.pending_expiry
    if expiry is None:
        return list(study.pending)
    return [q for q in study.pending if asked - study.queries[q].asked_t <= expiry]


def _released(study: _Study, asked: float) -> list[int]:
    """The queries out that a suggestion logged at study time ``asked`` stops counting.

    Those out for more than the study's ``pending_expiry`` seconds, and then, when
    ``max_pending`` are still out, the oldest (the suggestion replaced it). The live call
    and the replay both apply this rule, so that the policy accounts for the same
    queries at every replayed suggestion.
    """
    out = _unexpired(study, asked)
    replaced = out[: max(0, len(out) - study.record.max_pending + 1)]
    return [q for q in study.pending if q not in out] + replaced


def _check_pending_limits(max_pending: Any, pending_expiry: Any) -> tuple[int, float | None]:
    if (
        isinstance(max_pending, bool)
        or not isinstance(max_pending, int)
        or not 1 <= max_pending <= MAX_PENDING
    ):
        raise Invalid(
            f"max_pending must be an integer from 1 to {MAX_PENDING}, got {max_pending!r}"
        )
    if pending_expiry is not None:
        expiry = _finite("pending_expiry", pending_expiry)
        if expiry <= 0:
            raise Invalid(f"pending_expiry must be positive seconds or null, got {expiry}")
        return max_pending, expiry
    return max_pending, None


def _check_constraints(value: Any) -> dict[str, float] | None:
    """An observation's constraint values: ``{name: finite number}`` or ``None``."""
    if value is None:
        return None
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise Invalid(f"constraints must be an object of name: value, got {value!r}")
    return {name: _finite(f"constraints[{name!r}]", v) for name, v in value.items()}


def _violated(constraints: Mapping[str, float] | None) -> bool:
    """Whether a measured constraint value is below 0 (``c_j >= 0`` is safe)."""
    return constraints is not None and any(v < 0 for v in constraints.values())


def _observe(
    policy: Policy,
    x: Sequence[float],
    t: float,
    y: float,
    constraints: Mapping[str, float] | None,
) -> None:
    """``policy.observe``, with the constraint values when the observation has them."""
    if constraints is None:
        policy.observe(np.asarray(x), t, y)
    else:
        policy.observe(np.asarray(x), t, y, constraints=dict(constraints))


def _check_key(key: Any) -> None:
    if key is not None and (not isinstance(key, str) or not 0 < len(key) <= MAX_KEY_LENGTH):
        raise Invalid(f"the idempotency key must be 1 to {MAX_KEY_LENGTH} characters")


def _check_name(name: Any) -> str:
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise Invalid(
            f"invalid study name {name!r}: 1 to 64 characters, letters, digits, '_', '.', "
            "'-', starting with a letter or digit"
        )
    return name


def _finite(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Invalid(f"{name} must be a number, got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise Invalid(f"{name} must be finite, got {value}")
    return value


def _point(name: str, value: Any, dim: int) -> list[float]:
    if not isinstance(value, (list, tuple)) or len(value) != dim:
        raise Invalid(f"{name} must be a list of {dim} numbers, got {value!r}")
    return [_finite(f"{name}[{i}]", v) for i, v in enumerate(value)]


def _depth(value: Any) -> int:
    """How deeply ``value`` nests lists and objects (0 for a scalar), without recursion."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, Mapping):
            children: Any = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            deepest = max(deepest, level)
            continue
        deepest = max(deepest, level + 1)
        if level + 1 > MAX_OPTION_DEPTH:
            break  # deep enough to refuse: no need to walk the rest
        stack.extend((child, level + 1) for child in children)
    return deepest


def validate_study(
    name: Any, policy: Any, bounds: Any, options: Any, seed: Any, clock: Any
) -> tuple[str, str, list[list[float]], dict[str, Any], int, str]:
    """Check a study's fields before any policy is built (:class:`Invalid` names the problem)."""
    name = _check_name(name)
    if not isinstance(policy, str) or policy not in available():
        raise Invalid(f"unknown policy {policy!r}; available: {', '.join(available())}")
    if (
        not isinstance(bounds, (list, tuple))
        or len(bounds) != 2
        or not all(isinstance(b, (list, tuple)) for b in bounds)
        or len(bounds[0]) != len(bounds[1])
        or not 1 <= len(bounds[0]) <= MAX_DIM
    ):
        raise Invalid(f"bounds must be [[lower...], [upper...]] with 1 to {MAX_DIM} dimensions")
    dim = len(bounds[0])
    lower = _point("bounds[0]", bounds[0], dim)
    upper = _point("bounds[1]", bounds[1], dim)
    if any(lo >= hi for lo, hi in zip(lower, upper)):
        raise Invalid("bounds: every lower bound must be below its upper bound")
    if options is None:
        options = {}
    if not isinstance(options, Mapping):
        raise Invalid(f"options must be a JSON object, got {options!r}")
    options = dict(options)
    reserved = sorted(set(options) & set(RESERVED_OPTIONS))
    if reserved:
        raise Invalid(f"give {', '.join(reserved)} as the study's own field(s), not as options")
    accepted = option_defaults(policy_class(policy))
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise Invalid(
            f"unknown option(s) {', '.join(map(repr, unknown))} for policy {policy!r}; "
            f"its options: {', '.join(sorted(k for k in accepted if k not in RESERVED_OPTIONS))}"
        )
    for key, value in options.items():
        if _depth(value) > MAX_OPTION_DEPTH:
            raise Invalid(
                f"option {key} nests lists and objects deeper than the service's limit "
                f"{MAX_OPTION_DEPTH}"
            )
    for key, ceiling in OPTION_LIMITS.items():
        value = options.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > ceiling:
            raise Invalid(f"option {key} = {value} is above the service's limit {ceiling}")
    device = options.get("device")
    if device is not None and not (isinstance(device, str) and DEVICE_PATTERN.fullmatch(device)):
        raise Invalid(f"option device = {device!r}: the service takes 'cpu', 'cuda[:n]' or 'mps'")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
        raise Invalid(f"seed must be a non-negative integer, got {seed!r}")
    if clock not in CLOCKS:
        raise Invalid(f"clock must be one of {CLOCKS}, got {clock!r}")
    return name, policy, [lower, upper], options, seed, clock


class StudyManager:
    """The studies of one service store (see the module docstring).

    Args:
        store: the service's SQLite file (:class:`ServiceStore`).
        checkpoint_every: checkpoint a study's ``state_dict`` after this many observations
            (in :meth:`background`; also :meth:`checkpoint_all` at shutdown).
        refit: let :meth:`background` refit the hyperparameters after an observation
            (``Policy.refit``), so that the next ``suggest`` only cleans and acquires.
        clock: the wall clock, Unix seconds (for tests).
    """

    def __init__(
        self,
        store: ServiceStore,
        *,
        checkpoint_every: int = 10,
        refit: bool = True,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if isinstance(checkpoint_every, bool) or int(checkpoint_every) < 1:
            raise ValueError(f"checkpoint_every must be a positive integer, got {checkpoint_every}")
        self.store = store
        self.checkpoint_every = int(checkpoint_every)
        self.refit = bool(refit)
        self._clock = clock
        self._lock = threading.Lock()
        self._studies: dict[str, _Study] = {}
        # the alarms that no log event holds (a failed fit, abandoned work): kept in
        # memory, newest ALARMS_KEPT, numbered from 1 in this process (``boot`` tells a
        # client that resumes a stream that the numbering started again)
        self._alarms: deque[dict[str, Any]] = deque(maxlen=ALARMS_KEPT)
        self._alarm_count = 0
        # their own lock: the event loop reads them, and the manager's lock may be held
        # across a store operation
        self._alarm_lock = threading.Lock()
        self.boot = uuid.uuid4().hex[:8]

    # ================================================================== studies
    def create(
        self,
        name: str,
        policy: str,
        bounds: Sequence[Sequence[float]],
        *,
        options: Mapping[str, Any] | None = None,
        seed: int = 0,
        clock: str = "wall",
        max_dataset_size: int | None = None,
        max_pending: int = 1,
        pending_expiry: float | None = None,
    ) -> dict[str, Any]:
        """Create a study and its policy.

        Args:
            name: letters, digits, ``_ . -`` (64 at most).
            policy: a registered policy name (``dynbo list policies``).
            bounds: ``(2, d)`` the search box, original units.
            options: the policy's keyword options (JSON values).
            seed: the policy's random seed.
            clock: ``"wall"`` (the server's clock, seconds since the creation) or
                ``"client"`` (every ``suggest`` and ``observe`` gives its time).
            max_dataset_size: the most observations the policy may keep (``None``: no
                cap); an observation that could take it over is refused (409). A policy
                that keeps every observation (``gp-ucb``) holds ``O(n^2)`` memory.
            max_pending: the most queries out at once (1 to ``MAX_PENDING``): one per
                device that evaluates in parallel. Each new query accounts for those out
                (the policy's hallucinated observations).
            pending_expiry: seconds of the study's clock after which a query out stops
                counting as out, at the next suggestion (``None``: never); it stays
                answerable.

        Raises:
            Invalid: a bad name, bounds, option or value (the policy's own message).
            Conflict: a study of that name exists.
        """
        name, policy, bounds, options, seed, clock = validate_study(
            name, policy, bounds, options, seed, clock
        )
        if max_dataset_size is not None and (
            isinstance(max_dataset_size, bool)
            or not isinstance(max_dataset_size, int)
            or not 1 <= max_dataset_size <= MAX_DATASET_SIZE
        ):
            raise Invalid(
                f"max_dataset_size must be an integer from 1 to {MAX_DATASET_SIZE} or null, "
                f"got {max_dataset_size!r}"
            )
        max_pending, pending_expiry = _check_pending_limits(max_pending, pending_expiry)
        try:
            instance = make(policy, bounds=bounds, seed=seed, **options)
        except (ValueError, TypeError, RecursionError) as err:
            raise Invalid(f"policy {policy!r}: {err}") from None
        record = StudyRecord(
            name,
            policy,
            bounds,
            plain(options),
            seed,
            clock,
            self._clock(),
            max_dataset_size,
            max_pending,
            pending_expiry,
        )
        with self._lock:
            if name in self._studies and not self._studies[name].deleted:
                raise Conflict(f"a study named {name!r} exists already")
            try:
                self.store.create_study(record)
            except ValueError as err:
                raise Conflict(str(err)) from None
            except sqlite3.Error as err:
                raise Unavailable(
                    f"the study could not be stored ({err}); nothing changed"
                ) from None
            study = _Study(record=record, policy=instance)
            self._studies[name] = study
        with study.lock:
            return self._info(study)

    def delete(self, name: str) -> None:
        """Delete a study, its log and checkpoint (:class:`NotFound` if there is none)."""
        study = self._entry(name)
        with study.lock:
            self._check_alive(study)
            try:
                self.store.delete_study(study.record.name)
            except sqlite3.Error as err:
                raise Unavailable(
                    f"the study could not be deleted ({err}); nothing changed"
                ) from None
            study.deleted = True
            study.policy = None
        with self._alarm_lock:  # a study created again under the name starts without them
            kept = [a for a in self._alarms if a["study"] != name]
            self._alarms.clear()
            self._alarms.extend(kept)
        with self._lock:
            if self._studies.get(name) is study:
                del self._studies[name]

    def studies(self) -> list[dict[str, Any]]:
        """Every study: its record, counts and last dataset size (read from the store)."""
        summaries = self.store.summaries()
        out = []
        for record in self.store.studies():
            counts = summaries.get(
                record.name,
                {
                    "suggestions": 0,
                    "observations": 0,
                    "events": 0,
                    "forgotten": 0,
                    "violations": 0,
                    "dataset_size": 0,
                },
            )
            out.append({**record.as_dict(), **counts})
        return out

    def info(self, name: str) -> dict[str, Any]:
        """A study: record, counts, pending query, hyperparameters and last diagnostics."""
        study = self._loaded(name)
        try:
            return self._info(study)
        finally:
            study.lock.release()

    def _info(self, study: _Study) -> dict[str, Any]:
        policy = study.policy
        assert policy is not None
        diag = policy.diagnostics
        out = [study.queries[q].response(study.record.name, repeated=True) for q in study.pending]
        return plain(
            {
                **study.record.as_dict(),
                "dataset_size": policy.dataset_size,
                "suggestions": study.suggestions,
                "observations": study.observations,
                "forgotten": study.forgotten,
                "violations": study.violations,
                "events": study.seq,
                "last_time": study.last_time,
                # the oldest query out (what a suggest returns again when none may be added)
                "pending": out[0] if out else None,
                "pending_queries": out,
                "hyperparameters": policy.hyperparameters.as_dict(),
                "diagnostics": None if diag is None else diag.as_dict(),
                "checkpoint_seq": study.checkpoint_seq,
                "replay_mismatches": study.replay_mismatches,
                "last_suggest_seconds": study.last_suggest_seconds,
                "last_refit_seconds": study.last_refit_seconds,
                "abandoned": study.abandoned,
                "last_abandoned": study.last_abandoned,
            }
        )

    def dataset(self, name: str) -> dict[str, Any]:
        """The observations the policy keeps now: ``x`` ``(n, d)``, ``t`` and ``y`` ``(n,)``."""
        study = self._loaded(name)
        try:
            assert study.policy is not None
            data = study.policy.dataset
            return plain({"study": name, "x": data.x, "t": data.t, "y": data.y})
        finally:
            study.lock.release()

    def history(self, name: str, limit: int | None = None) -> list[Event]:
        """Every logged event of a study in order (the newest ``limit`` if given)."""
        _check_name(name)
        if self.store.study(name) is None:
            raise NotFound(f"no study named {name!r}")
        return self.store.events(name, limit=limit)

    def policy_state(self, name: str) -> dict[str, Any]:
        """The study's current ``Policy.state_dict()`` (for tests and inspection)."""
        study = self._loaded(name)
        try:
            assert study.policy is not None
            return study.policy.state_dict()
        finally:
            study.lock.release()

    # ================================================================== ask / tell
    def suggest(
        self,
        name: str,
        t: float | None = None,
        *,
        replace: bool = False,
        deadline: Deadline | None = None,
        budget: float | None = None,
        key: str | None = None,
    ) -> dict[str, Any]:
        """The study's next query: ``{"query_id", "x", "t", "additional", "repeated"}``.

        Up to the study's ``max_pending`` queries may be out (returned, not answered);
        each new one accounts for those out. When ``max_pending`` are out, the oldest is
        returned again (``"repeated": true``) unless ``replace``, which asks the policy
        afresh: the oldest then stops counting as out (it stays answerable). A query out
        for more than the study's ``pending_expiry`` stops counting as out at the next
        suggestion.

        Args:
            t: the time, required with the client's clock and refused with the wall
                clock (then: seconds since the study was created, never before the
                latest time seen).
            deadline: bounds the policy's work (its fit, cleaning and acquisition
                search; not the wait for the study's lock nor a rebuild from the log).
            budget: seconds the suggestion may take: a soft budget
                (``Policy.suggest(t, budget=...)``: the fit and the search stop early
                and keep what they have); the checks it cut at are logged with the
                suggestion, so that a replay cuts it at the same places.
            key: the client's idempotency key: a repeated key is answered with the
                query it returned first (``"repeated": true``), and nothing is asked.

        Raises:
            Invalid: a missing, extra or non-finite ``t``, or one before the latest time
                the study has seen; nothing changes.
            Unavailable: the work passed ``deadline``'s budget or was cancelled; the
                policy is as it was before the call (``Policy.suggest`` restores it) and
                nothing is logged.
        """
        _check_key(key)
        study = self._loaded(name)
        try:
            if key is not None:
                previous = self.store.event_by_key(name, key)
                if previous is not None:
                    if previous.kind != "suggest" or previous.query_id not in study.queries:
                        raise Conflict(f"the idempotency key was used by a {previous.kind} event")
                    return study.queries[previous.query_id].response(name, repeated=True)
            # checked even when the pending query is returned: a bad t is refused alike
            asked = self._time(study, t, "suggest")
            if study.last_time is not None and asked < study.last_time:
                raise Invalid(
                    f"time went backwards: suggest(t={asked!r}) before the latest time the "
                    f"study has seen (t={study.last_time!r})"
                )
            out = _unexpired(study, asked)
            if len(out) >= study.record.max_pending and not replace:
                return study.queries[out[0]].response(name, repeated=True)
            released = _released(study, asked)
            out = [q for q in out if q not in released]
            policy = study.policy
            assert policy is not None
            start = time.perf_counter()
            try:
                try:
                    # an expired or replaced query stays answerable, but the policy stops
                    # accounting for it (the replay applies the same rule)
                    for q in released:
                        policy.cancel_pending(study.queries[q].x)
                    with within(deadline):
                        query = policy.suggest(asked, budget=budget)
                except BaseException:
                    if released:
                        study.policy = None  # the cancel took, the suggest did not: rebuild
                    raise
            except ValueError as err:
                raise Invalid(str(err)) from None
            except DeadlineExceeded as err:
                study.last_suggest_seconds = time.perf_counter() - start
                study.abandoned += 1
                study.last_abandoned = f"suggest {err}"
                self.alarm(name, "abandoned", study.last_abandoned)
                raise Unavailable(
                    f"suggest {err} and was abandoned; nothing changed. The study's options "
                    "(raw_samples, restarts, acquisition_iterations, fit_iterations) or its "
                    "dataset size make one suggestion cost more than the service allows: "
                    "lower them, or start the server with a larger --suggest-timeout"
                ) from None
            except Interrupted as err:
                study.abandoned += 1
                study.last_abandoned = f"suggest {err}"
                self.alarm(name, "abandoned", study.last_abandoned)
                raise Unavailable(f"suggest {err}; nothing changed") from None
            except Exception as err:  # the policy is restored; the caller gets the error
                self.alarm(name, "fit_failure", f"suggest failed: {type(err).__name__}: {err}")
                raise
            seconds = time.perf_counter() - start
            try:
                additional = np.asarray(getattr(query, "additional", np.empty((0, policy.dim))))
                record = QueryRecord(
                    query_id=study.suggestions + 1,
                    x=plain(np.asarray(query.x, dtype=float)),
                    t=float(query.t),
                    asked_t=asked,
                    additional=plain(additional.reshape(-1, policy.dim)),
                )
                diag = policy.diagnostics
                diagnostics = None if diag is None else diag.as_dict()
            except BaseException:
                study.policy = None  # one iteration ahead of the log: rebuild it from the log
                raise
            self._commit(
                study,
                kind="suggest",
                query_id=record.query_id,
                asked_t=asked,
                x=record.x,
                t=record.t,
                additional=record.additional,
                dataset_size=policy.dataset_size,
                seconds=seconds,
                diagnostics=diagnostics,
                idempotency_key=key,
            )
            study.suggestions += 1
            study.queries[record.query_id] = record
            study.pending = [*out, record.query_id]
            study.last_time = asked if study.last_time is None else max(study.last_time, asked)
            study.last_suggest_seconds = seconds
            return record.response(name, repeated=False)
        finally:
            study.lock.release()

    def observe(
        self,
        name: str,
        y: float,
        *,
        query_id: int | None = None,
        x: Sequence[float] | None = None,
        t: float | None = None,
        additional: Sequence[Mapping[str, Any]] = (),
        key: str | None = None,
        constraints: Mapping[str, float] | None = None,
    ) -> dict[str, Any]:
        """Record ``y = f(x, t)``: the answer to query ``query_id``, or a free observation.

        Args:
            y: the observed value.
            query_id: the query answered (its ``x``; ``t`` defaults to its ``t``).
            x: ``(d,)`` the point (required without ``query_id``; with it, it must be
                the query's point).
            t: the time of the evaluation (required without ``query_id`` with the
                client's clock; the server's now with the wall clock).
            additional: answers to the query's additional points,
                ``[{"x": (d,), "y": .., "t": ..}]`` (``t`` defaults to the main ``t``),
                given to ``policy.observe_additional``.
            key: the client's idempotency key: a repeated key is answered with the
                first response (``"repeated": true``) and records nothing.
            constraints: the measured constraint values ``{name: value}`` of a study
                whose policy declares constraints (its ``constraints`` option; every
                declared name, ``c >= 0`` is safe), given to ``policy.observe``.

        Returns:
            ``{"study", "seq", "observation", "query_id", "x", "t", "y", "additional",
            "dataset_size", "repeated", "violated"}`` (``violated``: a measured
            constraint value is below 0).

        Raises:
            NotFound: an unknown query id. Conflict: a query answered already, or the
                study's dataset at its ``max_dataset_size``.
            Invalid: NaN/inf, a wrong shape, a point outside the bounds, a time before
                the latest one, additional answers the policy refuses. Nothing changes.
        """
        _check_key(key)
        study = self._loaded(name)
        try:
            if key is not None:
                previous = self.store.event_by_key(name, key)
                if previous is not None:
                    if previous.kind != "observe" or previous.response is None:
                        raise Conflict(f"the idempotency key was used by a {previous.kind} event")
                    return {**previous.response, "repeated": True}
            policy = study.policy
            assert policy is not None
            dim = policy.dim
            value = _finite("y", y)
            measured = _check_constraints(constraints)
            query: QueryRecord | None = None
            if query_id is not None:
                if isinstance(query_id, bool) or not isinstance(query_id, int):
                    raise Invalid(f"query_id must be an integer, got {query_id!r}")
                query = study.queries.get(query_id)
                if query is None:
                    raise NotFound(f"study {name!r} has no query {query_id}")
                if query.answered:
                    raise Conflict(f"query {query_id} of study {name!r} was answered already")
                if x is not None:
                    given = np.asarray(_point("x", x, dim))
                    width = np.asarray(study.record.bounds[1]) - np.asarray(study.record.bounds[0])
                    if np.any(np.abs(given - np.asarray(query.x)) > 1e-9 * width):
                        raise Invalid(f"x {x} is not the point of query {query_id} ({query.x})")
                point = list(query.x)
                when = query.t if t is None else self._time(study, t, "observe")
            else:
                if x is None:
                    raise Invalid("x is required for an observation that answers no query_id")
                point = _point("x", x, dim)
                when = self._time(study, t, "observe")
            answers = self._additional(additional, dim, when)
            cap = study.record.max_dataset_size
            if cap is not None and policy.dataset_size + 1 + len(answers) > cap:
                raise Conflict(
                    f"study {name!r} keeps {policy.dataset_size} observations and its "
                    f"max_dataset_size is {cap}: this observation (with {len(answers)} "
                    "additional) could take it over, so it was not recorded. A policy that "
                    "removes observations (e.g. wdbo, sw-gp-ucb) stays under a cap; a "
                    "new study with a larger max_dataset_size takes more"
                )
            snapshot = policy.state_dict() if answers else None
            start = time.perf_counter()
            try:
                _observe(policy, point, when, value, measured)
                if answers:
                    if not hasattr(policy, "observe_additional"):
                        raise ValueError(
                            f"policy {study.record.policy!r} takes no additional observations"
                        )
                    policy.observe_additional(
                        np.asarray([a["x"] for a in answers]).reshape(-1, dim),
                        np.asarray([a["t"] for a in answers]),
                        np.asarray([a["y"] for a in answers]),
                    )
            except BaseException as err:
                if snapshot is not None:  # observe took, its additional answers did not
                    policy.load_state_dict(snapshot)
                if isinstance(err, ValueError):
                    raise Invalid(str(err)) from None
                raise
            seconds = time.perf_counter() - start
            seq = study.seq + 1
            response = {
                "study": name,
                "seq": seq,
                "observation": study.observations + 1,
                "query_id": query_id,
                "x": point,
                "t": when,
                "y": value,
                "additional": len(answers),
                "dataset_size": policy.dataset_size,
                "repeated": False,
                "violated": _violated(measured),
            }
            self._commit(
                study,
                kind="observe",
                query_id=query_id,
                x=point,
                t=when,
                y=value,
                additional=answers,
                idempotency_key=key,
                response=response,
                dataset_size=policy.dataset_size,
                seconds=seconds,
                constraints=measured,
            )
            study.observations += 1
            study.violations += _violated(measured)
            if query is not None:
                query.answered = True
                if query.query_id in study.pending:
                    study.pending.remove(query.query_id)
            times = [when, *(a["t"] for a in answers)]
            if study.last_time is not None:
                times.append(study.last_time)
            study.last_time = max(times)
            return response
        finally:
            study.lock.release()

    def forget(self, name: str, seq: int, reason: str | None = None) -> dict[str, Any]:
        """Retract observation event ``seq``: the policy forgets it (``Policy.forget``) and
        the log records a ``forget`` event with ``reason``, so that a replay after a crash
        forgets it again. Idempotent: retracting it again answers the first response with
        ``"repeated": true``.

        Returns:
            ``{"study", "seq", "forgets", "x", "t", "y", "reason", "dataset_size",
            "repeated"}`` (``seq``: the forget event's own number).

        Raises:
            Invalid: a bad ``seq`` or ``reason``. NotFound: no observation event ``seq``.
            Conflict: the policy keeps it no more (removed by its own rule or a reset).
            Nothing changes.
        """
        if isinstance(seq, bool) or not isinstance(seq, int) or seq < 1:
            raise Invalid(f"the observation's seq must be a positive integer, got {seq!r}")
        if reason is not None and (not isinstance(reason, str) or len(reason) > MAX_REASON_LENGTH):
            raise Invalid(f"the reason must be text of at most {MAX_REASON_LENGTH} characters")
        study = self._loaded(name)
        try:
            earlier = self.store.forget_of(name, seq)
            if earlier is not None and earlier.response is not None:
                return {**earlier.response, "repeated": True}
            target = self.store.event(name, seq)
            if target is None or target.kind != "observe":
                raise NotFound(f"study {name!r} has no observation event {seq}")
            policy = study.policy
            assert policy is not None and target.y is not None
            start = time.perf_counter()
            try:
                policy.forget(np.asarray(target.x), target.t, target.y)
            except ValueError as err:
                raise Conflict(f"observation event {seq} of study {name!r}: {err}") from None
            response = {
                "study": name,
                "seq": study.seq + 1,
                "forgets": seq,
                "x": target.x,
                "t": target.t,
                "y": target.y,
                "reason": reason,
                "dataset_size": policy.dataset_size,
                "repeated": False,
            }
            self._commit(
                study,
                kind="forget",
                x=target.x,
                t=target.t,
                y=target.y,
                dataset_size=policy.dataset_size,
                seconds=time.perf_counter() - start,
                response=response,
                forgets=seq,
                reason=reason,
            )
            study.forgotten += 1
            return response
        finally:
            study.lock.release()

    def _additional(
        self, additional: Sequence[Mapping[str, Any]] | None, dim: int, default_t: float
    ) -> list[dict[str, Any]]:
        if not additional:
            return []
        if not isinstance(additional, (list, tuple)):
            raise Invalid("additional must be a list of {x, y, t} objects")
        out = []
        for i, item in enumerate(additional):
            if not isinstance(item, Mapping) or "x" not in item or "y" not in item:
                raise Invalid(f"additional[{i}] must be an object with x and y (and t)")
            when = item.get("t")
            out.append(
                {
                    "x": _point(f"additional[{i}].x", item["x"], dim),
                    "y": _finite(f"additional[{i}].y", item["y"]),
                    "t": default_t if when is None else _finite(f"additional[{i}].t", when),
                }
            )
        return out

    def background(self, name: str, deadline: Deadline | None = None) -> dict[str, Any]:
        """After an observation: checkpoint when due, then refit ahead (if enabled).

        A refit that passes ``deadline`` is abandoned (the policy is as it was; the next
        ``suggest`` fits as usual) and logged.

        Returns ``{"checkpoint": bool, "refit": bool}`` (nothing for a study that is
        gone or not loaded).
        """
        with self._lock:
            study = self._studies.get(name)
        done = {"checkpoint": False, "refit": False}
        if study is None:
            return done
        with study.lock:
            if study.deleted or study.policy is None:
                return done
            if study.observations - study.observations_at_checkpoint >= self.checkpoint_every:
                self._checkpoint(study)
                done["checkpoint"] = True
            if self.refit and hasattr(study.policy, "refit"):
                start = time.perf_counter()
                try:
                    with within(deadline):
                        done["refit"] = bool(study.policy.refit())
                except Interrupted as err:
                    log.warning("background refit of study %r: %s; abandoned", name, err)
                    study.last_refit_seconds = time.perf_counter() - start
                    study.abandoned += 1
                    study.last_abandoned = f"refit {err}"
                    self.alarm(name, "abandoned", study.last_abandoned)
                    return done
                except Exception as err:
                    self.alarm(name, "fit_failure", f"refit failed: {type(err).__name__}: {err}")
                    raise
                if done["refit"]:
                    study.last_refit_seconds = time.perf_counter() - start
        return done

    def alarm(self, name: str, kind: str, message: str) -> None:
        """Record a service alarm of study ``name`` (see :meth:`service_alarms`)."""
        with self._alarm_lock:
            self._alarm_count += 1
            self._alarms.append(
                {
                    "id": self._alarm_count,
                    "study": name,
                    "kind": kind,
                    "message": message,
                    "wall": self._clock(),
                }
            )

    def service_alarms(self, name: str, after: int = 0) -> list[dict[str, Any]]:
        """Study ``name``'s alarms numbered above ``after`` that no log event holds:
        ``fit_failure`` (a suggest or refit that raised) and ``abandoned`` (work stopped
        by the time limit or a client that went away)."""
        with self._alarm_lock:
            return [dict(a) for a in self._alarms if a["id"] > after and a["study"] == name]

    def cost(self, name: str) -> float:
        """Seconds of the study's last ``suggest`` or background refit, whichever took
        longer (0 for a study not loaded): the service's lane choice. Read without the
        study's lock: a stale value only picks the other lane once."""
        study = self._studies.get(name)  # one dict read: atomic, and no lock on the event loop
        if study is None:
            return 0.0
        return max(study.last_suggest_seconds or 0.0, study.last_refit_seconds or 0.0)

    def checkpoint(self, name: str) -> None:
        """Checkpoint one study now."""
        study = self._loaded(name)
        try:
            self._checkpoint(study)
        finally:
            study.lock.release()

    def checkpoint_all(self) -> int:
        """Checkpoint every loaded study with events after its checkpoint (at shutdown)."""
        with self._lock:
            studies = list(self._studies.values())
        count = 0
        for study in studies:
            with study.lock:
                if study.policy is not None and not study.deleted:
                    if study.seq > study.checkpoint_seq:
                        self._checkpoint(study)
                        count += 1
        return count

    def _checkpoint(self, study: _Study) -> None:
        assert study.policy is not None
        try:
            self.store.save_checkpoint(study.record.name, study.seq, study.policy.state_dict())
        except sqlite3.Error as err:  # the log is complete: a missed checkpoint costs time only
            log.warning("checkpoint of study %r failed: %s", study.record.name, err)
            return
        study.checkpoint_seq = study.seq
        study.observations_at_checkpoint = study.observations

    # ================================================================== internals
    def _time(self, study: _Study, t: Any, what: str) -> float:
        if study.record.clock == "client":
            if t is None:
                raise Invalid(f"t is required: study {study.record.name!r} uses the client's clock")
            return _finite("t", t)
        if what == "suggest" and t is not None:
            raise Invalid(
                f"study {study.record.name!r} uses the server's wall clock: give no t to suggest"
            )
        if t is not None:
            return _finite("t", t)
        now = self._clock() - study.record.created_at
        return max(now, study.last_time) if study.last_time is not None else now

    def _commit(self, study: _Study, **event: Any) -> None:
        """Append the event the policy has just applied; on any failure, drop the policy.

        The policy then holds a change the log does not, so it is rebuilt from the log by
        the next request (whatever the failure: a full disk, or a bug in the encoding).
        """
        seq = study.seq + 1
        try:
            self.store.append(study.record.name, seq=seq, **event)
        except BaseException as err:
            study.policy = None
            if isinstance(err, sqlite3.Error):
                raise Unavailable(
                    f"the event could not be stored ({err}); nothing changed"
                ) from None
            raise
        study.seq = seq

    def _entry(self, name: str) -> _Study:
        _check_name(name)
        with self._lock:
            study = self._studies.get(name)
            if study is None or study.deleted:
                record = self.store.study(name)
                if record is None:
                    raise NotFound(f"no study named {name!r}")
                study = _Study(record=record)
                self._studies[name] = study
            return study

    @staticmethod
    def _check_alive(study: _Study) -> None:
        if study.deleted:
            raise NotFound(f"no study named {study.record.name!r}")

    def _loaded(self, name: str) -> _Study:
        """The study with its policy built, its lock held (the caller releases it)."""
        study = self._entry(name)
        study.lock.acquire()
        try:
            self._check_alive(study)
            if study.policy is None:
                self._rebuild(study)
        except BaseException:
            study.lock.release()
            raise
        return study

    def _from_checkpoint(self, name: str) -> tuple[int, Policy | None]:
        """``(seq, policy)`` of the study's checkpoint, or ``(0, None)``: replay the whole log.

        A checkpoint that cannot be read or loaded (its bytes were changed outside the
        service) is passed over with a warning: the log alone rebuilds the study.
        """
        try:
            saved = self.store.checkpoint(name)
            if saved is None:
                return 0, None
            return saved[0], Policy.from_state_dict(saved[1])
        except (DamagedLog, ValueError) as err:
            log.warning("study %r: %s; replaying its whole log instead", name, err)
            return 0, None

    def _rebuild(self, study: _Study) -> None:
        """Checkpoint + the events after it (see the module docstring)."""
        name = study.record.name
        start_seq, policy = self._from_checkpoint(name)
        if policy is None:
            record = study.record
            policy = make(record.policy, bounds=record.bounds, seed=record.seed, **record.options)
        fresh = _Study(record=study.record, lock=study.lock, checkpoint_seq=start_seq)
        mismatches = 0
        for event in self.store.events(name):
            replay = event.seq > start_seq
            if event.kind == "suggest":
                assert event.query_id is not None and event.asked_t is not None
                released = _released(fresh, event.asked_t)
                if replay:
                    for q in released:  # expired or replaced: as the live call did
                        policy.cancel_pending(fresh.queries[q].x)
                    # exactly as logged: a budget that cut the suggestion cuts it again
                    # at the same checks; no deadline of the request that rebuilds it
                    with within(None):
                        query = policy.suggest(event.asked_t, budget=_logged_budget(event))
                    if not np.array_equal(np.asarray(query.x, dtype=float), np.asarray(event.x)):
                        mismatches += 1
                fresh.queries[event.query_id] = QueryRecord(
                    event.query_id, event.x, event.t, event.asked_t, event.additional
                )
                fresh.suggestions += 1
                fresh.pending = [q for q in fresh.pending if q not in released]
                fresh.pending.append(event.query_id)
                fresh.last_suggest_seconds = event.seconds
                times = [event.asked_t]
            elif event.kind == "forget":
                if replay:
                    try:
                        policy.forget(np.asarray(event.x), event.t, event.y)
                    except ValueError as err:  # another version removed it already
                        log.warning("study %r: replayed forget %d: %s", name, event.seq, err)
                        mismatches += 1
                fresh.forgotten += 1
                times = []
            else:
                assert event.y is not None
                if replay:
                    _observe(policy, event.x, event.t, event.y, event.constraints)
                    if event.additional:
                        policy.observe_additional(
                            np.asarray([a["x"] for a in event.additional]).reshape(-1, policy.dim),
                            np.asarray([a["t"] for a in event.additional]),
                            np.asarray([a["y"] for a in event.additional]),
                        )
                fresh.observations += 1
                fresh.violations += _violated(event.constraints)
                if not replay:
                    fresh.observations_at_checkpoint = fresh.observations
                if event.query_id is not None and event.query_id in fresh.queries:
                    fresh.queries[event.query_id].answered = True
                    if event.query_id in fresh.pending:
                        fresh.pending.remove(event.query_id)
                times = [event.t] + [a["t"] for a in event.additional]
            fresh.seq = event.seq
            if fresh.last_time is not None:
                times.append(fresh.last_time)
            if times:
                fresh.last_time = max(times)
        if mismatches:
            log.warning(
                "study %r: %d replayed suggestion(s) differ from the logged ones "
                "(another dynbo or torch version?); the logged queries stand",
                name,
                mismatches,
            )
        for attribute in (
            "seq",
            "checkpoint_seq",
            "suggestions",
            "observations",
            "observations_at_checkpoint",
            "forgotten",
            "violations",
            "queries",
            "pending",
            "last_time",
            "last_suggest_seconds",
        ):
            setattr(study, attribute, getattr(fresh, attribute))
        study.replay_mismatches = mismatches
        study.policy = policy
