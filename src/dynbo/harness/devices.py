"""Several devices at once: one policy, ``q`` devices, an event simulation of the protocol.

The papers' protocol has one device: the policy asks, the device evaluates, the answer
comes back, the policy asks again. With ``Protocol.devices = q`` the run simulates ``q``
devices that evaluate at once while one policy process (whose thinking is serial) keeps
them busy (``docs/harness.md``, "Several devices"):

1. **Start.** After the warm-up all ``q`` devices are free at the loop's start ``s_1``.
   The policy serves them one after the other, lowest-numbered device first, exactly as
   in the steady state below: it suggests at ``s_1``, that query lands at
   ``s_1 + D_1`` on device 0, it suggests again at ``s_1 + D_1`` for device 1 (accounting
   for the pending query of device 0), and so on. (Not one ``suggest_batch``: that would
   keep device 0 idle until the whole batch is thought out, and stamp every query with
   the batch's start.)
2. **Events.** Whenever the policy is free (clock time ``s``) and a device is free, the
   policy observes every answer that has arrived by ``s`` (in arrival order), suggests
   at ``s`` (accounting for the queries still out, by GP-BUCB's hallucination:
   :mod:`dynbo.acquisition.pending`), and the clock charges its response time ``D``
   (measured, or ``R(n)`` of the dataset size ``n`` when it suggests). The query is for
   the lowest-numbered device free at ``s``; it lands at ``t = max(s + D, query.t)`` and
   is evaluated there; its answer arrives at ``t + c`` (plus ``m c_a`` for ``m`` additional queries,
   as with one device). The policy is free again at ``s + D``, even when a look-ahead
   query lands later. When every device is busy, the clock moves to the next arrival.
3. **Ties.** Answers arriving at the same time are observed in the order their queries
   were made; free devices are served lowest number first.
4. **Horizon.** No suggestion starts at or after the horizon ``T``; a query that would
   land after ``T`` is not made, and the run ends there (as with one device). Answers
   still out at the end are never observed (as the last answer of a one-device run).
5. **Regret.** Each query's regret ``r = max_x f(x, t) - f(x_query, t)`` at its landing
   time ``t``; ``average_regret`` is their mean over the queries of every device (per
   query). ``time_averaged_regret`` holds each device's regret from the landing of its
   query until the landing of its next one (its last until ``T``), sums over devices
   and divides by the devices' total time from their first landing to ``T``: the mean
   regret of the settings under evaluation at a random time on a random device. With
   one device both are the papers' metrics.

Each record's ``extra["device"]`` says which device (0 to ``q - 1``) made the query.
Records are in the order the queries were made (``k``); their landing times increase
with ``k`` except after a look-ahead query (ABO), which may land after later ones.

With ``q = 1`` the simulation makes exactly the one-device loop's records (tested), but
the harness runs that loop itself (:class:`dynbo.harness.loop._Run`), so runs with one
device are those stored before the option existed, identities included.

Policies: SparQ-GP-UCB and W-SparQ-GP-UCB are refused with ``q > 1``: their additional
queries belong to their latest suggestion only (``observe_additional`` accepts the
answers to the newest request), so a device answering an older one could not report
them. ABO's look-ahead works as above: its device waits (idle) until the time the query
asks for, while the policy serves the other devices. W-GP-UCB's kernel-ridge view cannot
account for pending queries (:func:`dynbo.acquisition.pending.with_pending`), so its
devices may be given the same point. The step clock is refused with ``q > 1``: it has no
response time, so devices buy nothing there that a batch per step would not.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dynbo.harness.clocks import Clock
from dynbo.harness.loop import _Run, _Step, summarize
from dynbo.validation import positive_int

__all__ = [
    "MAX_DEVICES",
    "DeviceRun",
    "check_policy_devices",
    "check_protocol_devices",
    "summarize_devices",
]

#: the most devices a run may simulate (a policy's ``suggest_batch`` limit,
#: ``dynbo.policies.pending.MAX_BATCH``)
MAX_DEVICES = 64

#: policies that ask for additional queries (refused with several devices: module docstring)
_ADDITIONAL_QUERY_POLICIES = ("sparq-gp-ucb", "w-sparq-gp-ucb")


def check_protocol_devices(devices: Any, clock: str) -> int:
    """Validate a protocol's ``devices`` option for its ``clock``; return it.

    Raises:
        ValueError: not an integer from 1 to :data:`MAX_DEVICES`, or ``devices > 1``
            under the step clock.
    """
    try:
        q = positive_int("devices", devices)
    except ValueError:
        raise ValueError(
            f"devices must be an integer from 1 to {MAX_DEVICES}, got {devices!r}"
        ) from None
    if q > MAX_DEVICES:
        raise ValueError(f"devices must be an integer from 1 to {MAX_DEVICES}, got {devices!r}")
    if q > 1 and clock == "step":
        raise ValueError(
            f"devices = {q} needs a continuous clock (wall, measured or modeled): the step "
            "clock has no response time for several devices to overlap"
        )
    return q


def check_policy_devices(policy: str, devices: int) -> None:
    """Refuse a policy that cannot run with ``devices`` devices (module docstring).

    Raises:
        ValueError: a SparQ policy with ``devices > 1``.
    """
    if devices > 1 and policy in _ADDITIONAL_QUERY_POLICIES:
        raise ValueError(
            f"policy {policy!r} cannot run with devices = {devices}: its additional "
            "queries belong to its latest suggestion only, so a device answering an "
            "older query could not report them (use devices = 1)"
        )


@dataclass(order=True)
class _Flight:
    """A query out on a device: ordered by arrival time, then by the order it was made."""

    #: clock time its answer (and its additional answers) arrive at
    arrival: float
    #: the record's ``k``: ties in arrival are observed in the order the queries were made
    k: int
    device: int = field(compare=False)
    #: the answer told to the policy's ``observe``: ``(x (d,), t, y)`` (and what else the
    #: one-device loop tells with it)
    answer: tuple[Any, ...] = field(compare=False)
    #: the additional answers ``(points (m, d), times, values)``, or ``None``
    additional: tuple[np.ndarray, list[float], list[float]] | None = field(compare=False)


def _move_to(clock: Clock, t: float) -> None:
    """Let the clock reach ``t`` (a virtual clock jumps there exactly; the wall waits)."""
    if clock.mode == "wall":
        clock.wait_until(t)
    elif t > clock.now:
        # set, not advanced by ``t - now``: ``now + (t - now)`` can round off ``t``, and
        # the one-device loop starts its next iteration exactly at ``landing + c``
        clock.now = float(t)


class DeviceRun(_Run):
    """A run with ``spec.protocol.devices`` devices: the event simulation of the module
    docstring, from the same steps as the one-device loop (:class:`~dynbo.harness.loop._Run`).
    """

    def __init__(self, spec: Any) -> None:
        super().__init__(spec)
        self.devices = int(spec.protocol.devices)
        #: the queries out, a heap by (arrival, k)
        self.flights: list[_Flight] = []
        #: the answers arrived and not yet observed, in arrival order
        self.arrived: list[_Flight] = []

    def iterate(
        self,
        on_iteration: Callable[[dict[str, Any]], None] | None,
        observer: Callable[[Any, dict[str, Any]], None] | None,
    ) -> None:
        """Serve the devices until the run is over (module docstring, steps 1-4)."""
        busy: set[int] = set()
        while True:
            now = self.clock.current()
            while self.flights and self.flights[0].arrival <= now:
                done = heapq.heappop(self.flights)
                busy.discard(done.device)
                self.arrived.append(done)
            if len(busy) == self.devices:
                # every device is busy: the policy waits for the next answer
                arrival = self.flights[0].arrival
                if arrival >= self.horizon:  # no suggestion starts at or after T
                    break
                _move_to(self.clock, arrival)
                continue
            step = self.begin()
            if step is None:  # the horizon or the iteration cap is reached
                break
            device = min(set(range(self.devices)) - busy)
            if self.devices > 1:  # one device records as the one-device loop does
                step.extra["device"] = device
            if not self.query(step, on_iteration, observer):  # it would land after T
                break
            # what the one-device loop would tell the policy next (record keeps it)
            answer, additional = self.pending, self.pending_additional
            assert answer is not None
            arrival = step.landing + (self.cost + step.made * self.additional_cost)
            heapq.heappush(self.flights, _Flight(arrival, self.k, device, answer, additional))
            busy.add(device)

    def tell(self) -> None:
        """Tell the policy every answer arrived since its last suggestion, in arrival
        order (inside the loop's timed work, so the measured clock charges them)."""
        answers, self.arrived = self.arrived, []
        for flight in answers:
            self.policy.observe(*flight.answer)
            if flight.additional is not None:
                self.policy.observe_additional(*flight.additional)

    def land(self, step: _Step) -> bool:
        """The clock charges ``D`` (the policy is busy until ``s + D``); the query lands at
        ``t = max(s + D, query.t)``, which may be later (a look-ahead query's device waits).
        Whether ``t`` is within the horizon."""
        clock = self.clock
        if clock.mode != "wall":
            clock.advance(step.response)
        ready = clock.current()
        wanted = step.query.t
        # the one-device clock's ``wait_until`` arithmetic, so that q = 1 is bit-identical
        step.landing = ready + (wanted - ready) if wanted > ready else ready
        return step.landing <= self.horizon

    def summary(self) -> dict[str, Any]:
        """The run's metrics: per-query and per-device time-averaged regret (module
        docstring, step 5)."""
        if self.devices == 1:
            return super().summary()
        return summarize_devices(self.iterations, self.horizon)


def summarize_devices(iterations: list[dict[str, Any]], horizon: float) -> dict[str, Any]:
    """:func:`~dynbo.harness.loop.summarize` for a run with several devices.

    Every metric is that of the records, but ``time_averaged_regret``: each device's
    regret held from the landing of its query to the landing of its next one (its last
    until ``horizon``, seconds), summed over devices, divided by the sum over devices of
    the time from their first landing to ``horizon`` (module docstring, step 5). Each
    loop record's ``extra`` must name its ``device``.
    """
    out = summarize(iterations, horizon)
    loop = [r for r in iterations if not r["warmup"]]
    if not loop:
        return out
    by_device: dict[int, list[dict[str, Any]]] = {}
    for row in loop:
        by_device.setdefault(int(json.loads(row["extra"])["device"]), []).append(row)
    weighted, duration = 0.0, 0.0
    for rows in by_device.values():
        regrets = np.array([r["regret"] for r in rows])
        times = np.array([r["t"] for r in rows])
        ends = np.append(times[1:], max(horizon, times[-1]))
        weighted += float(np.sum(regrets * (ends - times)))
        duration += float(ends[-1] - times[0])
    out["time_averaged_regret"] = weighted / duration if duration > 0 else None
    out["devices"] = len(by_device)
    return out
